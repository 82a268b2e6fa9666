// ShardServedLog: a shard's side of the served log (docs/served-log.md) and of the event
// log (docs/events.md), which share the sinks. It picks the requests to record (the
// plan's `log.sample`, or the request's "log": true), writes each record — a request's,
// or an accepted event's — into the shard's buffer for its sink, bounded by
// --served-log-buffer-bytes for all sinks together, and sends the buffers in batches
// off the request's time: pipelined XADDs from this loop to a redis-stream sink, or whole
// batches of lines to a file sink's writer thread. At most one batch per sink is in
// flight; records arriving meanwhile wait in the buffer, so a slow sink makes batches
// larger, and a dead one fills the buffer and drops records (counted, per log), never a
// request.
//
// Threads: the loop thread of `loop` only, but ForEachCount: any thread. FileSinks outlive
// it; so does the loop.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/coro.h"
#include "core/event_loop.h"
#include "core/function_ref.h"
#include "core/metric_value.h"
#include "core/published.h"
#include "core/random_bytes.h"
#include "events/event.h"
#include "redis/shard_clients.h"
#include "served/file_sink.h"
#include "served/record.h"
#include "served/sink_config.h"

namespace rankd {

enum class ServedOutcome : uint8_t {
  kWritten,
  kDroppedFull,      // the shard's buffer was full
  kDroppedError,     // the sink failed the write (or was unreachable)
  kDroppedNoSink,    // the plan's sink is not one of --served-log
  kDroppedTooLarge,  // the record was over kMaxRecordBytes
  kCount
};
std::string_view ServedOutcomeName(ServedOutcome o);  // "written", "dropped_full", ...

// Which log a record is of: counted apart (rankd_served_log_records_total,
// rankd_event_log_records_total), whether or not the two share a sink.
enum class LogKind : uint8_t { kServed, kEvents, kCount };

class ShardServedLog {
 public:
  static constexpr size_t kMaxRecordBytes = size_t{1} << 20;
  // How long a batch may wait for its XADD replies before its records count as errors.
  static constexpr uint64_t kStreamWriteTimeoutMs = 2000;

  // `files[i]` is sink i's FileSink (null for a stream sink). The stream sinks' clients
  // are looked up in `redis` (which must outlive this). `allow_forced`: whether a
  // request's "log": true is honoured (--allow-forced-logging).
  ShardServedLog(EventLoop& loop, RedisPools* redis, const std::vector<SinkConfig>& sinks,
                 const std::vector<FileSink*>& files, size_t buffer_bytes, bool allow_forced);
  ~ShardServedLog();
  ShardServedLog(const ShardServedLog&) = delete;
  ShardServedLog& operator=(const ShardServedLog&) = delete;

  // Whether a request of `plan` is recorded: the plan has a log block, the request
  // asked (`asked`: "log": true, honoured only with allow_forced, else counted in
  // forced_ignored()) or falls in the plan's sample, and the plan's sink is one of this
  // server's (else the pick counts as dropped_no_sink, and the request is not recorded).
  // A client that could force logging would fill the log with records of its choosing,
  // unmarked, at 100% instead of the plan's sample.
  bool Selected(const Plan& plan, bool asked);
  // Whether a request that asked is recorded for having asked ("forced_log" in its record).
  bool Forced(bool asked) const { return asked && allow_forced_; }
  // Any thread: requests whose "log": true was ignored (no --allow-forced-logging).
  uint64_t forced_ignored() const { return forced_ignored_.value(); }
  // A fresh served_id (and an event's event_id when the client sent none): 128 bits of the
  // kernel's random source as 32 lowercase hex digits. Not of the sampling generator: its
  // outputs would give away its state, and with it every other client's next ids and draws.
  std::string NewServedId();
  // Builds the record of `r` (run with keep_for_log) into the buffer of its plan's sink.
  void Record(const RunResult& r, const RecordHeader& h);
  // Builds one event-log record per event (served/event_record.h), read at `received_ms`
  // and acknowledged by Redis, into the buffer of `sink` (the schema's event_log.sink);
  // a sink this server lacks counts them as dropped_no_sink.
  void RecordEvents(std::string_view sink, std::span<const Event> events, int64_t received_ms);

