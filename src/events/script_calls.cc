// script_calls.h: grouping keys into script calls, and sending them.
#include "events/script_calls.h"

#include <openssl/evp.h>

#include <map>

#include "redis/cluster_slots.h"

namespace rankd {

ScriptCalls GroupCalls(size_t n, FunctionRef<uint64_t(size_t)> group) {
  ScriptCalls calls;
  std::map<uint64_t, size_t> open;  // group -> its call still taking keys
  for (size_t i = 0; i < n; ++i) {
    auto [at, fresh] = open.try_emplace(group(i), calls.size());
    if (fresh || calls[at->second].size() == kKeysPerCall) {
      at->second = calls.size();
      calls.emplace_back();
    }
    calls[at->second].push_back(i);
  }
  return calls;
}

uint64_t ClusterGroup(uint64_t shared, bool cluster, FunctionRef<std::string()> key) {
  // Slots are < 16,384 (14 bits): the shared part above them.
  return cluster ? (shared << 14) | static_cast<uint64_t>(KeySlot(key())) : shared;
}

RedisCommands& StartScriptCall(RedisCommands& cmds, const std::vector<size_t>& call, int argc,
                               bool eval, std::string_view text, const std::string& sha) {
  return cmds.Add(3 + argc)
      .Arg(eval ? "EVAL" : "EVALSHA")
      .Arg(eval ? text : std::string_view(sha))
      .Arg(static_cast<int64_t>(call.size()));
}

std::string ScriptSha(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), md, &len, EVP_sha1(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
}

Coro<Result<size_t>> SendScriptWrites(RedisClient& redis, std::span<ScriptWrite* const> writes,
                                      Deadline deadline) {
  RedisCommands cmds;
  for (ScriptWrite* w : writes) w->Commands(cmds, false, {});
  if (cmds.size() == 0) co_return size_t{0};
  auto replies = co_await redis.Batch(std::move(cmds), deadline);
  if (!replies) co_return Fail(std::move(replies.error()));
  std::vector<std::vector<size_t>> lost(writes.size());  // per write: calls to send again
  size_t at = 0, again = 0;
  for (size_t w = 0; w < writes.size(); ++w)
    for (size_t c = 0; c < writes[w]->calls(); ++c) {
      RespView r = (*replies)[at++];
      if (r.is_error() && r.str().starts_with("NOSCRIPT")) {
        lost[w].push_back(c);
        ++again;
      } else if (auto ok = writes[w]->Take(redis, c, r); !ok) {
        co_return Fail(std::move(ok.error()));
      }
    }
  if (again == 0) co_return size_t{0};
  RedisCommands retry;
  for (size_t w = 0; w < writes.size(); ++w)
    if (!lost[w].empty()) writes[w]->Commands(retry, true, lost[w]);
  auto second = co_await redis.Batch(std::move(retry), deadline);
  if (!second) co_return Fail(std::move(second.error()));
  at = 0;
  for (size_t w = 0; w < writes.size(); ++w)
    for (size_t c : lost[w])
      if (auto ok = writes[w]->Take(redis, c, (*second)[at++]); !ok)
        co_return Fail(std::move(ok.error()));
  co_return again;
}

}  // namespace rankd
