// Writing counters (docs/events.md): CounterBatch aggregates a request's events into one
// increment per (key, event type, bucket) (or, unaggregated, keeps one increment per event
// and family: --events-flush-ms 0), and WriteCounters sends them as EVALSHAs of
// the family's counters script (CounterScriptFor), each for up to kKeysPerCall keys (of one cluster
// slot: a cluster runs a script on one node), all in one pipelined write: the script adds to the
// buckets' slots of each key's ring (counter_layout.h: a key holds at most keep_s / bucket_s + 1
// buckets per type, whatever the writes) and sets the key's TTL to keep_s. Unaggregated, every
// increment is its own EVALSHA.
//
//   CounterBatch batch(schema, now_ms);   // the plan snapshot's schema, the request's time
//   for (const Event& e : events) batch.Add(*e.type, e.user, e.item, e.value, e.ts_ms);
//   auto written = co_await WriteCounters(*redis, batch, deadline);
//
// Threads: CounterBatch is a plain value (one thread at a time); WriteCounters on the loop
// thread that owns `redis`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "data/value.h"
#include "events/script_calls.h"
#include "plan/schema.h"
#include "redis/client.h"
#include "redis/command_batch.h"

namespace rankd {

// The script that writes counters keys of families counting `types` event types (its
// template is in counter_write.cc: the slot's sums are named, one Lua local a type, so
// that adding to a slot is one unpack and one pack), and its SHA1, hex.
// REQUIRES: 1 <= types <= kMaxCountedTypes.
struct CounterScript {
  std::string text;
  std::string sha;
};
const CounterScript& CounterScriptFor(size_t types);

class CounterBatch {
 public:
  // `schema`: the snapshot the request validated its events against (kept alive by the
  // batch). `now_ms`: the request's time (Unix ms): events older than a family's keep_s
  // are not counted in it. `aggregate` false: every Add is an entry of its own (one
  // EVALSHA per event and family), as --events-flush-ms 0 promises.
  CounterBatch(SchemaPtr schema, int64_t now_ms, bool aggregate = true);

  // Counts one event of `type` in every counters family that counts it: 1, or `value` for
  // a type that carries one, into the bucket of ts_ms. REQUIRES: type is one of the
  // schema's events; user and item are of its declared id types (a str id valid:
  // ValidStrId); value finite (|value| <= kMaxEventValue) when the type carries one.
  void Add(const EventType& type, IdRef user, IdRef item, double value, int64_t ts_ms);

  bool empty() const { return entries_.empty(); }
  const SchemaPtr& schema() const { return schema_; }
  // Entries: the counters keys touched, or (key, event) pairs when not aggregating.
  size_t keys() const { return entries_.size(); }
  size_t increments() const { return increments_; }  // distinct (entry, type, bucket)
  // Counts of an event in a family skipped because the event was older than its keep_s.
  uint64_t too_old() const { return too_old_; }

  // The calls of a write under `prefix`: unaggregated, one per entry; else up to
  // kKeysPerCall entries of one family each, and of one cluster slot when `cluster`.
  ScriptCalls Calls(std::string_view prefix, bool cluster) const;
  // One EVALSHA of the family's CounterScriptFor per call, under `prefix`; `eval` sends the
  // script's text instead (EVAL), as after a NOSCRIPT reply. `only`: the indexes (in order) of the
  // calls to send; empty: all.
  void Commands(RedisCommands& cmds, std::string_view prefix, const ScriptCalls& calls,
                bool eval = false, const std::vector<size_t>& only = {}) const;
  // Key i of that order under `prefix` (messages, tests).
  std::string Key(size_t i, std::string_view prefix) const;

 private:
  struct KeyId {
    uint32_t family;  // index into schema.families
    int64_t num;      // an i64 family's id
    std::string str;  // a str family's
    uint64_t add;     // 0 when aggregating; else the Add's number: an entry per event
    bool operator==(const KeyId&) const = default;
  };
  struct KeyHash {
    size_t operator()(const KeyId& k) const;
  };
  // A bucket's increment of one type: an integer for a count-only type, a sum of values
  // otherwise.
  struct Sum {
    int64_t count = 0;
    long double value = 0;
    bool touched = false;
  };
  // One entry's increments: the buckets it adds to (one, usually), and per bucket a Sum
  // per type its family counts (bucket-major), sent as one slot's bytes a bucket.
  struct Entry {
    KeyId key;
    std::vector<uint32_t> buckets;  // bucket indexes
    std::vector<Sum> sums;          // types x buckets.size()
  };
  std::string KeyText(const KeyId& k, std::string_view prefix) const;

  SchemaPtr schema_;
  int64_t now_ms_;
  bool aggregate_;
  uint64_t adds_ = 0;
  std::vector<Entry> entries_;                          // in the order first added
  std::unordered_map<KeyId, uint32_t, KeyHash> index_;  // aggregating: entry of a key
  size_t increments_ = 0;
  uint64_t too_old_ = 0;
};

// What a write did.
struct CounterWriteResult {
  size_t keys = 0;      // keys written
  size_t calls = 0;     // EVALSHAs sent (EVALs after NOSCRIPT not counted)
  uint64_t late = 0;    // increments the script dropped: older than the key's window
  size_t reloaded = 0;  // keys sent again with EVAL after NOSCRIPT
};

// A batch's write, for SendScriptWrites (script_calls.h): its calls under the client's
// prefix, and what the replies said. REQUIRES: `batch` outlives it.
class CounterWrite : public ScriptWrite {
 public:
  CounterWrite(const CounterBatch& batch, std::string_view prefix, bool cluster);
  void Commands(RedisCommands& cmds, bool eval, const std::vector<size_t>& only) override;
  Result<void> Take(const RedisClient& redis, size_t call, RespView reply) override;
  const CounterWriteResult& result() const { return result_; }

 private:
  const CounterBatch& batch_;
  CounterWriteResult result_;
};

// Sends `batch` on `redis` within `deadline` (SendScriptWrites). Errors: the batch's
// (unavailable, deadline_exceeded), or backend_error naming the endpoint for an error
// reply (its first key and Redis's text in the detail). Succeeds at once when empty.
// REQUIRES: the loop thread of `redis`; `batch` outlives the call.
Coro<Result<CounterWriteResult>> WriteCounters(RedisClient& redis, const CounterBatch& batch,
                                               Deadline deadline);

}  // namespace rankd
