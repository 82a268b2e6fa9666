// Redis for the one-loop CLI commands (`rankd run`, `rankd bench`): the repeatable
// `--redis NAME=URL` flags and the Redis pools of the command's ShardRuntime.
//
// Threads: the main thread; the pools themselves live on the runtime's loop thread.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "redis/pools.h"
#include "sched/shard_runtime.h"

namespace rankd {

// Moves every `--redis VALUE` out of `args` (repeatable, so taken out before the other flags are
// read) and parses them; redis_default=redis://127.0.0.1:6379 unless given.
Result<std::vector<RedisEndpoint>> TakeRedisFlags(std::vector<std::string>& args, bool* given);

// Opens the pools on `runtime` (`conns` connections per endpoint, at least 1) and waits
// up to 5 s for them to connect: a command that uses Redis then fails with the pools' own
// unavailable error if they did not. The pools live until runtime.Stop(); their stats
// may be read from any thread meanwhile.
RedisPools& OpenCliRedis(ShardRuntime& runtime, const std::vector<RedisEndpoint>& endpoints,
                         int conns);

}  // namespace rankd
