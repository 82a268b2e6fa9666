#include "server/cli_redis.h"

namespace rankd {

Result<std::vector<RedisEndpoint>> TakeRedisFlags(std::vector<std::string>& args, bool* given) {
  std::vector<std::string> rest, values;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--redis" && i + 1 < args.size())
      values.push_back(args[++i]);
    else if (args[i].rfind("--redis=", 0) == 0)
      values.push_back(args[i].substr(8));
    else
      rest.push_back(args[i]);
  }
  args.swap(rest);
  if (given) *given = !values.empty();
  return ParseRedisFlags(values);
}

RedisPools& OpenCliRedis(ShardRuntime& runtime, const std::vector<RedisEndpoint>& endpoints,
                         int conns) {
  RedisClientOptions opts;
  opts.connections_per_endpoint = conns < 1 ? 1 : conns;
  RedisPools& pools =
      runtime.OnLoop([&]() -> RedisPools& { return runtime.OpenRedis(endpoints, opts); });
  runtime.WaitRedisReady(5000);
  return pools;
}

}  // namespace rankd
