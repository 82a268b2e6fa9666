// counter_write.h: a request's counter increments, aggregated, and their write.
#include "events/counter_write.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>

#include "events/counter_layout.h"

namespace rankd {

// KEYS[1]: a counters key. ARGV: its TTL in ms (keep_s), keep_s, the writer's current
// bucket start, bucket_s, buckets per block, then (type, bucket start, increment) triples.
// Blocks are "<type>:<block start>" fields of comma-separated sums (counter_layout.h),
// read once each and written back once; a changed sum as "%.17g" (a double's exact text:
// counts stay integers), the others as they were. "_lo" and "_hi" hold the oldest bucket that may
// hold a sum and the newest ever written, so that the key is scanned (HKEYS, a few fields) only
// when its oldest bucket has aged out, about once per bucket_s, not on every write.
//
// The key keeps the buckets b >= top - keep_s, top the newest of: the writer's bucket,
// "_hi", the buckets written: keep_s / bucket_s + 1 starts per type, whatever the writes
// (a future-dated event, a writer whose clock is behind). Older sums are zeroed (a block
// of zeros is deleted, trailing zeros are not written); an increment older than that is
// dropped and counted in the reply. A key left without a block is deleted.
const std::string_view kCounterScript = R"lua(local key = KEYS[1]
local keep, bs, slots = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local span = bs * slots
local marks = redis.call('HMGET', key, '_lo', '_hi')
local lo, hi = tonumber(marks[1]), tonumber(marks[2])
local top = tonumber(ARGV[3])
if hi and hi > top then top = hi end
for i = 6, #ARGV, 3 do
  local b = tonumber(ARGV[i + 1])
  if b > top then top = b end
end
local cutoff = top - keep
local blocks = {}
local function block(f)
  local v = blocks[f]
  if not v then
    v = {}
    local text = redis.call('HGET', key, f)
    if text then for x in string.gmatch(text, '[^,]+') do v[#v + 1] = x end end
    for s = #v + 1, slots do v[s] = '0' end
    blocks[f] = v
  end
  return v
end
local late, low = 0, lo
for i = 6, #ARGV, 3 do
  local b = tonumber(ARGV[i + 1])
  if b < cutoff then
    late = late + 1
  else
    local start = b - b % span
    local v = block(ARGV[i] .. ':' .. start)
    local s = (b - start) / bs + 1
    v[s] = string.format('%.17g', (tonumber(v[s]) or 0) + tonumber(ARGV[i + 2]))
    if low == nil or b < low then low = b end
  end
end
if low ~= nil and low < cutoff then
  for _, f in ipairs(redis.call('HKEYS', key)) do
    local start = tonumber(string.match(f, ':(%-?%d+)$'))
    if start ~= nil and start < cutoff then
      local v = block(f)
      for s = 1, math.min(slots, (cutoff - start) / bs) do v[s] = '0' end
    end
  end
  low = cutoff
end
for f, v in pairs(blocks) do
  local n = #v
  while n > 0 and tonumber(v[n]) == 0 do n = n - 1 end
  if n == 0 then
    redis.call('HDEL', key, f)
  else
    redis.call('HSET', key, f, table.concat(v, ',', 1, n))
  end
end
if low == nil then
  redis.call('DEL', key)
  return late
end
if low ~= lo or top ~= hi then redis.call('HSET', key, '_lo', low, '_hi', top) end
if redis.call('HLEN', key) <= 2 then
  redis.call('DEL', key)
else
  redis.call('PEXPIRE', key, ARGV[1])
end
return late
)lua";

const std::string& CounterScriptSha() {
  static const std::string sha = [] {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(kCounterScript.data(), kCounterScript.size(), md, &len, EVP_sha1(), nullptr);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) {
      hex += kHex[md[i] >> 4];
      hex += kHex[md[i] & 15];
    }
    return hex;
  }();
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
    if (ts_ms < now_ms_ - c.keep_s * 1000) {
      ++too_old_;
      continue;
    }
    const IdRef id = c.by == CountersSpec::By::kItem ? item : user;
    KeyId k{static_cast<uint32_t>(fi), 0, {}, add};
    if (f.id_type == ColumnType::kStr)
      k.str = std::string(id.str);
    else
      k.num = id.num;
    Sum& s = keys_[std::move(k)][{*t, BucketStart(SecondOf(ts_ms), c.bucket_s)}];
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

RedisCommands CounterBatch::Commands(std::string_view prefix, bool eval,
                                     const std::vector<size_t>& only) const {
  RedisCommands cmds;
  const int64_t now_s = SecondOf(now_ms_);
  size_t index = 0;
  auto next = only.begin();
  for (const auto& [k, buckets] : keys_) {
    const size_t i = index++;
    if (!only.empty()) {
      if (next == only.end() || *next != i) continue;
      ++next;
    }
    const KeyFamily& f = schema_->families[k.family];
    const CountersSpec& c = *f.counters;
    cmds.Add(static_cast<int>(9 + 3 * buckets.size()))
        .Arg(eval ? "EVAL" : "EVALSHA")
        .Arg(eval ? kCounterScript : std::string_view(CounterScriptSha()))
        .Arg(int64_t{1});
    if (f.id_type == ColumnType::kStr)
      cmds.Key(prefix, f.key_template(), std::string_view(k.str));
    else
      cmds.Key(prefix, f.key_template(), k.num);
    cmds.Arg(c.keep_s * 1000)
        .Arg(c.keep_s)
        .Arg(BucketStart(now_s, c.bucket_s))
        .Arg(c.bucket_s)
        .Arg(kBlockBuckets);
    for (const auto& [tb, sum] : buckets) {
      cmds.Arg(c.count[tb.first]).Arg(tb.second);
      if (c.valued[tb.first])
        cmds.Arg(FloatText(sum.value));
      else
        cmds.Arg(sum.count);
    }
  }
  return cmds;
}

std::string CounterBatch::Key(size_t i, std::string_view prefix) const {
  auto it = keys_.begin();
  std::advance(it, static_cast<ptrdiff_t>(i));
  const KeyFamily& f = schema_->families[it->first.family];
  return std::string(prefix) +
         f.KeyOf(f.id_type == ColumnType::kStr ? it->first.str : std::to_string(it->first.num));
}

namespace {

// Reply `r` to the write of key `key`: counted into `out`, or NOSCRIPT (noted in
// `noscript` when it may be retried), or the error that fails the write.
Result<void> CheckWrite(const RedisClient& redis, const CounterBatch& batch, RespView r, size_t key,
                        std::vector<size_t>* noscript, CounterWriteResult& out) {
  if (r.is_integer()) {
    out.late += static_cast<uint64_t>(std::max<int64_t>(0, r.integer()));
    ++out.keys;
    return {};
  }
  if (noscript && r.is_error() && r.str().starts_with("NOSCRIPT")) {
    noscript->push_back(key);
    return {};
  }
  Error e = Error::Backend("counters write at redis endpoint " + redis.endpoint().name + ": " +
                           (r.is_error() ? "error reply" : "unexpected reply"));
  e.detail = "counters write " + batch.Key(key, redis.prefix()) + " at redis endpoint " +
             redis.endpoint().Label() + ": " +
             (r.is_error() ? std::string(r.str()) : std::string(RespKindName(r.kind())));
  return Fail(std::move(e));
}

}  // namespace

Coro<Result<CounterWriteResult>> WriteCounters(RedisClient& redis, const CounterBatch& batch,
                                               Deadline deadline) {
  CounterWriteResult out;
  if (batch.empty()) co_return out;
  auto replies = co_await redis.Batch(batch.Commands(redis.prefix()), deadline);
  if (!replies) co_return Fail(std::move(replies.error()));
  std::vector<size_t> noscript;
  for (size_t i = 0; i < batch.keys(); ++i)
    if (auto ok = CheckWrite(redis, batch, (*replies)[i], i, &noscript, out); !ok)
      co_return Fail(std::move(ok.error()));
  if (noscript.empty()) co_return out;
  // Redis lost the script (a restart, SCRIPT FLUSH): EVAL loads it again.
  out.reloaded = noscript.size();
  auto again = co_await redis.Batch(batch.Commands(redis.prefix(), true, noscript), deadline);
  if (!again) co_return Fail(std::move(again.error()));
  for (size_t i = 0; i < noscript.size(); ++i)
    if (auto ok = CheckWrite(redis, batch, (*again)[i], noscript[i], nullptr, out); !ok)
      co_return Fail(std::move(ok.error()));
  co_return out;
}

}  // namespace rankd
