#include "events/shard_events.h"

#include <algorithm>
#include <array>
#include <chrono>

namespace rankd {

namespace {

constexpr std::array<double, 10> kIncrementBuckets = {1,    4,    16,    64,    256,
                                                      1024, 4096, 16384, 65536, 262144};
constexpr std::array<double, 12> kFlushBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                  0.01,   0.025,   0.05,   0.1,   0.25,   1.0};

}  // namespace

Coro<Result<size_t>> WriteEventBatch(RedisClient& redis, const CounterBatch& counters,
                                     const MarkBatch& marks, Deadline deadline, size_t* calls) {
  CounterWrite cw(counters, redis.prefix(), IsCluster(redis));
  MarkWrite mw(marks, redis.prefix(), IsCluster(redis));
  if (calls) *calls = cw.calls() + mw.calls();
  ScriptWrite* writes[] = {&cw, &mw};
  co_return co_await SendScriptWrites(redis, writes, deadline);
}

EventWriteStats::EventWriteStats()
    : flush_increments(kIncrementBuckets), flush_seconds(kFlushBuckets) {}

// One flush: the counters and marks of the requests it gathers, and those requests,
// waiting for its end.
struct ShardEvents::Flush {
  Flush(SchemaPtr schema, int64_t now_ms, bool aggregate)
      : counters(std::move(schema), now_ms, aggregate), marks(aggregate) {}
  CounterBatch counters;
  MarkBatch marks;
  Deadline deadline;
  size_t requests = 0;
  bool done = false;
  Status result;
  std::vector<std::coroutine_handle<>> waiters;
};

// co_await FlushDone{f}: resumes with the flush's result once it has ended. It holds a
// plain pointer (the awaiting frame holds the flush): GCC 12 may destroy a temporary of a
// co_await expression twice, which a shared_ptr member would not survive.
struct ShardEvents::FlushDone {
  Flush* f;
  bool await_ready() const noexcept { return f->done; }
  void await_suspend(std::coroutine_handle<> h) { f->waiters.push_back(h); }
  Status await_resume() { return f->result; }
};

ShardEvents::ShardEvents(EventLoop& loop, int64_t flush_ms) : loop_(loop), flush_ms_(flush_ms) {}

void ShardEvents::Add(Flush& f, std::span<const Event> events) {
  const Schema& schema = *f.counters.schema();
  for (const Event& e : events) {
    IdRef user{e.user.is_str ? 0 : e.user.num, e.user.is_str ? std::string_view(e.user.str) : ""};
    IdRef item{e.item.is_str ? 0 : e.item.num, e.item.is_str ? std::string_view(e.item.str) : ""};
    f.counters.Add(*e.type, user, item, e.value, e.ts_ms);
    if (e.type->marks)
      if (const KeyFamily* fam = schema.Find(e.type->marks->family))
        f.marks.Add(*fam, *e.type->marks, e.user, e.item, e.ts_ms);
  }
}

Coro<Status> ShardEvents::Apply(std::span<const Event> events, SchemaPtr schema, int64_t now_ms,
                                Deadline deadline) {
  if (!redis_) co_return Fail(Error::Unavailable("events: no redis endpoint redis_default"));
  // A reload that changed the schema starts a new flush: a batch holds one schema.
  if (pending_ && pending_->counters.schema() != schema) {
    StartFlush(std::move(pending_));
    pending_.reset();
  }
  std::shared_ptr<Flush> f = pending_;
  if (!f) {
    f = std::make_shared<Flush>(std::move(schema), now_ms, flush_ms_ > 0);
    if (flush_ms_ > 0) {
      pending_ = f;
      loop_.timers().Start(static_cast<uint64_t>(flush_ms_), [this, f] {
        if (pending_ == f) pending_.reset();
        StartFlush(f);
      });
    }
  }
  Add(*f, events);
  // The latest: nullopt (none) when any request has none.
  if (f->requests++ == 0 || !deadline || (f->deadline && *deadline > *f->deadline))
    f->deadline = deadline;
  if (flush_ms_ == 0) StartFlush(f);
  Status st = co_await FlushDone{f.get()};
  co_return st;
}

// The shard holds a flush while it is written; its coroutine takes a plain pointer (GCC 12
// has destroyed a by-value coroutine parameter twice).
void ShardEvents::StartFlush(std::shared_ptr<Flush> f) {
  Flush* raw = f.get();
  writing_.push_back(std::move(f));
  Spawn(Write(raw));
}

Coro<void> ShardEvents::Write(Flush* f) {
  auto t0 = std::chrono::steady_clock::now();
  stats_.flush_increments.Observe(static_cast<double>(f->counters.increments()));
  stats_.too_old += f->counters.too_old();
  Status st;
  if (auto sent = co_await WriteEventBatch(*redis_, f->counters, f->marks, f->deadline); !sent)
    st = Fail(std::move(sent.error()));
  if (!st) ++stats_.flushes_failed;
  stats_.flush_seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  f->result = std::move(st);
  f->done = true;
  auto it = std::find_if(writing_.begin(), writing_.end(),
                         [f](const std::shared_ptr<Flush>& w) { return w.get() == f; });
  std::shared_ptr<Flush> held = std::move(*it);  // alive until its waiters have run
  writing_.erase(it);
  // Resumed here, on the loop: each answers its request, none awaits this flush again.
  auto waiters = std::move(f->waiters);
  for (std::coroutine_handle<> h : waiters) h.resume();
}

}  // namespace rankd
