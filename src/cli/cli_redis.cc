#include "cli/cli_redis.h"

namespace rankd {

RedisPools& OpenCliRedis(ShardRuntime& runtime, const std::vector<RedisEndpoint>& endpoints,
                         int conns, const ReplyLimits& limits) {
  RedisClientOptions opts;
  opts.reply_limits = limits;
  opts.connections_per_endpoint = conns < 1 ? 1 : conns;
  RedisPools& pools =
      runtime.OnLoop([&]() -> RedisPools& { return runtime.OpenRedis(endpoints, opts); });
  runtime.WaitRedisReady(5000);
  return pools;
}

}  // namespace rankd
