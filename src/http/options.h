// HttpOptions: limits and timeouts of one listener (one shard). Plain value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rankd::http {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0: an ephemeral port (see Listener::port)
  int backlog = 511;
  uint32_t shard_id = 0;  // only for generated request ids

  size_t max_connections = 10000;     // per listener; accepting pauses at the cap
  size_t max_head_bytes = 16 * 1024;  // request line + headers (and, separately, trailers)
  // Header lines of one request, trailers included: what a head of tiny lines may make
  // rankd keep (a RequestHeader each) is bounded by the count, not only by its bytes.
  size_t max_headers = 100;
  size_t max_body_bytes = 1 << 20;
  uint64_t read_timeout_ms = 10000;  // from a request's first byte to its last
  uint64_t idle_timeout_ms = 60000;  // keep-alive connection with nothing to do
  // From accept to the first request's complete head: past it the connection is closed
  // without an answer (a client that connects and never asks holds nothing for long).
  uint64_t header_timeout_ms = 10000;
  uint64_t linger_ms = 2000;  // after our FIN, how long we read and discard

  // Backpressure. A connection stops reading (and stops parsing pipelined requests)
  // while its unsent output exceeds max_pending_output or holds max_pipeline_depth
  // answers the client has not taken, or while max_pending_input bytes of pipelined
  // requests wait behind an unanswered one.
  size_t max_pending_output = 1 << 20;
  size_t max_pending_input = 64 * 1024;
  size_t max_pipeline_depth = 16;

  // The shard's budgets, summed over its connections. max_buffered_input_bytes counts
  // unparsed input and the bodies of requests not yet complete: past it, connections
  // whose input waits behind an unanswered request, or that are reading a body, stop
  // reading until it drains (a body that never completes gets the read timeout's 408);
  // past max_unsent_bytes, the connections whose clients have not read for the longest
  // are closed until the rest fits.
  size_t max_buffered_input_bytes = 64u << 20;
  size_t max_unsent_bytes = 256u << 20;

  // At max_connections: false pauses accepting until a connection closes (the client
  // port: clients queue in the kernel's backlog); true closes the connection that has
  // gone longest without a request to take the new one (the metrics address: a probe
  // or a scrape must get in however many idle connections hold the cap).
  bool evict_idle_at_cap = false;
};

}  // namespace rankd::http
