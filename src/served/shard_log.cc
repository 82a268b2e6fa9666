#include "served/shard_log.h"

#include <sys/random.h>

#include <chrono>

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
    auto& count = no_sink_[plan.log.sink];
    if (!count) {  // a name never seen: ForEachCount lists it from now on
      count = std::make_shared<NoSinkCount>(plan.log.sink);
      auto list = std::make_shared<NoSinkCounts>();
      for (const auto& [name, c] : no_sink_) list->push_back(c);
      no_sink_list_.Set(std::move(list));
    }
    ++count->records;
    return false;
  }
  return true;
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
  Sink& s = sinks_[it->second];
  size_t start = s.buf.size();
  AppendServedRecord(r, h, s.buf);
  size_t bytes = s.buf.size() - start + 1;  // with its '\n'
  if (bytes > kMaxRecordBytes + 1) {
    s.buf.resize(start);
    Count(s, ServedOutcome::kDroppedTooLarge);
    return;
  }
  if (pending_ + bytes > budget_) {
    s.buf.resize(start);
    Count(s, ServedOutcome::kDroppedFull);
    return;
  }
  s.buf += '\n';
  s.ends.push_back(static_cast<uint32_t>(s.buf.size()));
  pending_ += bytes;
  if (s.in_flight) return;
  if (s.buf.size() >= kSendNowBytes)
    Send(it->second);
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
  std::vector<uint32_t> ends;
  if (s.config->kind == SinkConfig::Kind::kRedisStream && s.ends.size() > kMaxStreamBatch) {
    // The first kMaxStreamBatch records leave; the rest stay, moved to the front.
    size_t cut = s.ends[kMaxStreamBatch - 1];
    buf.assign(s.buf, 0, cut);
    s.buf.erase(0, cut);
    ends.assign(s.ends.begin(), s.ends.begin() + kMaxStreamBatch);
    s.ends.erase(s.ends.begin(), s.ends.begin() + kMaxStreamBatch);
    for (uint32_t& e : s.ends) e -= static_cast<uint32_t>(cut);
  } else {
    buf.swap(s.buf);
    ends.swap(s.ends);
    s.buf.reserve(buf.capacity());
  }
  s.in_flight = true;
  s.in_flight_bytes = buf.size();
  if (s.file) {
    size_t n = ends.size();
    std::weak_ptr<bool> alive = alive_;
    EventLoop* loop = &loop_;
    s.file->Submit(std::move(buf), [this, loop, alive, i, n](bool ok) {
      loop->Post([this, alive, i, n, ok] {
        if (alive.expired() || !*alive.lock()) return;
        Count(sinks_[i], ok ? ServedOutcome::kWritten : ServedOutcome::kDroppedError, n);
        Sent(i, sinks_[i].in_flight_bytes);
      });
    });
    return;
  }
  Spawn(SendStream(i, std::move(buf), std::move(ends)));
}

Coro<void> ShardServedLog::SendStream(size_t i, std::string buf, std::vector<uint32_t> ends) {
  std::shared_ptr<bool> alive = alive_;
  Sink& s = sinks_[i];
  size_t n = ends.size();
  if (!s.client) {  // unreachable: start-up checks the endpoint exists
    Count(s, ServedOutcome::kDroppedError, n);
    Sent(i, buf.size());
    co_return;
  }
  RedisCommands cmds;
  std::string maxlen = std::to_string(s.config->maxlen);
  uint32_t begin = 0;
  for (uint32_t end : ends) {
    std::string_view record(buf.data() + begin, end - begin - 1);  // less its '\n'
    cmds.Add(8)
        .Arg("XADD")
        .Arg(s.config->stream)
        .Arg("MAXLEN")
        .Arg("~")
        .Arg(maxlen)
        .Arg("*")
        .Arg("record")
        .Arg(record);
    begin = end;
  }
  auto replies = co_await s.client->Batch(
      std::move(cmds), Clock::now() + std::chrono::milliseconds(kStreamWriteTimeoutMs));
  if (!*alive) co_return;
  if (!replies) {
    Count(s, ServedOutcome::kDroppedError, n);
  } else {
    uint64_t failed = 0;
    for (size_t k = 0; k < replies->size(); ++k) failed += (*replies)[k].is_error() ? 1 : 0;
    failed += n > replies->size() ? n - replies->size() : 0;
    Count(s, ServedOutcome::kDroppedError, failed);
    Count(s, ServedOutcome::kWritten, n - failed);
  }
  Sent(i, buf.size());
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
    const std::function<void(std::string_view, ServedOutcome, uint64_t)>& fn) const {
  for (const Sink& s : sinks_)
    for (size_t o = 0; o < s.counts.size(); ++o)
      fn(s.config->name, static_cast<ServedOutcome>(o), s.counts[o]);
  if (auto list = no_sink_list_.Get())
    for (const auto& c : *list) fn(c->sink, ServedOutcome::kDroppedNoSink, c->records);
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
