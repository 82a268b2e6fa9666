// redis_bench: our Redis client's throughput on one shard (one loop thread): C
// coroutines, each sending batches of B commands (half LRANGE, half HMGET, the command
// mix of the feed plan's IO) through RedisClient::Batch until N commands are done.
// Timing starts once all K connections are up. Prints one JSON line; bench/redis.sh puts
// redis-benchmark beside it as the baseline.
//
//   redis_bench --redis redis://127.0.0.1:6379 [--ops N] [--batch B] [--concurrency C]
//               [--connections K] [--list-key K] [--hash-key K]
#include <charconv>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "core/coro.h"
#include "redis/shard_clients.h"
#include "sched/shard_runtime.h"

using namespace rankd;

namespace {

struct Run {
  RedisClient* pool = nullptr;
  int64_t ops_left = 0;  // commands not yet issued
  int batch = 16;
  std::string list_key, hash_key;
  int64_t errors = 0;
  int workers = 0;
  std::promise<void> done;
};

Coro<void> Worker(std::shared_ptr<Run> run) {
  while (run->ops_left > 0) {
    int n = static_cast<int>(std::min<int64_t>(run->batch, run->ops_left));
    run->ops_left -= n;
    RedisCommands cmds;
    for (int i = 0; i < n; ++i) {
      if (i % 2 == 0)
        cmds.Add(4).Arg("LRANGE").Key("", run->list_key).Arg(int64_t{0}).Arg(int64_t{9});
      else
        cmds.Add(5).Arg("HMGET").Key("", run->hash_key).Arg("likes").Arg("quality").Arg("category");
    }
    auto r = co_await run->pool->Batch(std::move(cmds), Clock::now() + std::chrono::seconds(30));
    if (!r) {
      ++run->errors;
      std::fprintf(stderr, "redis_bench: %s\n", r.error().message.c_str());
      continue;
    }
    for (size_t i = 0; i < r->size(); ++i)
      if (!(*r)[i].is_array()) ++run->errors;
  }
  if (--run->workers == 0) run->done.set_value();
}

bool Flag(int argc, char** argv, int& i, const char* name, std::string& out) {
  if (std::string(argv[i]) != name || i + 1 >= argc) return false;
  out = argv[++i];
  return true;
}

int64_t ToInt(const std::string& s) {
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "redis://127.0.0.1:6379", ops = "400000", batch = "16", conc = "50",
              conns = "2", list_key = "media:42", hash_key = "item:4242";
  for (int i = 1; i < argc; ++i) {
    if (Flag(argc, argv, i, "--redis", url) || Flag(argc, argv, i, "--ops", ops) ||
        Flag(argc, argv, i, "--batch", batch) || Flag(argc, argv, i, "--concurrency", conc) ||
        Flag(argc, argv, i, "--connections", conns) ||
        Flag(argc, argv, i, "--list-key", list_key) || Flag(argc, argv, i, "--hash-key", hash_key))
      continue;
    std::fprintf(stderr, "redis_bench: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  auto ep = ParseRedisUrl("bench", url);
  if (!ep) {
    std::fprintf(stderr, "redis_bench: %s\n", ep.error().message.c_str());
    return 2;
  }
  RedisClientOptions opts;
  opts.connections_per_endpoint = static_cast<int>(ToInt(conns));

  ShardRuntime runtime("redis-bench", /*cpu_threads=*/1);
  runtime.Start();
  RedisPools& pools = runtime.OnLoop(
      [&]() -> RedisPools& { return runtime.OpenRedis(std::vector<RedisEndpoint>{*ep}, opts); });
  // Timing starts once every connection has completed its handshake (10 s at most): a
  // run that began on fewer connections would not be the load shape it reports.
  const RedisStats& stats = pools.Get("bench")->stats();
  auto connect_until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto all_up = [&] {
    return Read(stats.connects) >= static_cast<uint64_t>(opts.connections_per_endpoint);
  };
  while (!all_up() && std::chrono::steady_clock::now() < connect_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!all_up()) {
    std::fprintf(stderr, "redis_bench: %llu of %d connections up after 10 s\n",
                 static_cast<unsigned long long>(Read(stats.connects)),
                 opts.connections_per_endpoint);
    runtime.Stop();
    return 1;
  }

  auto run = std::make_shared<Run>();
  run->ops_left = ToInt(ops);
  run->batch = static_cast<int>(ToInt(batch));
  run->list_key = ep->prefix + list_key;
  run->hash_key = ep->prefix + hash_key;
  run->workers = static_cast<int>(ToInt(conc));
  auto finished = run->done.get_future();
  auto t0 = std::chrono::steady_clock::now();
  runtime.OnLoop([&] {
    run->pool = pools.Get("bench");
    int workers = run->workers;
    for (int i = 0; i < workers; ++i) Spawn(Worker(run));
  });
  finished.wait();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  double commands = static_cast<double>(Read(stats.commands));
  std::printf(
      "{\"name\": \"redis_client_ops\", \"value\": %.0f, \"unit\": \"ops/s\", \"commands\": %.0f, "
      "\"batches\": %llu, \"socket_writes\": %llu, \"errors\": %lld, \"batch\": %d, "
      "\"concurrency\": %s, \"connections\": %s}\n",
      commands / secs, commands, static_cast<unsigned long long>(Read(stats.batches)),
      static_cast<unsigned long long>(Read(stats.socket_writes)),
      static_cast<long long>(run->errors), run->batch, conc.c_str(), conns.c_str());
  runtime.Stop();
  return run->errors == 0 ? 0 : 1;
}
