// counter_write.h: a request's counter increments, aggregated, and their write.
#include "events/counter_write.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>

#include "events/counter_layout.h"

namespace rankd {

// KEYS: counters keys. ARGV, for each key in turn: its TTL in ms (keep_s), its ring's
// slots, a slot's bytes, n, then n increments (bucket index, type index from 0, amount).
// A slot (counter_layout.h) is the index of the bucket it holds (u32 LE) and a sum per
// type (f64 LE). An increment lands in slot index % ring, in block field
// floor(slot / 8): when the slot holds an older bucket (or none: index 0), it is reset to
// this one first; when it holds a newer one, the increment is older than the key's
// window and is dropped, counted in the reply. Each block read once (HGET), the changed
// ones written back at once (HSET), then the TTL: a key can hold no more than its ring,
// whatever the writes, and expires keep_s after the last write.
const std::string_view kCounterScript = R"lua(local late, a = 0, 1
for k = 1, #KEYS do
  local key = KEYS[k]
  local ttl, ring, width, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  a = a + 4
  local blocks, changed, order = {}, {}, {}
  for _ = 1, n do
    local index, t, d = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    local slot = index % ring
    local f = tostring((slot - slot % 8) / 8)
    local at = (slot % 8) * width
    local v = blocks[f]
    if v == nil then v = redis.call('HGET', key, f) or '' end
    if #v < at + width then v = v .. string.rep('\0', at + width - #v) end
    local held = struct.unpack('<I4', v, at + 1)
    if held > index then
      late = late + 1
    else
      if held < index then
        v = string.sub(v, 1, at) .. struct.pack('<I4', index) .. string.rep('\0', width - 4) ..
            string.sub(v, at + width + 1)
      end
      local o = at + 4 + 8 * t
      v = string.sub(v, 1, o) .. struct.pack('<d', struct.unpack('<d', v, o + 1) + d) ..
          string.sub(v, o + 9)
      if not changed[f] then changed[f] = true; order[#order + 1] = f end
    end
    blocks[f] = v
  end
  if #order > 0 then
    local args = {'HSET', key}
    for _, f in ipairs(order) do args[#args + 1] = f; args[#args + 1] = blocks[f] end
    redis.call(unpack(args))
    redis.call('PEXPIRE', key, ttl)
  end
end
return late
)lua";

const std::string& CounterScriptSha() {
  static const std::string sha = ScriptSha(kCounterScript);
  return sha;
}

namespace {

// An f64 increment as the script reads it back exactly: the shortest round-trip text.
std::string FloatText(long double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, static_cast<double>(v));
  return std::string(buf, r.ptr);
}

}  // namespace

CounterBatch::CounterBatch(SchemaPtr schema, int64_t now_ms, bool aggregate)
    : schema_(std::move(schema)), now_ms_(now_ms), aggregate_(aggregate) {}

void CounterBatch::Add(const EventType& type, IdRef user, IdRef item, double value, int64_t ts_ms) {
  const uint64_t add = aggregate_ ? 0 : ++adds_;
  for (size_t fi = 0; fi < schema_->families.size(); ++fi) {
    const KeyFamily& f = schema_->families[fi];
    if (!f.counters) continue;
    const CountersSpec& c = *f.counters;
    const std::optional<uint32_t> t = c.TypeIndex(type.name);
    if (!t) continue;
    const auto index = CounterRing(c).IndexOf(BucketStart(SecondOf(ts_ms), c.bucket_s));
    if (ts_ms < now_ms_ - c.keep_s * 1000 || !index) {  // no slot before 1970 either
      ++too_old_;
      continue;
    }
    const IdRef id = c.by == CountersSpec::By::kItem ? item : user;
    KeyId k{static_cast<uint32_t>(fi), 0, {}, add};
    if (f.id_type == ColumnType::kStr)
      k.str = std::string(id.str);
    else
      k.num = id.num;
    Sum& s = keys_[std::move(k)][{*t, *index}];
    if (c.valued[*t])
      s.value += value;
    else
      s.count += 1;
  }
}

size_t CounterBatch::increments() const {
  size_t n = 0;
  for (const auto& [k, b] : keys_) n += b.size();
  return n;
}

ScriptCalls CounterBatch::Calls(std::string_view prefix, bool cluster) const {
  ScriptCalls calls;
  if (!aggregate_) {  // one call per increment, as the unaggregated baseline promises
    for (size_t i = 0; i < keys_.size(); ++i) calls.push_back({i});
    return calls;
  }
  std::vector<std::string> keys;
  keys.reserve(keys_.size());
  for (const auto& [k, buckets] : keys_) keys.push_back(KeyText(k, prefix));
  return GroupKeys(keys, cluster);
}

void CounterBatch::Commands(RedisCommands& cmds, std::string_view prefix, const ScriptCalls& calls,
                            bool eval, const std::vector<size_t>& only) const {
  std::vector<std::map<KeyId, Buckets>::const_iterator> entries;
  entries.reserve(keys_.size());
  for (auto it = keys_.begin(); it != keys_.end(); ++it) entries.push_back(it);
  auto write = [&](const std::vector<size_t>& call) {
    int argc = static_cast<int>(call.size());
    for (size_t e : call) argc += 4 + 3 * static_cast<int>(entries[e]->second.size());
    StartScriptCall(cmds, call, argc, eval, kCounterScript, CounterScriptSha());
    for (size_t e : call) {
      const KeyId& k = entries[e]->first;
      const KeyFamily& f = schema_->families[k.family];
      if (f.id_type == ColumnType::kStr)
        cmds.Key(prefix, f.key_template(), std::string_view(k.str));
      else
        cmds.Key(prefix, f.key_template(), k.num);
    }
    for (size_t e : call) {
      const CountersSpec& c = *schema_->families[entries[e]->first.family].counters;
      const CounterRing ring(c);
      cmds.Arg(c.keep_s * 1000)
          .Arg(ring.slots)
          .Arg(static_cast<int64_t>(ring.slot_bytes))
          .Arg(static_cast<int64_t>(entries[e]->second.size()));
      for (const auto& [tb, sum] : entries[e]->second) {
        cmds.Arg(int64_t{tb.second}).Arg(int64_t{tb.first});
        if (c.valued[tb.first])
          cmds.Arg(FloatText(sum.value));
        else
          cmds.Arg(sum.count);
      }
    }
  };
  EachCall(calls, only, write);
}

std::string CounterBatch::KeyText(const KeyId& k, std::string_view prefix) const {
  const KeyFamily& f = schema_->families[k.family];
  return std::string(prefix) +
         f.KeyOf(f.id_type == ColumnType::kStr ? k.str : std::to_string(k.num));
}

std::string CounterBatch::Key(size_t i, std::string_view prefix) const {
  auto it = keys_.begin();
  std::advance(it, static_cast<ptrdiff_t>(i));
  return KeyText(it->first, prefix);
}

CounterWrite::CounterWrite(const CounterBatch& batch, std::string_view prefix, bool cluster)
    : batch_(batch), prefix_(prefix), calls_(batch.Calls(prefix, cluster)) {
  result_.calls = calls_.size();
}

void CounterWrite::Commands(RedisCommands& cmds, bool eval, const std::vector<size_t>& only) {
  if (eval)
    for (size_t c : only) result_.reloaded += calls_[c].size();
  batch_.Commands(cmds, prefix_, calls_, eval, only);
}

Result<void> CounterWrite::Take(const RedisClient& redis, size_t call, RespView r) {
  if (r.is_integer()) {
    result_.late += static_cast<uint64_t>(std::max<int64_t>(0, r.integer()));
    result_.keys += calls_[call].size();
    return {};
  }
  Error e = Error::Backend("counters write at redis endpoint " + redis.endpoint().name + ": " +
                           (r.is_error() ? "error reply" : "unexpected reply"));
  e.detail = "counters write of " + std::to_string(calls_[call].size()) + " key(s) from " +
             batch_.Key(calls_[call].front(), prefix_) + " at redis endpoint " +
             redis.endpoint().Label() + ": " +
             (r.is_error() ? std::string(r.str()) : std::string(RespKindName(r.kind())));
  return Fail(std::move(e));
}

Coro<Result<CounterWriteResult>> WriteCounters(RedisClient& redis, const CounterBatch& batch,
                                               Deadline deadline) {
  CounterWrite write(batch, redis.prefix(), IsCluster(redis));
  ScriptWrite* writes[] = {&write};
  if (auto sent = co_await SendScriptWrites(redis, writes, deadline); !sent)
    co_return Fail(std::move(sent.error()));
  co_return write.result();
}

}  // namespace rankd
