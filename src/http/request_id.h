// Request ids for the X-Request-Id header: validation of client-sent ids and a cheap
// generator (no syscalls, no atomics) unique within the process.
// IsValidRequestId: any thread. RequestIdGenerator: one per listener, its loop thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rankd::http {

inline constexpr size_t kMaxRequestIdBytes = 128;

// True for 1..128 printable ASCII characters (0x20..0x7E): the only ids we echo back,
// so that a client cannot inject bytes into our response head or our logs.
bool IsValidRequestId(std::string_view id);

class RequestIdGenerator {
 public:
  // `shard` makes ids readable in logs; `instance` (unique per listener in the process,
  // see NextListenerInstance) keeps two listeners of one shard from colliding.
  RequestIdGenerator(uint32_t shard, uint32_t instance) : shard_(shard), instance_(instance) {}

  // "<shard>-<instance>-<counter>" in lower-case hex, e.g. "0-1-2a".
  std::string Next();

 private:
  uint32_t shard_;
  uint32_t instance_;
  uint64_t counter_ = 0;
};

// A process-wide sequence number for listeners (one atomic increment per listener).
uint32_t NextListenerInstance();

}  // namespace rankd::http
