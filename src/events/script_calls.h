// Keys written by a Lua script many at a time (counters: counter_write.h; marks:
// zset_marks.h): which keys share a call, and the sending of the calls by SHA in one
// pipelined batch, with a second round by text for the calls Redis answered NOSCRIPT (a
// restart, SCRIPT FLUSH). One EVALSHA for up to kKeysPerCall keys costs Redis about what
// one command per key would (docs/events.md, "Measured"), so a flush of many keys is a
// handful of calls.
//
// Threads: GroupCalls, ClusterGroup and ScriptSha on any thread; SendScriptWrites on the loop
// thread that owns `redis`.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "core/function_ref.h"
#include "redis/client.h"
#include "redis/command_batch.h"

namespace rankd {

// Whether `redis` is a Redis Cluster (its calls are grouped by slot).
inline bool IsCluster(const RedisClient& redis) { return !redis.endpoint().cluster_seeds.empty(); }

// Keys per call: a call holds Redis for its whole run (a few us a key), so it stays short.
inline constexpr size_t kKeysPerCall = 64;

// The calls of a write: each the indexes of the entries (keys) it writes.
using ScriptCalls = std::vector<std::vector<size_t>>;

// Entries 0..n-1 -> calls of up to kKeysPerCall entries in entry order, each of entries
// of one group: group(i) says which (the keys of a call share what the script takes once
// a call; in a cluster, also their slot: ClusterGroup).
ScriptCalls GroupCalls(size_t n, FunctionRef<uint64_t(size_t)> group);

// A group that also keeps a cluster's calls on one slot (a cluster runs a script on one
// node only when its keys share a slot): `shared` (what the keys share, < 2^40) and the
// slot of `key` (its whole text, prefix included) when `cluster`, else `shared` alone.
uint64_t ClusterGroup(uint64_t shared, bool cluster, FunctionRef<std::string()> key);

// A script's SHA1, hex, as EVALSHA names it.
std::string ScriptSha(std::string_view text);

// Starts call `call`'s command: EVALSHA sha (EVAL text when `eval`), the number of keys;
// `argc`: the arguments after those three. Then: the keys, the script's arguments.
RedisCommands& StartScriptCall(RedisCommands& cmds, const std::vector<size_t>& call, int argc,
                               bool eval, std::string_view text, const std::string& sha);

// Runs write(call) for the calls `only` names, in order (every call when empty).
template <class Write>
void EachCall(const ScriptCalls& calls, const std::vector<size_t>& only, Write&& write) {
  if (only.empty())
    for (const auto& call : calls) write(call);
  else
    for (size_t c : only) write(calls[c]);
}

// One kind of keys written by script: its calls' commands and what their replies mean.
class ScriptWrite {
 public:
  virtual ~ScriptWrite() = default;
  size_t calls() const { return calls_.size(); }
  // Appends the commands of the calls `only` (every call when empty, else those indexes
  // in order): EVALSHA, or EVAL with the script's text when `eval`.
  virtual void Commands(RedisCommands& cmds, bool eval, const std::vector<size_t>& only) = 0;
  // The reply to call `call` (not NOSCRIPT): taken in, or the error that fails the write.
  virtual Result<void> Take(const RedisClient& redis, size_t call, RespView reply) = 0;

 protected:
  explicit ScriptWrite(std::string_view prefix) : prefix_(prefix) {}
  std::string prefix_;  // the client's key prefix
  ScriptCalls calls_;   // set by the subclass's constructor
};

// Sends the calls of every write in one pipelined batch within `deadline`, then the calls
// answered NOSCRIPT again by text. Returns how many calls were sent again. Errors: the
// batch's (unavailable, deadline_exceeded) or the first Take's.
// REQUIRES: the loop thread of `redis`; `writes` and what they point to outlive the call.
Coro<Result<size_t>> SendScriptWrites(RedisClient& redis, std::span<ScriptWrite* const> writes,
                                      Deadline deadline);

}  // namespace rankd
