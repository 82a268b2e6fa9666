// rankd counters FAMILY ID [--now-ms T] [--plans DIR] [--redis NAME=URL]...
// One id's counters as rankd keeps them (docs/events.md), for debugging: reads the key of
// FAMILY (a counters family of the plans folder's schema.json; the folder's plans are not
// loaded) for ID on redis_default, where POST /events writes them, and prints one JSON
// object: every event type's non-empty live buckets decoded from the key's ring, the slots
// no reader will see again, and every declared field's value at T, computed by the code `features`
// uses (events/counter_layout.h). Exit 0: printed; 1: Redis unavailable or erring; 2: usage (an
// unknown family, one that is not a counters family, an id that is not of its type).
//
// Threads: the main thread (the read runs on the command's own loop and is waited for).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/cli_redis.h"
#include "cli/commands.h"
#include "core/json_write.h"
#include "core/parse_int.h"
#include "events/counter_layout.h"
#include "redis/shard_clients.h"

namespace rankd {

namespace {

constexpr const char* kCountersUsage =
    "usage: rankd counters FAMILY ID [--now-ms T] [--plans DIR] [--redis NAME=URL]...\n"
    "                      [--redis-password-file NAME=PATH]\n"
    "                      [--redis-tls-ca FILE] [--redis-tls-cert FILE] [--redis-tls-key FILE]\n"
    "  Prints ID's counters in FAMILY (a counters family of DIR's schema.json, default\n"
    "  plans) as one JSON object: each counted type's non-empty live buckets [start_s,\n"
    "  sum], oldest first, the ring's stale slots, the hash fields that are not blocks of\n"
    "  whole slots, and each field's value at T (Unix ms, default now), read from the\n"
    "  endpoint redis_default (default redis://127.0.0.1:6379), where POST /events writes.\n"
    "  FAMILY and ID come first.\n";

// HGETALL, HMGET of the windows' blocks and PTTL of the key, in one pipelined batch.
Coro<Result<RespReplies>> ReadKey(RedisClient& client, const KeyFamily& family, std::string id,
                                  const CounterWindows& windows) {
  const KeyTemplate key = family.key_template();
  RedisCommands cmds;
  cmds.Add(2).Arg("HGETALL").Key(client.prefix(), key, id);
  cmds.Add(2 + static_cast<int>(windows.hash_fields().size()))
      .Arg("HMGET")
      .Key(client.prefix(), key, id);
  for (const std::string& f : windows.hash_fields()) cmds.Arg(f);
  cmds.Add(2).Arg("PTTL").Key(client.prefix(), key, id);
  co_return co_await client.Batch(std::move(cmds), Clock::now() + std::chrono::seconds(10));
}

// An error reply of command `what` as the message that names the key.
std::string ReplyError(std::string_view what, const std::string& key, RespView r) {
  return std::string(what) + " " + key + ": " +
         (r.is_error() ? std::string(r.str()) : std::string("unexpected reply"));
}

// A key's slots read from HGETALL (the ring of events/counter_layout.h): each counted
// type's sums by bucket start over the live slots (within the ring of the newest bucket
// held: what a reader at that time can see), the slots no reader will see again (a bucket
// that aged out of the ring, or a slot not where its bucket lives), the fields that are not
// a block of whole slots.
struct KeySlots {
  std::vector<std::map<int64_t, double>> buckets;  // by type index
  size_t stale = 0;
  std::vector<std::string> bad;
};

KeySlots ReadSlots(const CountersSpec& spec, RespView hgetall) {
  const CounterRing ring(spec);
  KeySlots out;
  out.buckets.resize(spec.count.size());
  std::vector<std::pair<uint32_t, std::string_view>> held;  // (bucket index, slot bytes)
  for (auto it = hgetall.begin(); it != hgetall.end(); ++it) {
    const std::string field((*it).str());
    ++it;
    const std::string_view value = (*it).str();
    const auto block = ParseStrictInt<int64_t>(field);
    if (!block || *block < 0 || *block >= ring.blocks() || value.size() % ring.slot_bytes != 0 ||
        value.size() > ring.slot_bytes * kRingBlockSlots) {
      out.bad.push_back(field);
      continue;
    }
    for (size_t at = 0; at < value.size(); at += ring.slot_bytes) {
      uint32_t index;
      std::memcpy(&index, value.data() + at, 4);
      if (index == 0) continue;  // empty
      if (ring.Block(index) != *block || ring.Offset(index) != at)
        ++out.stale;  // never read: readers look for a bucket at its own slot only
      else
        held.emplace_back(index, value.substr(at, ring.slot_bytes));
    }
  }
  uint32_t newest = 0;
  for (const auto& h : held) newest = std::max(newest, h.first);
  for (const auto& [index, bytes] : held) {
    if (int64_t{index} + ring.slots <= newest) {
      ++out.stale;
      continue;
    }
    for (size_t t = 0; t < spec.count.size(); ++t) {
      double sum;
      std::memcpy(&sum, bytes.data() + 4 + 8 * t, 8);
      if (sum != 0) out.buckets[t][int64_t{index} * spec.bucket_s] = sum;
    }
  }
  return out;
}

// The JSON object of the key's replies (see the usage).
std::string Report(const KeyFamily& family, const std::string& id, const std::string& key,
                   int64_t now_ms, const CounterWindows& windows, const RespReplies& replies) {
  const CountersSpec& spec = *family.counters;
  const KeySlots slots = ReadSlots(spec, replies[0]);
  // The fields through the code `features` uses.
  CachedFields cells;
  cells.resize(family.fields.size());
  std::vector<RingBlock> blocks(windows.hash_fields().size());
  windows.BlocksOfReply(replies[1], blocks);
  windows.SumWindows(blocks, cells, 0);

  std::string out = R"({"family":)";
  AppendJsonString(family.name, out);
  out += R"(,"id":)";
  if (family.id_type == ColumnType::kStr)
    AppendJsonString(id, out);
  else
    out += id;
  out += R"(,"key":)";
  AppendJsonString(key, out);
  out += R"(,"now_ms":)";
  AppendJsonInt(now_ms, out);
  out += R"(,"bucket_s":)";
  AppendJsonInt(spec.bucket_s, out);
  out += R"(,"ttl_ms":)";
  const RespView pttl = replies[2];
  if (pttl.is_integer() && pttl.integer() >= 0)
    AppendJsonInt(pttl.integer(), out);
  else
    out += "null";
  out += R"(,"buckets":{)";
  for (size_t t = 0; t < spec.count.size(); ++t) {
    if (t) out += ',';
    AppendJsonString(spec.count[t], out);
    out += ":[";
    bool first_bucket = true;
    for (const auto& [start, sum] : slots.buckets[t]) {
      if (!first_bucket) out += ',';
      first_bucket = false;
      out += '[';
      AppendJsonInt(start, out);
      out += ',';
      AppendJsonDouble(sum, out);
      out += ']';
    }
    out += ']';
  }
  out += R"(},"stale_slots":)";
  AppendJsonInt(static_cast<int64_t>(slots.stale), out);
  out += R"(,"bad_blocks":[)";
  for (size_t i = 0; i < slots.bad.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(slots.bad[i], out);
  }
  out += R"(],"fields":{)";
  for (size_t f = 0; f < family.fields.size(); ++f) {
    if (f) out += ',';
    AppendJsonString(family.fields[f].name, out);
    out += ':';
    if (cells.state(f) == CachedField::State::kValue)
      AppendJsonDouble(cells.f64(f), out);
    else
      out += "null";
  }
  out += "}}\n";
  return out;
}

}  // namespace

int CmdCounters(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
    std::fputs(kCountersUsage, stdout);
    return 0;
  }
  // Flags start with "--": an id that does too cannot be asked for here.
  if (argv.size() < 2 || argv[0].starts_with("-") || argv[1].starts_with("--")) {
    std::fputs("rankd counters: give FAMILY and ID first\n", stderr);
    std::fputs(kCountersUsage, stderr);
    return 2;
  }
  const std::string& name = argv[0];
  std::string id = argv[1];
  std::string dir = "plans";
  RedisFlags redis_flags;
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::vector<Flag> flags = RedisFlagRows(redis_flags);
  flags.push_back(IntFlag("--now-ms", "T", {}, now_ms, 0, kAnyInt));
  flags.push_back(TextFlag("--plans", "DIR", {}, dir));
  if (!ParseCommandFlags("counters", std::vector<std::string>(argv.begin() + 2, argv.end()),
                         flags)) {
    std::fputs(kCountersUsage, stderr);
    return 2;
  }
  auto endpoints = ResolveCommandRedis("counters", redis_flags);
  if (!endpoints) return 2;
  // The schema alone: a plan of the folder that does not load is no concern of this.
  auto loaded = LoadSchemaDir(dir);
  if (!loaded) {
    std::fprintf(stderr, "rankd counters: %s\n", loaded.error().message.c_str());
    return 2;
  }
  const Schema& schema = **loaded;
  const std::string where = schema.builtin ? "the demo schema" : dir + "/schema.json";
  const KeyFamily* family = schema.Find(name);
  if (family == nullptr) {
    std::string counters;
    for (const KeyFamily& f : schema.families)
      if (f.counters) counters += (counters.empty() ? "" : ", ") + f.name;
    std::fprintf(stderr, "rankd counters: FAMILY: %s declares no family '%s' (counters: %s)\n",
                 where.c_str(), name.c_str(), counters.empty() ? "none" : counters.c_str());
    return 2;
  }
  if (!family->counters) {
    std::fprintf(stderr,
                 "rankd counters: FAMILY: '%s' is a %s family in %s, not a counters family\n",
                 name.c_str(), std::string(FamilyTypeName(family->type)).c_str(), where.c_str());
    return 2;
  }
  const bool str_ids = family->id_type == ColumnType::kStr;
  const auto num = ParseStrictInt<int64_t>(id);
  if (str_ids ? !ValidStrId(id) : !num || *num < 0) {
    std::fprintf(
        stderr, "rankd counters: ID: family '%s' is keyed by %s, got '%s'\n", name.c_str(),
        str_ids ? "str ids (1..256 bytes without '{' or '}')" : "i64 ids (an integer >= 0)",
        id.c_str());
    return 2;
  }
  if (!str_ids) id = std::to_string(*num);  // as rankd writes it: "007" is key ...:7

