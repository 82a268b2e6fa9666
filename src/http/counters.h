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
  kMalformed,                         // llhttp flagged the bytes (400)
  kBareCr,                            // CR not followed by LF in the head (400)
  kFoldedHeader,                      // obsolete line folding (400)
  kContentLengthAndTransferEncoding,  // both framing headers (400)
  kDuplicateContentLength,            // (400)
  kHeadTooLarge,                      // head over max_head_bytes (431)
  kBodyTooLarge,                      // body over max_body_bytes (413)
  kReadTimeout,                       // head + body slower than read_timeout_ms (408)
  kTransferEncodingHttp10,  // Transfer-Encoding in an HTTP/1.0 request (400, RFC 9112 §6.1)
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
    case RejectKind::kTransferEncodingHttp10: return "te_http10";
    case RejectKind::kCount: break;
  }
  return "unknown";
}

// A resource bound the layer enforced (docs/operations.md, "HTTP limits").
enum class LimitKind : uint8_t {
  kPipelineDepth,    // a connection reached max_pipeline_depth unsent answers: parsing waits
  kConnectionInput,  // a connection's buffered input reached max_pending_input: reads stop
  kShardInput,       // the shard's input (unparsed, bodies) passed its budget: reads stop
  kShardUnsent,      // the shard's unsent output passed its budget: slowest reader closed
  kCount,
};

constexpr std::string_view LimitKindName(LimitKind k) {
  switch (k) {
    case LimitKind::kPipelineDepth: return "pipeline_depth";
    case LimitKind::kConnectionInput: return "connection_input";
    case LimitKind::kShardInput: return "shard_input";
    case LimitKind::kShardUnsent: return "shard_unsent";
    case LimitKind::kCount: break;
  }
  return "unknown";
}

struct HttpCounters {
  uint64_t connections_open = 0;  // gauge
  uint64_t connections_accepted = 0;
  uint64_t accept_paused = 0;  // times the listener hit max_connections
  uint64_t idle_timeouts = 0;  // keep-alive connections closed for idleness
  uint64_t requests = 0;       // handed to the handler
  uint64_t responses = 0;      // queued, including the layer's own errors
  uint64_t parked_reads = 0;   // input left for the next loop turn (turn budget)
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t buffered_input = 0;  // gauge: unparsed input and unfinished bodies (shard budget)
  uint64_t unsent = 0;          // gauge: response bytes not yet taken by clients
  std::array<uint64_t, static_cast<size_t>(RejectKind::kCount)> rejects{};
  std::array<uint64_t, static_cast<size_t>(LimitKind::kCount)> limits{};

  uint64_t& reject(RejectKind k) { return rejects[static_cast<size_t>(k)]; }
  uint64_t& limit(LimitKind k) { return limits[static_cast<size_t>(k)]; }
  uint64_t reject(RejectKind k) const { return rejects[static_cast<size_t>(k)]; }
};

}  // namespace rankd::http
