#include "http/request_id.h"

#include <atomic>

namespace rankd::http {

bool IsValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (char c : id) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7E) return false;
  }
  return true;
}

namespace {

// Appends v in lower-case hex without leading zeros.
void AppendHex(std::string& out, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char tmp[16];
  int n = 0;
  do {
    tmp[n++] = kDigits[v & 0xF];
    v >>= 4;
  } while (v != 0);
  while (n > 0) out.push_back(tmp[--n]);
}

}  // namespace

std::string RequestIdGenerator::Next() {
  std::string id;
  id.reserve(15);  // within the small-string buffer for the first ~2^40 ids: no allocation
  AppendHex(id, shard_);
  id.push_back('-');
  AppendHex(id, instance_);
  id.push_back('-');
  AppendHex(id, ++counter_);
  return id;
}

uint32_t NextListenerInstance() {
  static std::atomic<uint32_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace rankd::http