  std::vector<size_t> all(family->fields.size());
  for (size_t f = 0; f < all.size(); ++f) all[f] = f;
  const CounterWindows windows(*family, all, SecondOf(now_ms));
  if (windows.hash_fields().empty()) {  // no ring slot can hold a bucket of T's windows
    std::fprintf(stderr,
                 "rankd counters: --now-ms: %lld is outside the times a ring's bucket index "
                 "can hold (1970 + bucket_s to 2106)\n",
                 static_cast<long long>(now_ms));
    return 2;
  }
  ShardRuntime runtime("counters", /*cpu_threads=*/1);
  runtime.Start();
  RedisPools& pools = OpenCliRedis(runtime, *endpoints, 1);
  RedisClient* client = pools.Get(std::string(kDefaultRedisEndpointName));
  auto replies = runtime.Run(ReadKey(*client, *family, id, windows));
  const std::string key = std::string(client->prefix()) + family->KeyOf(id);
  runtime.Stop();
  if (!replies) {
    std::fprintf(stderr, "rankd counters: %s\n", replies.error().message.c_str());
    return 1;
  }
  const char* commands[] = {"HGETALL", "HMGET", "PTTL"};
  for (size_t i = 0; i < 3; ++i) {
    const RespView r = (*replies)[i];
    const bool ok = i == 2 ? r.is_integer()
                           : r.is_array() && (i == 0 ? r.size() % 2 == 0
                                                     : r.size() == windows.hash_fields().size());
    if (!ok) {
      std::fprintf(stderr, "rankd counters: %s\n", ReplyError(commands[i], key, r).c_str());
      return 1;
    }
  }
  std::fputs(Report(*family, id, key, now_ms, windows, *replies).c_str(), stdout);
  return 0;
}

const char kCountersSynopsis[] = "FAMILY ID [--now-ms T] [--plans DIR] [--redis NAME=URL]...";

}  // namespace rankd
