// zset_marks.h: marks gathered per key, and their write by script.
#include "events/zset_marks.h"

#include <functional>
#include <map>

namespace rankd {

// KEYS: zsets, all kept under the same bounds. ARGV: max, ttl_s, then for each key in
// turn: n, then n (score, member) pairs. Per key: ZADD GT (never lowering a member's time;
// 1,000 pairs a command, well within Lua's limit on unpack; one pair, the usual case,
// without building an argument table), then, when it added a member, all but the newest
// `max` dropped (ranks run from the lowest score; a ZADD that added none left the count
// as the last write bounded it), then the TTL. Globals (KEYS, ARGV, redis.call) are read
// once a call, as the counters script does.
const std::string_view kMarksScript = R"lua(local keys, argv, call = KEYS, ARGV, redis.call
local max, ttl, a = tonumber(argv[1]), argv[2], 3
for k = 1, #keys do
  local key, n = keys[k], tonumber(argv[a])
  a = a + 1
  local added = 0
  if n == 1 then
    added = call('ZADD', key, 'GT', argv[a], argv[a + 1])
  else
    for first = 0, n - 1, 1000 do
      local args = {'ZADD', key, 'GT'}
      for i = first, math.min(n, first + 1000) - 1 do
        args[#args + 1] = argv[a + 2 * i]
        args[#args + 1] = argv[a + 2 * i + 1]
      end
      added = added + call(unpack(args))
    end
  end
  a = a + 2 * n
  if added > 0 then call('ZREMRANGEBYRANK', key, 0, -(max + 1)) end
  call('EXPIRE', key, ttl)
end
return 0
)lua";

namespace {

std::string MemberText(const UserId& id) { return id.is_str ? id.str : std::to_string(id.num); }

const std::string& MarksScriptSha() {
  static const std::string sha = ScriptSha(kMarksScript);
  return sha;
}

}  // namespace

size_t MarkBatch::KeyHash::operator()(const Key& k) const {
  const size_t h = std::hash<int64_t>()(k.num) ^ (std::hash<std::string>()(k.str) << 1);
  return h ^ std::hash<const void*>()(k.family) ^ (k.add << 7);
}

void MarkBatch::Add(const KeyFamily& family, const ZsetMarks& marks, const UserId& user,
                    const UserId& item, int64_t ts_ms) {
  const uint64_t add = aggregate_ ? 0 : ++adds_;
  Key k{&family, user.is_str ? 0 : user.num, user.is_str ? user.str : "", add};
  auto [at, fresh] = aggregate_ ? index_.try_emplace(k, static_cast<uint32_t>(entries_.size()))
                                : std::pair{index_.end(), true};
  if (fresh) entries_.push_back({std::move(k), marks.max, marks.ttl_s, {}});
  Entry& e = fresh ? entries_.back() : entries_[at->second];
  e.max = marks.max;
  e.ttl_s = marks.ttl_s;
  e.members.emplace_back(MemberText(item), ts_ms);
}

MarkWrite::MarkWrite(const MarkBatch& batch, std::string_view prefix, bool cluster)
    : ScriptWrite(prefix), batch_(batch) {
  const auto& entries = batch.entries_;
  if (!batch.aggregate_) {  // one call per mark, as the unaggregated baseline promises
    for (size_t i = 0; i < entries.size(); ++i) calls_.push_back({i});
    return;
  }
  // A call's keys share their bounds: the script takes them once.
  std::map<std::pair<int64_t, int64_t>, uint64_t> bounds;  // (max, ttl_s) -> its number
  calls_ = GroupCalls(entries.size(), [&](size_t i) {
    const MarkBatch::Entry& e = entries[i];
    const uint64_t shared = bounds.try_emplace({e.max, e.ttl_s}, bounds.size()).first->second;
    return ClusterGroup(shared, cluster, [&] {
      const MarkBatch::Key& k = e.key;
      return prefix_ +
             k.family->KeyOf(k.family->id_type == ColumnType::kStr ? k.str : std::to_string(k.num));
    });
  });
}

void MarkWrite::Commands(RedisCommands& cmds, bool eval, const std::vector<size_t>& only) {
  auto write = [&](const std::vector<size_t>& call) {
    int argc = 2 + static_cast<int>(call.size());
    const auto& entries = batch_.entries_;
    for (size_t e : call) argc += 1 + 2 * static_cast<int>(entries[e].members.size());
    StartScriptCall(cmds, call, argc, eval, kMarksScript, MarksScriptSha());
    for (size_t e : call) {
      const MarkBatch::Key& k = entries[e].key;
      if (k.family->id_type == ColumnType::kStr)
        cmds.Key(prefix_, k.family->key_template(), std::string_view(k.str));
      else
        cmds.Key(prefix_, k.family->key_template(), k.num);
    }
    const MarkBatch::Entry& bounds = entries[call.front()];
    cmds.Arg(bounds.max).Arg(bounds.ttl_s);
    for (size_t e : call) {
      const MarkBatch::Entry& m = entries[e];
      cmds.Arg(static_cast<int64_t>(m.members.size()));
      for (const auto& [member, ts] : m.members) cmds.Arg(ts).Arg(member);
    }
  };
  EachCall(calls_, only, write);
}

Result<void> MarkWrite::Take(const RedisClient& redis, size_t, RespView r) {
  if (!r.is_error()) return {};
  Error e =
      Error::Backend("marks write at redis endpoint " + redis.endpoint().name + ": error reply");
  e.detail =
      "marks write at redis endpoint " + redis.endpoint().Label() + ": " + std::string(r.str());
  return Fail(std::move(e));
}

Coro<Status> WriteMarks(RedisClient& redis, const MarkBatch& batch, Deadline deadline) {
  MarkWrite write(batch, redis.prefix(), IsCluster(redis));
  ScriptWrite* writes[] = {&write};
  if (auto sent = co_await SendScriptWrites(redis, writes, deadline); !sent)
    co_return Fail(std::move(sent.error()));
  co_return Status{};
}

}  // namespace rankd
