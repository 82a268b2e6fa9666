// Redis for the one-loop CLI commands (`rankd run`, `rankd bench`): the Redis pools of
// the command's ShardRuntime, for the endpoints of their `--redis` flags (RedisFlag).
//
// Threads: the main thread; the pools themselves live on the runtime's loop thread.
#pragma once

#include <vector>

#include "redis/shard_clients.h"
#include "sched/shard_runtime.h"

namespace rankd {

// Opens the pools on `runtime` (`conns` connections per endpoint, at least 1) and waits
// up to 5 s for them to connect: a command that uses Redis then fails with the pools' own
// unavailable error if they did not. The pools live until runtime.Stop(); their stats
// may be read from any thread meanwhile. `limits`: what one reply may cost.
RedisPools& OpenCliRedis(ShardRuntime& runtime, const std::vector<RedisEndpoint>& endpoints,
                         int conns, const ReplyLimits& limits = {});

}  // namespace rankd
