// Redis for the one-loop CLI commands (`rankd run`, `rankd bench`): the repeatable
// `--redis NAME=URL` flags and a RedisPools opened on the command's loop.
//
// Threads: the main thread; the pools themselves live on `loop`'s thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/event_loop.h"
#include "redis/pools.h"

namespace rankd {

// Moves every `--redis VALUE` out of `args` (repeatable, so taken out before the other flags are read) and
// parses them; redis_default=redis://127.0.0.1:6379 unless given.
Result<std::vector<RedisEndpoint>> TakeRedisFlags(std::vector<std::string>& args, bool* given);

// Opens the pools on `loop` and waits up to 5 s for them to connect (a command that
// uses Redis then fails with the pools' own unavailable error if they did not).
class CliRedis {
 public:
  CliRedis(EventLoop& loop, const std::vector<RedisEndpoint>& endpoints, int conns);
  ~CliRedis();  // closes the pools on the loop thread
  RedisPools* get() const { return pools_.get(); }

 private:
  EventLoop& loop_;
  std::unique_ptr<RedisPools> pools_;
};

}  // namespace rankd
