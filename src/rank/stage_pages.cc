#include "rank/stage_pages.h"

#include <algorithm>
#include <chrono>

#include "api/errors.h"
#include "core/free_list.h"
#include "core/line_rate_limit.h"
#include "core/log.h"
#include "core/random_bytes.h"
#include "rank/context.h"
#include "rank/path.h"
#include "redis/shard_clients.h"

namespace rankd {

namespace {

// The keys of one (plan, user)'s chains, under the endpoint's prefix: the list of its
// snapshots' ids, "rankd:page:{<tag>}", and each snapshot, "rankd:page:{<tag>}:<id>"
// (32 hex digits each). The hash tag puts them all in one slot of a Redis Cluster, so
// that one script can count and end them. rankd writes no other keys (but the served
// log's streams).
std::string ChainIndexTail(std::string_view tag) {
  std::string out = "rankd:page:{";
  out.append(tag).append("}");
  return out;
}

std::string Hex(const std::array<uint8_t, 16>& id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (uint8_t b : id) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string SnapshotKeyTail(std::string_view tag, const std::array<uint8_t, 16>& id) {
  return ChainIndexTail(tag) + ":" + Hex(id);
}

// Run after a snapshot's SET, in the same batch: KEYS[1] is its chain index (ids, oldest
// first), ARGV the new id, --page-max-snapshots and --page-ttl-ms. The new id joins the
// list and the oldest past the quota are deleted, their cursors then answering 410. The
// list lives as long as the longest-lived snapshot it names (replicas' TTLs may differ).
// Returns the number of chains ended. Only the index and its own slot's snapshots are
// touched, so a cluster runs it on the node that holds the snapshot. A script (not
// MULTI) because the ids to delete are read in it: one round trip, atomic across shards
// and replicas; the snapshot's bytes stay out of Lua (the SET carries them).
constexpr std::string_view kQuotaScript = R"lua(
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
local ended = 0
while n > tonumber(ARGV[2]) do
  redis.call('DEL', KEYS[1] .. ':' .. redis.call('LPOP', KEYS[1]))
  n = n - 1
  ended = ended + 1
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return ended
)lua";

// Failed snapshot writes and later pages' Redis failures go to the log with their
// detail (address, Redis's text), at most a line a second each (a dead endpoint would
// otherwise write one per request).
void LogPageFailure(size_t kind, std::string_view request_id, std::string_view what,
                    const Error& e) {
  static LineRateLimit<2> limit;
  if (!LogEnabled(LogLevel::kWarn)) return;
  int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
          .count();
  uint64_t suppressed = 0;
  if (!limit.Allow(kind, now_ms, &suppressed)) return;
  std::string s = "request ";
  s.append(request_id).append(": ").append(what).append(": ").append(e.message);
  if (!e.detail.empty()) s.append(" [").append(e.detail).append("]");
  if (suppressed) s.append(" (").append(std::to_string(suppressed)).append(" suppressed)");
  LogWarn(s);
}

// A Redis failure of a snapshot's batch as the error it stands for: the batch's own
// (unavailable, deadline_exceeded, backend_error), or backend_error for an error reply
// (Redis's text in the detail, for the log only).
Status CheckReplies(const Result<RespReplies>& replies, size_t n, std::string_view endpoint) {
  if (!replies) {
    Error e = replies.error();
    e.message = "page snapshot: " + e.message;
    return Fail(std::move(e));
  }
  for (size_t i = 0; i < n; ++i) {
    if (i < replies->size() && !(*replies)[i].is_error()) continue;
    Error e = Error::Backend("page snapshot: redis endpoint " + std::string(endpoint) +
                             " answered an error");
    if (i < replies->size()) e.detail = std::string((*replies)[i].str());
    return Fail(std::move(e));
  }
  return {};
}

}  // namespace

Status PagesStage::Before(RankContext& ctx, RankInput& in) {
  RankRequest& rr = in.rr;
  if (!rr.cursor) {
    Slot& slot = ctx.slot<PagesStage>();
    slot.page_size = rr.page_size.value_or(0);
    if (slot.page_size > 0) slot.plan_asked = rr.plan;
    return {};
  }
  ctx.answered = true;
  const http::Request& req = in.req;
  auto cursor = shard_.cursor_key->Open(*rr.cursor, rr.plan, rr.user_id);
  if (!cursor) {
    AnswerError(ctx.res, cursor.error(), ctx.t0, req.request_id);
    return {};
  }
  if (auto admitted = shard_.path->stage<AdmissionStage>().AdmitWithoutRun(); !admitted) {
    AnswerError(ctx.res, admitted.error(), ctx.t0, req.request_id);
    return {};
  }
  NextPage p;
  p.cursor = *cursor;
  // A later request may ask another page size; the first request's otherwise.
  p.page_size = static_cast<size_t>(rr.page_size.value_or(cursor->page_size));
  p.plan = std::move(rr.plan);
  p.user_id = std::move(rr.user_id);
  p.request_id = req.request_id;
  p.t0 = ctx.t0;
  p.deadline_ms = ctx.deadline_ms;
  p.listener = in.listener;
  shard_.stats->live_requests.fetch_add(1, std::memory_order_relaxed);
  Spawn(RunNextPage(std::move(ctx.res), std::move(p)));
  return {};
}

bool PagesStage::Settles(const RankContext& ctx) const {
  return ctx.slot<PagesStage>().page_size > 0;
}

// A first page still runs while its snapshot is written: it counts until then.
Coro<void> PagesStage::Settle(RankContext& ctx) {
  if (!ctx.result) co_return;
  Slot& page = ctx.slot<PagesStage>();
  const RankOptions& opts = shard_.opts;
  page.snapshot = BuildPageSnapshot(*ctx.result, ctx.extras, opts.page_max_items);
  const PageSnapshot& s = page.snapshot;
  auto count = [this](SnapshotOutcome o) {
    ++shard_.stats->page_snapshots[static_cast<size_t>(o)];
  };
  auto page_size = static_cast<size_t>(page.page_size);
  if (s.items() <= page_size) {
    count(SnapshotOutcome::kOnePage);
    co_return;
  }
  // Past the shard's byte rate the page goes without a cursor: the quota per (plan, user)
  // does not bound a client that sends many user ids, this does.
  if (!write_budget_.Take(s.bytes.size(), Clock::now())) {
    count(SnapshotOutcome::kRateLimited);
    co_return;
  }
  PageCursor c;
  FillRandom(c.snapshot.data(), c.snapshot.size());
  std::string tag = shard_.cursor_key->ChainTag(page.plan_asked, ctx.user_id);
  RedisClient* redis = shard_.page_redis;
  const std::string& prefix = redis->prefix();
  auto ttl_ms = static_cast<int64_t>(opts.page_ttl_ms);
  RedisCommands cmds;
  cmds.Add(5)
      .Arg("SET")
      .Key(prefix, SnapshotKeyTail(tag, c.snapshot))
      .Arg(s.bytes)
      .Arg("PX")
      .Arg(ttl_ms);
  cmds.Add(7)
      .Arg("EVAL")
      .Arg(kQuotaScript)
      .Arg(int64_t{1})
      .Key(prefix, ChainIndexTail(tag))
      .Arg(Hex(c.snapshot))
      .Arg(static_cast<int64_t>(opts.page_max_snapshots))
      .Arg(ttl_ms);
  // Within the request's deadline: past it the page goes without a cursor.
  auto replies =
      co_await redis->Batch(std::move(cmds), ctx.t0 + std::chrono::milliseconds(ctx.deadline_ms));
  if (auto written = CheckReplies(replies, 2, opts.page_endpoint); !written) {
    LogPageFailure(0, ctx.request_id, "first page sent without cursor", written.error());
    count(SnapshotOutcome::kWriteFailed);
    co_return;
  }
  shard_.stats->page_chains_ended +=
      static_cast<uint64_t>(std::max<int64_t>(0, (*replies)[1].integer()));
  c.offset = static_cast<uint32_t>(page_size);
  c.byte_start = s.ends[page_size - 1];
  c.header_bytes = s.header_bytes;
  c.items = static_cast<uint32_t>(s.items());
  c.bytes = static_cast<uint32_t>(s.bytes.size());
  c.max_item_bytes = s.max_item_bytes;
  c.page_size = static_cast<uint16_t>(page_size);
  page.cursor = shard_.cursor_key->Seal(c, page.plan_asked, ctx.user_id);
  count(SnapshotOutcome::kWritten);
}

bool PagesStage::WriteBody(RankContext& ctx, std::string& out) {
  const Slot& page = ctx.slot<PagesStage>();
  if (!ctx.result || page.page_size == 0) return false;
  const PageSnapshot& s = page.snapshot;
  size_t n = std::min(s.items(), static_cast<size_t>(page.page_size));
  AppendPage(s.head(), s.Lines(n), n, ctx.result->took_us, s.meta(), page.cursor, out);
  if (ctx.explain) AppendRankNodes(*ctx.result, out);
  out += '}';
  return true;
}

void PagesStage::AnswerError(http::Responder& res, const Error& e, TimePoint t0,
                             std::string_view request_id) {
  ++shard_.stats->page_requests[1 + static_cast<size_t>(e.code)];
  http::Response r;
  r.status = ErrorStatus(e.code);
  if (r.status >= 500) LogPageFailure(1, request_id, "later page", e);
  std::string body = ErrorBody(e);
  r.body = body;
  if (r.status == 503) r.headers = kRetryAfter;
  SendAnswer(shard_, res, "POST", request_id, Route::kRank, r, t0);
}

Coro<void> PagesStage::RunNextPage(http::Responder res, NextPage p) {
  const PageCursor& c = p.cursor;
  std::string tail = SnapshotKeyTail(shard_.cursor_key->ChainTag(p.plan, p.user_id), c.snapshot);
  RedisClient* redis = shard_.page_redis;
  const std::string& prefix = redis->prefix();
  // The header lines, and the page's bytes: at most page_size of the longest item from
  // the page's first byte. Both commands name one key, so a cluster sends them to one
  // node, in one round trip.
  uint64_t end = std::min<uint64_t>(
      c.bytes, uint64_t{c.byte_start} + uint64_t{p.page_size} * uint64_t{c.max_item_bytes});
  RedisCommands cmds;
  cmds.Add(4).Arg("GETRANGE").Key(prefix, tail).Arg(int64_t{0}).Arg(int64_t{c.header_bytes} - 1);
  cmds.Add(4)
      .Arg("GETRANGE")
      .Key(prefix, tail)
      .Arg(int64_t{c.byte_start})
      .Arg(static_cast<int64_t>(end) - 1);
  auto replies =
      co_await redis->Batch(std::move(cmds), p.t0 + std::chrono::milliseconds(p.deadline_ms));
  shard_.stats->live_requests.fetch_sub(1, std::memory_order_relaxed);
  Result<PageRead> page = Fail(Error::Internal("unreachable"));
  if (auto ok = CheckReplies(replies, 2, shard_.opts.page_endpoint); !ok)
    page = Fail(ok.error());
  else
    page = ReadPage((*replies)[0].str(), (*replies)[1].str(), c, p.page_size);
  if (!page) {
    AnswerError(res, page.error(), p.t0, p.request_id);
    co_return;
  }

  std::string cursor;
  if (c.offset + page->count < c.items) {
    PageCursor next = c;
    next.offset += static_cast<uint32_t>(page->count);
    next.byte_start += static_cast<uint32_t>(page->lines.size());
    cursor = shard_.cursor_key->Seal(next, p.plan, p.user_id);
  }
  Recycled<std::string, 1u << 20, 64> body;
  auto took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - p.t0);
  AppendPage(page->head, page->lines, page->count, took.count(), page->meta, cursor, *body);
  *body += '}';
  std::string timing = ServerTiming(took);
  const http::HeaderField headers[] = {{"Server-Timing", timing}};
  ++shard_.stats->page_requests[0];
  shard_.stats->CountHttp(Route::kRank, "POST", 200, static_cast<double>(took.count()) / 1e6);
  http::Response r;
  r.status = 200;
  r.body = *body;
  r.headers = headers;
  res.Send(r);
  // The console's pages (on the metrics address) were shown to nobody.
  if (p.listener == Listener::kMain)
    shard_.path->stage<ServedStateStage>().LaterPage(page->head, page->lines, UnixMsAt(p.t0));
  if (shard_.opts.access_log)
    WriteAccessLog(shard_, p.request_id, Route::kRank, "POST", 200, p.t0, nullptr, {});
}

}  // namespace rankd
