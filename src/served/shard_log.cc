#include "served/shard_log.h"

#include <sys/random.h>

#include <chrono>

#include "served/event_record.h"

namespace rankd {

namespace {

// How long records wait in the buffer before a batch leaves (when none is in flight):
// a batch per 20 ms rather than per record keeps the sinks' fixed costs (a thread
// wake-up and a write, or a Redis round trip) off each record (docs/served-log.md).
constexpr uint64_t kSendDelayMs = 20;
// A buffer this large leaves at once, whatever the delay.
constexpr size_t kSendNowBytes = size_t{1} << 20;
// Records per XADD batch, at most: bounds the command buffer of one batch.
constexpr size_t kMaxStreamBatch = 512;

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

std::string_view ServedOutcomeName(ServedOutcome o) {
  switch (o) {
    case ServedOutcome::kWritten: return "written";
    case ServedOutcome::kDroppedFull: return "dropped_full";
    case ServedOutcome::kDroppedError: return "dropped_error";
    case ServedOutcome::kDroppedNoSink: return "dropped_no_sink";
    case ServedOutcome::kDroppedTooLarge: return "dropped_too_large";
    case ServedOutcome::kCount: break;
  }
  return "unknown";
}

ShardServedLog::ShardServedLog(EventLoop& loop, RedisPools* redis,
                               const std::vector<SinkConfig>& sinks,
                               const std::vector<FileSink*>& files, size_t buffer_bytes,
                               bool allow_forced)
    : loop_(loop), budget_(buffer_bytes), allow_forced_(allow_forced) {
  sinks_.resize(sinks.size());
  for (size_t i = 0; i < sinks.size(); ++i) {
    Sink& s = sinks_[i];
    s.config = &sinks[i];
    s.file = i < files.size() ? files[i] : nullptr;
    if (sinks[i].kind == SinkConfig::Kind::kRedisStream && redis)
      s.client = redis->Get(sinks[i].endpoint);
    by_name_.emplace(sinks[i].name, i);
  }
  // Seeded from the kernel: served ids of every shard and process differ.
  if (::getrandom(rng_, sizeof rng_, 0) != static_cast<ssize_t>(sizeof rng_)) {
    uint64_t t = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    for (uint64_t& w : rng_) w = t = t * 6364136223846793005ull + 1442695040888963407ull;
  }
}

ShardServedLog::~ShardServedLog() {
  *alive_ = false;
  Close();
}

void ShardServedLog::Close() {
  closed_ = true;
  if (send_timer_) loop_.timers().Cancel(send_timer_);
  send_timer_ = 0;
}

uint64_t ShardServedLog::NextRandom() {
  uint64_t* s = rng_;
  uint64_t result = Rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = Rotl(s[3], 45);
  return result;
}

bool ShardServedLog::Selected(const Plan& plan, bool asked) {
  if (asked && !allow_forced_) ++forced_ignored_;
  bool forced = Forced(asked);
  if (!plan.log.enabled) return false;
  bool picked =
      forced || plan.log.sample >= 1 ||
      // 53 random bits as a double in [0, 1).
      (plan.log.sample > 0 && static_cast<double>(NextRandom() >> 11) * 0x1p-53 < plan.log.sample);
  if (!picked) return false;
  if (!by_name_.contains(plan.log.sink)) {
    // Not recorded (no served_id, nothing kept): only counted.
    CountNoSink(plan.log.sink, LogKind::kServed, 1);
    return false;
  }
  return true;
}

void ShardServedLog::CountNoSink(std::string_view sink, LogKind k, uint64_t n) {
  auto& count = no_sink_[std::string(sink)];
  if (!count) {  // a name never seen: ForEachCount lists it from now on
    count = std::make_shared<NoSinkCount>(std::string(sink));
    auto list = std::make_shared<NoSinkCounts>();
    for (const auto& [name, c] : no_sink_) list->push_back(c);
    no_sink_list_.Set(std::move(list));
  }
  count->records[static_cast<size_t>(k)] += n;
}

std::string ShardServedLog::NewServedId() {
  static constexpr char kHex[] = "0123456789abcdef";
  uint8_t bytes[16];
  id_bytes_.Take(bytes, sizeof bytes);
  std::string id(32, '0');
  for (size_t k = 0; k < sizeof bytes; ++k) {
    id[2 * k] = kHex[bytes[k] >> 4];
    id[2 * k + 1] = kHex[bytes[k] & 15];
  }
  return id;
}

void ShardServedLog::Record(const RunResult& r, const RecordHeader& h) {
  auto it = by_name_.find(r.plan->log.sink);
  if (it == by_name_.end()) return;  // Selected counted it
  Append(it->second, LogKind::kServed, [&](std::string& out) { AppendServedRecord(r, h, out); });
}

void ShardServedLog::RecordEvents(std::string_view sink, std::span<const Event> events,
                                  int64_t received_ms) {
  auto it = by_name_.find(std::string(sink));
  if (it == by_name_.end()) return CountNoSink(sink, LogKind::kEvents, events.size());
  for (const Event& e : events) {
    std::string random_id = e.event_id.empty() ? NewServedId() : std::string();
    Append(it->second, LogKind::kEvents,
           [&](std::string& out) { AppendEventRecord(e, random_id, received_ms, out); });
  }
}

void ShardServedLog::Append(size_t i, LogKind k, FunctionRef<void(std::string&)> build) {
  Sink& s = sinks_[i];
  size_t start = s.buf.size();
  build(s.buf);
  size_t bytes = s.buf.size() - start + 1;  // with its '\n'
  if (bytes > kMaxRecordBytes + 1) {
    s.buf.resize(start);
    Count(s, k, ServedOutcome::kDroppedTooLarge);
    return;
  }
  if (pending_ + bytes > budget_) {
    s.buf.resize(start);
    Count(s, k, ServedOutcome::kDroppedFull);
    return;
  }
  s.buf += '\n';
  s.ends.push_back({static_cast<uint32_t>(s.buf.size()), k});
  pending_ += bytes;
  if (s.in_flight) return;
  if (s.buf.size() >= kSendNowBytes)
    Send(i);
  else
    ScheduleSend();
}

void ShardServedLog::ScheduleSend() {
  if (send_timer_ || closed_) return;
  send_timer_ = loop_.timers().Start(kSendDelayMs, [this] {
    send_timer_ = 0;
    SendAll();
  });
}

void ShardServedLog::SendAll() {
  for (size_t i = 0; i < sinks_.size(); ++i)
    if (!sinks_[i].in_flight && !sinks_[i].ends.empty()) Send(i);
}

void ShardServedLog::Send(size_t i) {
  if (closed_) return;
  Sink& s = sinks_[i];
  std::string buf;
  std::vector<RecordEnd> ends;
  if (s.config->kind == SinkConfig::Kind::kRedisStream && s.ends.size() > kMaxStreamBatch) {
    // The first kMaxStreamBatch records leave; the rest stay, moved to the front.
    size_t cut = s.ends[kMaxStreamBatch - 1].end;
    buf.assign(s.buf, 0, cut);
    s.buf.erase(0, cut);
    ends.assign(s.ends.begin(), s.ends.begin() + kMaxStreamBatch);
    s.ends.erase(s.ends.begin(), s.ends.begin() + kMaxStreamBatch);
    for (RecordEnd& e : s.ends) e.end -= static_cast<uint32_t>(cut);
  } else {
    buf.swap(s.buf);
    ends.swap(s.ends);
    s.buf.reserve(buf.capacity());
  }
  s.in_flight = true;
  s.in_flight_bytes = buf.size();
  if (s.file) {
    std::weak_ptr<bool> alive = alive_;
    EventLoop* loop = &loop_;
    s.file->Submit(std::move(buf), [this, loop, alive, i, ends = std::move(ends)](bool ok) mutable {
      loop->Post([this, alive, i, ends = std::move(ends), ok] {
        if (alive.expired() || !*alive.lock()) return;
        CountBatch(sinks_[i], ends, [ok](size_t) { return !ok; });
        Sent(i, sinks_[i].in_flight_bytes);
      });
    });
    return;
  }
  Spawn(SendStream(i, std::move(buf), std::move(ends)));
}

Coro<void> ShardServedLog::SendStream(size_t i, std::string buf, std::vector<RecordEnd> ends) {
  std::shared_ptr<bool> alive = alive_;
  Sink& s = sinks_[i];
  if (!s.client) {  // unreachable: start-up checks the endpoint exists
    CountBatch(s, ends, [](size_t) { return true; });
    Sent(i, buf.size());
    co_return;
  }
  RedisCommands cmds;
  std::string maxlen = std::to_string(s.config->maxlen);
  uint32_t begin = 0;
  for (const RecordEnd& e : ends) {
    std::string_view record(buf.data() + begin, e.end - begin - 1);  // less its '\n'
    cmds.Add(8)
        .Arg("XADD")
        .Arg(s.config->stream)
        .Arg("MAXLEN")
        .Arg("~")
        .Arg(maxlen)
        .Arg("*")
        .Arg("record")
        .Arg(record);
    begin = e.end;
  }
  auto replies = co_await s.client->Batch(
      std::move(cmds), Clock::now() + std::chrono::milliseconds(kStreamWriteTimeoutMs));
  if (!*alive) co_return;
  // A record without its reply (none came, or fewer than sent) failed.
  CountBatch(s, ends, [&](size_t k) {
    return !replies || k >= replies->size() || (*replies)[k].is_error();
  });
  Sent(i, buf.size());
}

void ShardServedLog::CountBatch(Sink& s, std::span<const RecordEnd> ends,
                                FunctionRef<bool(size_t)> failed) {
  for (size_t k = 0; k < ends.size(); ++k)
    Count(s, ends[k].kind, failed(k) ? ServedOutcome::kDroppedError : ServedOutcome::kWritten);
}

void ShardServedLog::Sent(size_t i, size_t bytes) {
  Sink& s = sinks_[i];
  s.in_flight = false;
  s.in_flight_bytes = 0;
  pending_ -= std::min(pending_, bytes);
  // What waited meanwhile leaves now: a slow sink gets larger batches, not more of them.
  if (!s.ends.empty()) Send(i);
  CheckFlushed();
}

void ShardServedLog::ForEachCount(
    const std::function<void(std::string_view, LogKind, ServedOutcome, uint64_t)>& fn) const {
  for (const Sink& s : sinks_)
    for (size_t k = 0; k < s.counts.size(); ++k)
      for (size_t o = 0; o < s.counts[k].size(); ++o)
        fn(s.config->name, static_cast<LogKind>(k), static_cast<ServedOutcome>(o), s.counts[k][o]);
  if (auto list = no_sink_list_.Get())
    for (const auto& c : *list)
      for (size_t k = 0; k < c->records.size(); ++k)
        fn(c->sink, static_cast<LogKind>(k), ServedOutcome::kDroppedNoSink, c->records[k]);
}

void ShardServedLog::Flush(std::function<void()> done) {
  flushed_ = std::move(done);
  flushing_ = true;
  if (send_timer_) {
    loop_.timers().Cancel(send_timer_);
    send_timer_ = 0;
  }
  SendAll();
  CheckFlushed();
}

void ShardServedLog::CheckFlushed() {
  if (!flushing_ || pending_ > 0) return;
  flushing_ = false;
  if (auto done = std::exchange(flushed_, nullptr)) done();
}

void ShardServedLog::Abandon() {
  flushing_ = false;
  if (auto done = std::exchange(flushed_, nullptr)) done();
}

}  // namespace rankd
