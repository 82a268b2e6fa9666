// counter_write.h: a request's counter increments, aggregated, and their write.
#include "events/counter_write.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>

#include "events/counter_layout.h"

namespace rankd {

// KEYS: counters keys, all of one family. ARGV: the family's TTL in ms (keep_s), its
// ring's slots and a slot's bytes, then one string per key: its buckets, one slot's bytes
// each (counter_layout.h: the bucket index u32 LE, then the increment of every type the
// family counts, f64 LE, 0 for a type with none; binary, so that Redis makes one Lua
// string a key, and an amount arrives with its exact bits). A bucket lands in slot index %
// ring, in block field floor(slot / 8): when the slot holds an older bucket (or none:
// index 0, or past the field's end), the bucket's bytes replace it; when it holds this
// bucket, the increments are added to its sums; when it holds a newer one, the bucket is
// older than the key's window and is dropped, counted in the reply. Each bucket is one
// HGET of its block and one HSET of the block changed: a key can hold no more than its ring,
// whatever the writes. (A key with several buckets in one block reads and writes it once a
// bucket; such keys are rare: a flush's events are a few milliseconds apart.)
//
// The template's @X@, @A@ and @SUM@ become the family's types (x1, x2 / a1, a2 /
// a1 + x1, a2 + x2) and @D@ an f64 each: an add is one unpack of each slot and one pack.
// The script costs Redis most of a write's CPU (docs/events.md, "Measured"), so it makes
// no table a key and reads globals (KEYS, ARGV, redis.call, string, struct) once a call:
// a third fewer instructions a key than gathering a key's blocks in tables first.
//
// Expiry: the TTL is set to keep_s by a write that starts a bucket in its slot (a reset:
// always so on a new key or block), not by one adding to buckets its slots already hold
// (the usual case, one command fewer a key). A bucket is first written at or after its
// start, so the key lives at least keep_s past the start of its newest bucket, when no
// window can read it any more; and a key no write touched for keep_s has expired. PEXPIRE
// never lowers the TTL here: every TTL this script sets is keep_s from an earlier time.
constexpr std::string_view kCounterScriptTemplate =
    R"lua(local keys, argv, call = KEYS, ARGV, redis.call
local sub, pack, unpack = string.sub, struct.pack, struct.unpack
local ttl, ring, width = argv[1], tonumber(argv[2]), tonumber(argv[3])
local fmt, names, late = '<I4@D@', {}, 0
for k = 1, #keys do
  local key, ops, started = keys[k], argv[3 + k], false
  for p = 1, #ops, width do
    local index, @X@ = unpack(fmt, ops, p)
    local slot = index % ring
    local f = (slot - slot % 8) / 8
    local at = (slot % 8) * width
    local name = names[f]
    if name == nil then name = tostring(f); names[f] = name end
    local v = call('HGET', key, name) or ''
    local bytes
    if #v >= at + width then
      local held, @A@ = unpack(fmt, v, at + 1)
      if held > index then
        late = late + 1
      elseif held == index then
        bytes = pack(fmt, index, @SUM@)
      else
        bytes = sub(ops, p, p + width - 1)
        started = true
      end
    else
      if #v < at then v = v .. string.rep('\0', at - #v) end
      bytes = sub(ops, p, p + width - 1)
      started = true
    end
    if bytes then call('HSET', key, name, sub(v, 1, at) .. bytes .. sub(v, at + width + 1)) end
  end
  if started then call('PEXPIRE', key, ttl) end
end
return late
)lua";

namespace {

std::string ReplaceAll(std::string text, std::string_view what, std::string_view with) {
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
  return text;
}

CounterScript MakeCounterScript(size_t types) {
  std::string x, a, sum;
  for (size_t t = 1; t <= types; ++t) {
    const std::string n = std::to_string(t), sep = t > 1 ? ", " : "";
    x += sep + "x" + n;
    a += sep + "a" + n;
    sum += sep + "a" + n + " + x" + n;
  }
  std::string text = ReplaceAll(std::string(kCounterScriptTemplate), "@X@", x);
  text = ReplaceAll(std::move(text), "@A@", a);
  text = ReplaceAll(std::move(text), "@SUM@", sum);
  text = ReplaceAll(std::move(text), "@D@", std::string(types, 'd'));
  std::string sha = ScriptSha(text);
  return {std::move(text), std::move(sha)};
}

static_assert(std::endian::native == std::endian::little);  // a slot's bytes are LE

}  // namespace

