// The pages stage of /rank (docs/api.md, "Pages"; docs/server.md, "Pages: snapshots and
// cursors"): a first page ("page_size") writes the ranking's snapshot to --page-endpoint
// and hands out a cursor; a later page ("cursor") checks its cursor and reads its items
// back from the snapshot, in one round trip and without a plan run, answered here.
//
// Threads: the shard's loop thread.
#pragma once

#include <string>

#include "core/coro.h"
#include "core/rate_budget.h"
#include "rank/page_snapshot.h"
#include "rank/stage.h"

namespace rankd {

class PagesStage : public StageBase {
 public:
  struct Slot {
    int page_size = 0;       // 0: no pages asked
    std::string plan_asked;  // the plan as asked, which its cursor is bound to
    PageSnapshot snapshot;   // the run's items, as later pages read them
    std::string cursor;      // of the second page (empty: everything fit, or not written)
  };
  explicit PagesStage(RankShard& shard)
      : StageBase(shard), write_budget_(shard.opts.page_write_bytes_per_s) {}

  Status Before(RankContext& ctx, RankInput& in);
  bool Settles(const RankContext& ctx) const;
  // Builds the snapshot and, when more than a page's worth, writes it and waits for
  // Redis to acknowledge it.
  Coro<void> Settle(RankContext& ctx);
  bool WriteBody(RankContext& ctx, std::string& out);

 private:
  struct NextPage {
    PageCursor cursor;
    size_t page_size = 0;
    std::string plan;  // as asked: the next cursor is bound to it too
    UserId user_id;
    std::string request_id;
    TimePoint t0;
    int64_t deadline_ms = 0;
    Listener listener = Listener::kMain;
  };
  Coro<void> RunNextPage(http::Responder res, NextPage p);
  // Answers and counts a later page's error (before its Redis read, or after it).
  void AnswerError(http::Responder& res, const Error& e, TimePoint t0, std::string_view request_id);

  RateBudget write_budget_;  // --page-write-bytes-per-s
};

}  // namespace rankd
