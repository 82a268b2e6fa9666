#include "server/cli_redis.h"

#include <chrono>
#include <thread>

#include "core/run_sync.h"

namespace rankd {

namespace {
template <class F>
auto OnLoop(EventLoop& loop, F fn) {
  return RunSync(loop, [](F f) -> Task<decltype(f())> { co_return f(); }(std::move(fn)));
}
}  // namespace

Result<std::vector<RedisEndpoint>> TakeRedisFlags(std::vector<std::string>& args, bool* given) {
  std::vector<std::string> rest, values;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--redis" && i + 1 < args.size()) values.push_back(args[++i]);
    else if (args[i].rfind("--redis=", 0) == 0) values.push_back(args[i].substr(8));
    else rest.push_back(args[i]);
  }
  args.swap(rest);
  if (given) *given = !values.empty();
  return ParseRedisFlags(values);
}

CliRedis::CliRedis(EventLoop& loop, const std::vector<RedisEndpoint>& endpoints, int conns)
    : loop_(loop) {
  RedisClientOptions opts;
  opts.connections_per_endpoint = conns < 1 ? 1 : conns;
  OnLoop(loop_, [&] {
    pools_ = std::make_unique<RedisPools>(loop_, endpoints, opts);
    return 0;
  });
  for (int i = 0; i < 1000 && !OnLoop(loop_, [&] { return pools_->Ready(); }); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

CliRedis::~CliRedis() {
  if (loop_.state() == EventLoop::State::kRunning)
    OnLoop(loop_, [&] {
      pools_.reset();
      return 0;
    });
}

}  // namespace rankd
