// HttpCounters: per-listener counters for the server to export as metrics. Plain
// integers, written and read on the listener's loop thread only (a metrics scrape
// should Post to the shard and copy them there).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace rankd::http {

// Why the layer itself rejected a request (each answers an error and closes).
enum class RejectKind : uint8_t {
  kMalformed,         // llhttp flagged the bytes (400)
  kBareCr,            // CR not followed by LF in the head (400)
  kFoldedHeader,      // obsolete line folding (400)
  kContentLengthAndTransferEncoding,  // both framing headers (400)
  kDuplicateContentLength,            // (400)
  kHeadTooLarge,      // head over max_head_bytes (431)
  kBodyTooLarge,      // body over max_body_bytes (413)
  kReadTimeout,       // head + body slower than read_timeout_ms (408)
  kCount,
};

constexpr std::string_view RejectKindName(RejectKind k) {
  switch (k) {
    case RejectKind::kMalformed: return "malformed";
    case RejectKind::kBareCr: return "bare_cr";
    case RejectKind::kFoldedHeader: return "folded_header";
    case RejectKind::kContentLengthAndTransferEncoding: return "cl_and_te";
    case RejectKind::kDuplicateContentLength: return "duplicate_cl";
    case RejectKind::kHeadTooLarge: return "head_too_large";
    case RejectKind::kBodyTooLarge: return "body_too_large";
    case RejectKind::kReadTimeout: return "read_timeout";
    case RejectKind::kCount: break;
  }
  return "unknown";
}

struct HttpCounters {
  uint64_t connections_open = 0;      // gauge
  uint64_t connections_accepted = 0;
  uint64_t accept_paused = 0;         // times the listener hit max_connections
  uint64_t idle_timeouts = 0;         // keep-alive connections closed for idleness
  uint64_t requests = 0;              // handed to the handler
  uint64_t responses = 0;             // queued, including the layer's own errors
  uint64_t parked_reads = 0;          // input left for the next loop turn (turn budget)
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  std::array<uint64_t, static_cast<size_t>(RejectKind::kCount)> rejects{};

  uint64_t& reject(RejectKind k) { return rejects[static_cast<size_t>(k)]; }
  uint64_t reject(RejectKind k) const { return rejects[static_cast<size_t>(k)]; }
};

}  // namespace rankd::http
