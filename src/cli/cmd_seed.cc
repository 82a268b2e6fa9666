// `rankd seed`: writes the demo data set (docs/data.md) into a Redis server
// (src/demo/seed.h), with --events N a history of events, deterministic for --seed (and
// --now-ms), refusing a non-empty database unless
// --flush. Prints one summary line.
//
// Threads: the main thread (the seeder runs its own loop and waits for it).
#include <cstdio>

#include "cli/commands.h"
#include "cli/redis_flags.h"
#include "demo/seed.h"
#include "redis/endpoint.h"

namespace rankd {

namespace {
constexpr const char* kSeedUsage =
    "usage: rankd seed [--redis URL] [--users N] [--follows F] [--media M] [--recs R]\n"
    "                  [--seen S] [--seed X] [--events N] [--now-ms T] [--flush]\n"
    "                  [--no-embeddings] [--embedded-media E]\n"
    "                  [--redis-password-file NAME=PATH]\n"
    "                  [--redis-tls-ca FILE] [--redis-tls-cert FILE] [--redis-tls-key FILE]\n"
    "  URL: redis[s]://[[user]:password@]host[:port][/db][?prefix=P] or\n"
    "       redis[s]-cluster://... (default redis://127.0.0.1:6379; NAME=URL is accepted\n"
    "       too, a URL alone is named redis_default). Defaults: 10000 users, 100 follows,\n"
    "       20 media, 200 recs, 50 seen, seed 1. Without --flush a non-empty database is\n"
    "       refused. --events N: N impressions and clicks (9:1) over the 7 days before\n"
    "       --now-ms T (Unix ms, default now), counted in item_counts and user_counts and\n"
    "       marked in served, as POST /events writes them; the same seed and T give the\n"
    "       same contents. --no-embeddings: no user_emb and item_emb vectors (the demo's\n"
    "       item index is then built empty at once: for tests that do not use them).\n"
    "       --embedded-media E: the newest E of each user's M media carry an embedding\n"
    "       (default 3: the demo's item index is built before /readyz).\n";
}  // namespace

int CmdSeed(const std::vector<std::string>& args) {
  SeedOptions o;
  RedisFlags redis;
  bool no_embeddings = false;
  int64_t seed = static_cast<int64_t>(o.seed);
  bool help = false;
  std::vector<Flag> flags = RedisFlagRows(redis);
  flags.insert(flags.end(),
               {
                   SwitchFlag("--help", {}, help, "-h"),
                   IntFlag("--users", "N", {}, o.users, -kAnyInt, kAnyInt),
                   IntFlag("--follows", "F", {}, o.follows, -kAnyInt, kAnyInt),
                   IntFlag("--media", "M", {}, o.media, -kAnyInt, kAnyInt),
                   IntFlag("--recs", "R", {}, o.recs, -kAnyInt, kAnyInt),
                   IntFlag("--seen", "S", {}, o.seen, -kAnyInt, kAnyInt),
                   IntFlag("--seed", "X", {}, seed, -kAnyInt, kAnyInt),
                   IntFlag("--events", "N", {}, o.events, -kAnyInt, kAnyInt),
                   IntFlag("--now-ms", "T", {}, o.now_ms, -kAnyInt, kAnyInt),
                   SwitchFlag("--flush", {}, o.flush),
                   SwitchFlag("--no-embeddings", {}, no_embeddings),
                   IntFlag("--embedded-media", "E", {}, o.embedded_media, -kAnyInt, kAnyInt),
               });
  if (!ParseCommandFlags("seed", args, flags)) {
    std::fputs(kSeedUsage, stderr);
    return 2;
  }
  if (help) {
    std::fputs(kSeedUsage, stdout);
    return 0;
  }
  o.embeddings = !no_embeddings;
  // One endpoint: the one --redis names (a URL alone is redis_default), else the default.
  if (redis.endpoints.size() > 1) {
    std::fprintf(stderr, "rankd seed: --redis: give one endpoint, not %zu\n",
                 redis.endpoints.size());
    return 2;
  }
  std::string name(kDefaultRedisEndpointName);
  for (std::string& v : redis.endpoints)
    if (HasRedisScheme(v))
      v = name + "=" + v;
    else
      name = v.substr(0, v.find('='));
  auto endpoints = ResolveCommandRedis("seed", redis);
  if (!endpoints) return 2;
  for (const RedisEndpoint& ep : *endpoints)
    if (ep.name == name) o.endpoint = ep;
  o.seed = static_cast<uint64_t>(seed);
  auto summary = SeedDemoData(o);
  if (!summary) {
    std::fprintf(stderr, "rankd %s\n", summary.error().message.c_str());
    return summary.error().code == ErrorCode::kInvalidParam ? 2 : 1;
  }
  std::printf("%s into %s (seed %llu)\n", summary->OneLine().c_str(),
              (o.endpoint.is_cluster()
                   ? "cluster " + o.endpoint.host + ":" + std::to_string(o.endpoint.port)
                   : o.endpoint.host + ":" + std::to_string(o.endpoint.port) + "/" +
                         std::to_string(o.endpoint.db))
                  .c_str(),
              static_cast<unsigned long long>(o.seed));
  return 0;
}

const char kSeedSynopsis[] =
    "[--redis URL] [--users N] [--follows F] [--media M] [--recs R] [--seen S] [--seed X] "
    "[--events N] [--now-ms T] [--flush] [--no-embeddings] [--embedded-media E]";

}  // namespace rankd