  // Any thread: calls fn(sink, log, outcome, n) with the records counted so far, for
  // every log and outcome of every sink of --served-log and for the sinks plans or the
  // schema name that are not.
  void ForEachCount(
      const std::function<void(std::string_view, LogKind, ServedOutcome, uint64_t)>& fn) const;
  // Drain: sends everything buffered; `done` runs once nothing is buffered or in flight
  // (at once when nothing is).
  void Flush(std::function<void()> done);
  // The drain gave up: `done` of a Flush runs now; what is still pending is lost.
  void Abandon();
  // The loop is stopping: no more sends (records still buffered are lost). Idempotent.
  void Close();

 private:
  // Where a record ends in its sink's buffer (after its '\n'), and which log it is of.
  struct RecordEnd {
    uint32_t end;
    LogKind kind;
  };
  using Counts =
      std::array<std::array<MetricValue<uint64_t>, static_cast<size_t>(ServedOutcome::kCount)>,
                 static_cast<size_t>(LogKind::kCount)>;
  struct Sink {
    const SinkConfig* config = nullptr;
    FileSink* file = nullptr;
    RedisClient* client = nullptr;
    std::string buf;              // records, each ending in '\n'
    std::vector<RecordEnd> ends;  // one per record in buf
    size_t in_flight_bytes = 0;
    bool in_flight = false;
    Counts counts{};
  };
  static void Count(Sink& s, LogKind k, ServedOutcome o, uint64_t n = 1) {
    s.counts[static_cast<size_t>(k)][static_cast<size_t>(o)] += n;
  }
  // Counts the records of a batch that ended: written, or dropped_error for those
  // failed(k) says of (k: the record's index in the batch).
  static void CountBatch(Sink& s, std::span<const RecordEnd> ends,
                         FunctionRef<bool(size_t)> failed);
  // Records naming a sink this server lacks (dropped_no_sink), by that name.
  struct NoSinkCount {
    explicit NoSinkCount(std::string s) : sink(std::move(s)) {}
    const std::string sink;
    std::array<MetricValue<uint64_t>, static_cast<size_t>(LogKind::kCount)> records;
  };
  using NoSinkCounts = std::vector<std::shared_ptr<const NoSinkCount>>;
  void CountNoSink(std::string_view sink, LogKind k, uint64_t n);
  // Builds one record of log `k` into sink i's buffer by `build`, which appends it (no
  // '\n'); drops it when too large or over the budget; schedules its batch.
  void Append(size_t i, LogKind k, FunctionRef<void(std::string&)> build);
  void ScheduleSend();
  void SendAll();
  void Send(size_t i);
  Coro<void> SendStream(size_t i, std::string buf, std::vector<RecordEnd> ends);
  void Sent(size_t i, size_t bytes);  // a batch is done with: its bytes leave the budget
  void CheckFlushed();
  uint64_t NextRandom();

  EventLoop& loop_;
  std::vector<Sink> sinks_;  // sized once, by the constructor
  std::unordered_map<std::string, size_t> by_name_;
  std::unordered_map<std::string, std::shared_ptr<NoSinkCount>> no_sink_;
  Published<NoSinkCounts> no_sink_list_;  // the same, for ForEachCount
  const size_t budget_;
  const bool allow_forced_;
  MetricValue<uint64_t> forced_ignored_;
  size_t pending_ = 0;  // bytes buffered or in flight, every sink
  TimerQueue::Id send_timer_ = 0;
  std::function<void()> flushed_;  // a Flush waiting
  bool flushing_ = false;
  bool closed_ = false;
  uint64_t rng_[4];  // xoshiro256**, for the sampling draws only: never printed
  RandomBuffer id_bytes_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for posted callbacks
};

}  // namespace rankd
