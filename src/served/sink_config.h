// The served-log sinks of `--served-log NAME=URL` (docs/served-log.md, "Sinks"):
//   redis-stream://ENDPOINT?stream=S&maxlen=N   XADD S MAXLEN ~ N * record <json>, on the
//                                               --redis endpoint named ENDPOINT
//   file:///path/served.jsonl?max_mb=N&keep=K   JSON lines, rotated at N MiB, K old files
// Every query parameter shown is required; anything else in the URL is an error naming
// the flag.
//
// Threads: plain values, parsed on the main thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "plan/plan.h"
#include "redis/endpoint.h"

namespace rankd {

struct SinkConfig {
  enum class Kind : uint8_t { kRedisStream, kFile };
  std::string name;
  Kind kind = Kind::kFile;
  std::string url;  // as given, for messages (it carries no secret: endpoints are by name)
  // kRedisStream
  std::string endpoint;
  std::string stream;
  uint64_t maxlen = 0;
  // kFile
  std::string path;
  uint64_t max_bytes = 0;  // max_mb MiB
  uint32_t keep = 0;       // path.1 ... path.keep
};

// One flag value, "NAME=URL". Errors are bad_request, "--served-log: ..." naming what.
Result<SinkConfig> ParseSinkFlag(std::string_view value);
// Every value, checked together: names unique, every stream's endpoint one of
// `endpoints`, no two file sinks on one path.
Result<std::vector<SinkConfig>> ParseSinkFlags(const std::vector<std::string>& values,
                                               const std::vector<RedisEndpoint>& endpoints);

// The Redis endpoints only `sinks` write to, none of `plans`' nodes reading them: they
// do not gate readiness (a dead log sink drops records; it does not take the replica out
// of its balancer).
std::vector<std::string> LogOnlyEndpoints(const std::vector<SinkConfig>& sinks,
                                          const PlanSet& plans);

}  // namespace rankd