const CounterScript& CounterScriptFor(size_t types) {
  static const std::vector<CounterScript> scripts = [] {
    std::vector<CounterScript> all(1);  // [0]: no family counts no type
    for (size_t t = 1; t <= kMaxCountedTypes; ++t) all.push_back(MakeCounterScript(t));
    return all;
  }();
  return scripts.at(types);
}

size_t CounterBatch::KeyHash::operator()(const KeyId& k) const {
  size_t h = std::hash<int64_t>()(k.num) ^ (std::hash<std::string>()(k.str) << 1);
  return h ^ (static_cast<size_t>(k.family) * 0x9e3779b97f4a7c15ULL) ^ (k.add << 7);
}

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
    auto [at, fresh] = aggregate_ ? index_.try_emplace(k, static_cast<uint32_t>(entries_.size()))
                                  : std::pair{index_.end(), true};
    if (fresh) entries_.push_back({std::move(k), {}, {}});
    Entry& e = fresh ? entries_.back() : entries_[at->second];
    const size_t types = c.count.size();
    size_t b = 0;
    while (b < e.buckets.size() && e.buckets[b] != *index) ++b;
    if (b == e.buckets.size()) {
      e.buckets.push_back(*index);
      e.sums.resize(e.sums.size() + types);
    }
    Sum& s = e.sums[b * types + *t];
    increments_ += s.touched ? 0 : 1;
    s.touched = true;
    if (c.valued[*t])
      s.value += value;
    else
      s.count += 1;
  }
}

ScriptCalls CounterBatch::Calls(std::string_view prefix, bool cluster) const {
  if (!aggregate_) {  // one call per increment, as the unaggregated baseline promises
    ScriptCalls calls;
    for (size_t i = 0; i < entries_.size(); ++i) calls.push_back({i});
    return calls;
  }
  // A call's keys share their family: the script takes its ring's shape once.
  return GroupCalls(entries_.size(), [&](size_t i) {
    const KeyId& k = entries_[i].key;
    return ClusterGroup(k.family, cluster, [&] { return KeyText(k, prefix); });
  });
}

void CounterBatch::Commands(RedisCommands& cmds, std::string_view prefix, const ScriptCalls& calls,
                            bool eval, const std::vector<size_t>& only) const {
  std::string ops;
  auto write = [&](const std::vector<size_t>& call) {
    const int keys = static_cast<int>(call.size());
    const KeyFamily& f = schema_->families[entries_[call.front()].key.family];
    const CountersSpec& c = *f.counters;
    const CounterRing ring(c);
    const size_t types = c.count.size();
    const CounterScript& script = CounterScriptFor(types);
    StartScriptCall(cmds, call, 2 * keys + 3, eval, script.text, script.sha);
    for (size_t e : call) {
      const KeyId& k = entries_[e].key;
      if (f.id_type == ColumnType::kStr)
        cmds.Key(prefix, f.key_template(), std::string_view(k.str));
      else
        cmds.Key(prefix, f.key_template(), k.num);
    }
    cmds.Arg(c.keep_s * 1000).Arg(ring.slots).Arg(static_cast<int64_t>(ring.slot_bytes));
    for (size_t e : call) {
      const Entry& entry = entries_[e];
      ops.resize(entry.buckets.size() * ring.slot_bytes);
      char* out = ops.data();
      for (size_t b = 0; b < entry.buckets.size(); ++b) {
        std::memcpy(out, &entry.buckets[b], 4);
        out += 4;
        for (size_t t = 0; t < types; ++t) {
          const Sum& sum = entry.sums[b * types + t];
          const double amount =
              c.valued[t] ? static_cast<double>(sum.value) : static_cast<double>(sum.count);
          std::memcpy(out, &amount, 8);
          out += 8;
        }
      }
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
  return KeyText(entries_.at(i).key, prefix);
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
