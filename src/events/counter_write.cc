// counter_write.h: a request's counter increments, aggregated, and their write.
#include "events/counter_write.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>

#include "events/counter_layout.h"

namespace rankd {

// KEYS: counters keys, all of one family. ARGV: the family's TTL in ms (keep_s), its
// ring's slots and a slot's bytes, then one string per key: its increments, 13 bytes each
// (kIncrementBytes: the bucket index u32 LE, the type index u8 from 0, the amount f64 LE;
// binary, so that Redis makes one Lua string a key, not three an increment). A slot
// (counter_layout.h) is the index of the bucket it holds (u32 LE) and a sum per type
// (f64 LE). An increment lands in slot index % ring, in block field floor(slot / 8): when
// the slot holds an older bucket (or none: index 0), it is reset to this one first; when
// it holds a newer one, the increment is older than the key's window and is dropped,
// counted in the reply. Each block read once (HGET), the changed ones written back at
// once (HSET; one block, the usual case, without building an argument table): a key can
// hold no more than its ring, whatever the writes.
//
// Expiry: the TTL is set to keep_s by a write that starts a bucket in its slot (a reset:
// always so on a new key or block), not by one adding to buckets its slots already hold
// (the usual case, one command fewer a key). A bucket is first written at or after its
// start, so the key lives at least keep_s past the start of its newest bucket, when no
// window can read it any more; and a key no write touched for keep_s has expired. PEXPIRE
// never lowers the TTL here: every TTL this script sets is keep_s from an earlier time.
const std::string_view kCounterScript = R"lua(local late, ttl = 0, ARGV[1]
local ring, width = tonumber(ARGV[2]), tonumber(ARGV[3])
local zeros = string.rep('\0', 8 * width)
for k = 1, #KEYS do
  local key, ops = KEYS[k], ARGV[3 + k]
  local blocks, changed, order, started = {}, {}, {}, false
  for p = 1, #ops, 13 do
    local index, t, d = struct.unpack('<I4Bd', ops, p)
    local slot = index % ring
    local f = (slot - slot % 8) / 8
    local at = (slot % 8) * width
    local v = blocks[f]
    if v == nil then v = redis.call('HGET', key, f) or '' end
    if #v < at + width then v = v .. string.sub(zeros, 1, at + width - #v) end
    local held = struct.unpack('<I4', v, at + 1)
    if held > index then
      late = late + 1
    else
      if held < index then
        v = string.sub(v, 1, at) .. struct.pack('<I4', index) .. string.sub(zeros, 1, width - 4) ..
            string.sub(v, at + width + 1)
        started = true
      end
      local o = at + 4 + 8 * t
      v = string.sub(v, 1, o) .. struct.pack('<d', struct.unpack('<d', v, o + 1) + d) ..
          string.sub(v, o + 9)
      if not changed[f] then changed[f] = true; order[#order + 1] = f end
    end
    blocks[f] = v
  end
  if #order == 1 then
    redis.call('HSET', key, order[1], blocks[order[1]])
  elseif #order > 1 then
    local args = {'HSET', key}
    for _, f in ipairs(order) do args[#args + 1] = f; args[#args + 1] = blocks[f] end
    redis.call(unpack(args))
  end
  if started then redis.call('PEXPIRE', key, ttl) end
end
return late
)lua";

const std::string& CounterScriptSha() {
  static const std::string sha = ScriptSha(kCounterScript);
  return sha;
}

namespace {

// One increment as kCounterScript reads it: index u32, type u8, amount f64, little-endian
// (x86-64's order, so the bytes are the values' own).
constexpr size_t kIncrementBytes = 13;
static_assert(std::endian::native == std::endian::little);

void AppendIncrement(std::string& out, uint32_t index, uint32_t type, double amount) {
  char b[kIncrementBytes];
  const auto t = static_cast<uint8_t>(type);  // < kMaxCountedTypes
  std::memcpy(b, &index, 4);
  std::memcpy(b + 4, &t, 1);
  std::memcpy(b + 5, &amount, 8);
  out.append(b, kIncrementBytes);
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
  if (!aggregate_) {  // one call per increment, as the unaggregated baseline promises
    ScriptCalls calls;
    for (size_t i = 0; i < keys_.size(); ++i) calls.push_back({i});
    return calls;
  }
  std::vector<std::map<KeyId, Buckets>::const_iterator> entries;
  entries.reserve(keys_.size());
  for (auto it = keys_.begin(); it != keys_.end(); ++it) entries.push_back(it);
  // A call's keys share their family: the script takes its ring's shape once.
  return GroupCalls(entries.size(), [&](size_t i) {
    const KeyId& k = entries[i]->first;
    return ClusterGroup(k.family, cluster, [&] { return KeyText(k, prefix); });
  });
}

void CounterBatch::Commands(RedisCommands& cmds, std::string_view prefix, const ScriptCalls& calls,
                            bool eval, const std::vector<size_t>& only) const {
  std::vector<std::map<KeyId, Buckets>::const_iterator> entries;
  entries.reserve(keys_.size());
  for (auto it = keys_.begin(); it != keys_.end(); ++it) entries.push_back(it);
  std::string ops;
  auto write = [&](const std::vector<size_t>& call) {
    const int keys = static_cast<int>(call.size());
    const KeyFamily& f = schema_->families[entries[call.front()]->first.family];
    const CountersSpec& c = *f.counters;
    const CounterRing ring(c);
    StartScriptCall(cmds, call, 2 * keys + 3, eval, kCounterScript, CounterScriptSha());
    for (size_t e : call) {
      const KeyId& k = entries[e]->first;
      if (f.id_type == ColumnType::kStr)
        cmds.Key(prefix, f.key_template(), std::string_view(k.str));
      else
        cmds.Key(prefix, f.key_template(), k.num);
    }
    cmds.Arg(c.keep_s * 1000).Arg(ring.slots).Arg(static_cast<int64_t>(ring.slot_bytes));
    for (size_t e : call) {
      ops.clear();
      for (const auto& [tb, sum] : entries[e]->second)
        AppendIncrement(
            ops, tb.second, tb.first,
            c.valued[tb.first] ? static_cast<double>(sum.value) : static_cast<double>(sum.count));
      cmds.Arg(std::string_view(ops));
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
    : ScriptWrite(prefix), batch_(batch) {
  calls_ = batch.Calls(prefix, cluster);
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
