// The 200 body of /rank (docs/api.md) built from a RunResult. Numbers, strings and cells
// go through core/json_write.h and data/json_cell.h; error bodies are api/errors.h's.
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/json_cell.h"
#include "sched/scheduler.h"

namespace rankd {

// What an answer may add to the run's own fields (empty: left out).
struct ResponseExtras {
  std::string_view experiment;  // the experiment that applied (docs/experiments.md)
  std::string_view variant;     // with it: its variant, or "control"
  std::string_view served_id;   // the request's served-log record (docs/served-log.md)
};

// {"plan","user_id","items","count","took_us","degraded"[,"experiment","variant"]
// [,"served_id"][,"nodes"]}.
void AppendRankResponse(const RunResult& r, bool explain, std::string& out,
                        const ResponseExtras& extras = {});

// The pieces AppendRankResponse is made of, in its order, for answers whose items are
// cut into pages (rank/page_snapshot.h) — each page is one of these bodies:
//   AppendRankHead, items written by RankItemWriter (comma-separated),
//   AppendRankCounts, AppendRankMeta, [AppendRankCursor], [AppendRankNodes], '}'.
// None of them writes a raw newline (strings are escaped): a page snapshot keeps its
// pieces one to a line.

// {"plan":<name of the plan that ran>,"user_id":<as asked>,"items":[
void AppendRankHead(const RunResult& r, std::string& out);
// ],"count":<count>,"took_us":<took_us>
void AppendRankCounts(size_t count, int64_t took_us, std::string& out);
// ,"degraded":[...][,"experiment":..,"variant":..][,"served_id":..]
void AppendRankMeta(const RunResult& r, const ResponseExtras& extras, std::string& out);
// ,"cursor":"<cursor>" (base64url: nothing to escape)
void AppendRankCursor(std::string_view cursor, std::string& out);
// ,"nodes":[...] (explain)
void AppendRankNodes(const RunResult& r, std::string& out);

// The items of a run's output, one JSON object per row, its columns the plan's output
// columns (all the output's when the plan names none). Their `"name":` keys are
// rendered once, here. Borrows `r`: it must outlive the writer.
class RankItemWriter {
 public:
  explicit RankItemWriter(const RunResult& r);
  RankItemWriter(const RankItemWriter&) = delete;
  RankItemWriter& operator=(const RankItemWriter&) = delete;
  // The item of physical row `row` of the output.
  void Append(uint32_t row, std::string& out) const;

 private:
  using Col = std::pair<std::string, const Column*>;  // `"name":`, null when absent
  Col inline_cols_[8];                                // most plans: no allocation
  std::vector<Col> heap_cols_;
  std::span<Col> cols_;
};

}  // namespace rankd
