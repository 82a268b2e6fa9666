// Writing marks (docs/events.md): items added to a user's zset scored by a time in ms,
// never lowering a member's score (ZADD GT), the newest `max` kept, the TTL set — what an
// event type's `marks` and a plan's `served_state` both keep. MarkBatch gathers them per
// key (a member marked twice keeps its newest time: ZADD GT of both) and WriteMarks sends them as
// EVALSHAs of kMarksScript, up to kKeysPerCall keys a call (script_calls.h): ZADD GT,
// ZREMRANGEBYRANK and EXPIRE per key, run by Redis without a command's round of parsing
// and reply for each.
//
// Threads: MarkBatch is a plain value; WriteMarks on the loop thread that owns `redis`.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "data/value.h"
#include "events/script_calls.h"
#include "plan/schema.h"
#include "redis/client.h"

namespace rankd {

class MarkBatch {
 public:
  // `aggregate` false: every Add is an entry (and a script call) of its own, as
  // --events-flush-ms 0 promises.
  explicit MarkBatch(bool aggregate = true) : aggregate_(aggregate) {}

  // Marks `item` in `user`'s zset of `family` (a zset family of the schema the caller
  // keeps alive) at `ts_ms`, under `marks`' bounds.
  void Add(const KeyFamily& family, const ZsetMarks& marks, const UserId& user, const UserId& item,
           int64_t ts_ms);
  bool empty() const { return entries_.empty(); }
  size_t keys() const { return entries_.size(); }

 private:
  struct Key {
    const KeyFamily* family;
    int64_t num;
    std::string str;
    uint64_t add;  // 0 when aggregating; else the Add's number: an entry per mark
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  // A key's marks: its bounds, and (member text, ts_ms) as added. A member added twice is
  // sent twice: ZADD GT keeps its newest time, and a batch rarely holds one twice.
  struct Entry {
    Key key;
    int64_t max = 0, ttl_s = 0;
    std::vector<std::pair<std::string, int64_t>> members;
  };
  bool aggregate_;
  uint64_t adds_ = 0;
  std::vector<Entry> entries_;                        // in the order first added
  std::unordered_map<Key, uint32_t, KeyHash> index_;  // aggregating: entry of a key
  friend class MarkWrite;
};

// The write of marks (its text is in zset_marks.cc).
extern const std::string_view kMarksScript;

// A batch's write, for SendScriptWrites (script_calls.h). REQUIRES: `batch` outlives it.
class MarkWrite : public ScriptWrite {
 public:
  MarkWrite(const MarkBatch& batch, std::string_view prefix, bool cluster);
  void Commands(RedisCommands& cmds, bool eval, const std::vector<size_t>& only) override;
  Result<void> Take(const RedisClient& redis, size_t call, RespView reply) override;

 private:
  const MarkBatch& batch_;
};

// Errors: the batch's (unavailable, deadline_exceeded), or backend_error naming the
// endpoint for an error reply (the key and Redis's text in the detail).
Coro<Status> WriteMarks(RedisClient& redis, const MarkBatch& batch, Deadline deadline);

}  // namespace rankd
