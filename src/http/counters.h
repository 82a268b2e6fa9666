// HttpCounters: per-listener counters and gauges for the server to export as metrics.
// Written on the listener's loop thread only; any thread may read them (core/metric_value.h).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/metric_value.h"

namespace rankd::http {

// Why the layer itself refused a request or a connection (each answers an error and
// closes, but for the last two, which close without an answer).
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
  kTooManyHeaders,          // more than max_headers header lines, trailers included (431)
  kDuplicateHost,           // two Host header lines (400, RFC 9112 §3.2)
  kHeaderTimeout,           // no complete first head within header_timeout_ms: closed, no answer
  kEvictedAtCap,            // idle connection closed for a new one at max_connections
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
    case RejectKind::kTooManyHeaders: return "too_many_headers";
    case RejectKind::kDuplicateHost: return "duplicate_host";
    case RejectKind::kHeaderTimeout: return "header_timeout";
    case RejectKind::kEvictedAtCap: return "evicted_at_cap";
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
  using Counter = MetricValue<uint64_t>;
  Counter connections_open;  // gauge
  Counter connections_accepted;
  Counter accept_paused;  // times the listener hit max_connections
  Counter idle_timeouts;  // keep-alive connections closed for idleness
  Counter requests;       // handed to the handler
  Counter responses;      // queued, including the layer's own errors
  Counter parked_reads;   // input left for the next loop turn (turn budget)
  Counter bytes_read;
  Counter bytes_written;
  // The shard's budgets (gauges), summed over the open connections: each connection
  // keeps its share (the bytes it last reported) and moves it with these.
  Counter buffered_input;  // unparsed input and request bodies not yet handed on
  Counter unsent;          // output the clients have not taken
  // Heap bytes the input buffers have allocated, used or not: each connection's unparsed
  // input buffer (its capacity, kept between requests) and the head and body of the
  // request it is reading. Not a budget: what a test bounds to see that nothing is
  // allocated ahead of the bytes received (a reserve that RSS would not show until
  // touched).
  Counter input_allocated;
  std::array<Counter, static_cast<size_t>(RejectKind::kCount)> rejects{};
  std::array<Counter, static_cast<size_t>(LimitKind::kCount)> limits{};

  Counter& reject(RejectKind k) { return rejects[static_cast<size_t>(k)]; }
  Counter& limit(LimitKind k) { return limits[static_cast<size_t>(k)]; }
  uint64_t reject(RejectKind k) const { return rejects[static_cast<size_t>(k)]; }
};

}  // namespace rankd::http
