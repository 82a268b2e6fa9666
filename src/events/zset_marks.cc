#include "events/zset_marks.h"

namespace rankd {

namespace {

std::string MemberText(const UserId& id) { return id.is_str ? id.str : std::to_string(id.num); }

}  // namespace

void MarkBatch::Add(const KeyFamily& family, const ZsetMarks& marks, const UserId& user,
                    const UserId& item, int64_t ts_ms) {
  Marks& m = keys_[Key{&family, user.is_str ? 0 : user.num, user.is_str ? user.str : ""}];
  m.max = marks.max;
  m.ttl_s = marks.ttl_s;
  auto [it, added] = m.members.try_emplace(MemberText(item), ts_ms);
  if (!added && it->second < ts_ms) it->second = ts_ms;
}

RedisCommands MarkBatch::Commands(std::string_view prefix) const {
  RedisCommands cmds;
  auto key = [&](const Key& k) -> RedisCommands& {
    return k.family->id_type == ColumnType::kStr
               ? cmds.Key(prefix, k.family->key_template(), std::string_view(k.str))
               : cmds.Key(prefix, k.family->key_template(), k.num);
  };
  for (const auto& [k, m] : keys_) {
    cmds.Add(static_cast<int>(3 + 2 * m.members.size())).Arg("ZADD");
    key(k).Arg("GT");
    for (const auto& [member, ts] : m.members) cmds.Arg(ts).Arg(member);
    // The newest `max`: ranks run from the lowest score, so drop all but the last max.
    cmds.Add(4).Arg("ZREMRANGEBYRANK");
    key(k).Arg(int64_t{0}).Arg(-(m.max + 1));
    cmds.Add(3).Arg("EXPIRE");
    key(k).Arg(m.ttl_s);
  }
  return cmds;
}

Coro<Status> WriteMarks(RedisClient& redis, const MarkBatch& batch, Deadline deadline) {
  if (batch.empty()) co_return Status{};
  auto replies = co_await redis.Batch(batch.Commands(redis.prefix()), deadline);
  if (!replies) co_return Fail(std::move(replies.error()));
  for (size_t i = 0; i < replies->size(); ++i) {
    RespView r = (*replies)[i];
    if (!r.is_error()) continue;
    Error e =
        Error::Backend("marks write at redis endpoint " + redis.endpoint().name + ": error reply");
    e.detail =
        "marks write at redis endpoint " + redis.endpoint().Label() + ": " + std::string(r.str());
    co_return Fail(std::move(e));
  }
  co_return Status{};
}

}  // namespace rankd
