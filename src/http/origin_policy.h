// OriginPolicy: which Host names and which browser origins one listener accepts. The
// Host list stops DNS rebinding (a page of evil.example whose name now resolves to
// 127.0.0.1 reaches rankd with "Host: evil.example"); the origin list stops other sites'
// pages from calling the API from a visitor's browser, and names the ones that may
// (CORS). Origins compare as scheme, lower-cased host and port, default ports filled in
// (RFC 6454); "null" (sandboxed frames, file: pages, some redirects) never matches.
//
// A request without Origin (curl, wrk, servers, the probes) costs one comparison; the
// checks allocate nothing.
//
// Thread: built once on the main thread; immutable afterwards, any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace rankd::http {

// Whether `listen_host` (an address literal of --host) is a loopback address.
bool IsLoopbackAddress(std::string_view listen_host);

class OriginPolicy {
 public:
  // The names "*" in `hosts` stands for any name; empty `hosts` means the loopback
  // names (localhost, 127.0.0.1, [::1]) when `loopback_listener`, else any name.
  // Errors (bad_request) name the entry that is not an origin (scheme://host[:port]) or
  // a host name.
  static Result<OriginPolicy> Make(std::span<const std::string> origins,
                                   std::span<const std::string> hosts, bool loopback_listener);
  OriginPolicy() = default;  // any host, no listed origin

  // Whether a request whose Host header is `host` ("" when absent: HTTP/1.0 clients and
  // scripts, never a browser) may be served. The port is not compared.
  bool HostAllowed(std::string_view host) const;

  enum class Verdict : uint8_t {
    kSameHost,   // the page was served by this host: a same-origin request
    kListed,     // an origin of the list: answer with CORS headers
    kForbidden,  // anything else, "null" and malformed origins included: 403
  };
  // REQUIRES: the request has an Origin header; `origins` is how many it had (a second
  // one makes it forbidden: which would a proxy have read?).
  Verdict CheckOrigin(std::string_view origin, std::string_view host, size_t origins) const;

 private:
  struct Origin {
    std::string scheme;  // lower-case
    std::string host;    // lower-case; an IPv6 literal keeps its brackets
    uint16_t port = 0;
  };
  std::vector<Origin> origins_;
  std::vector<std::string> hosts_;  // lower-case names, unless any_host_
  bool any_host_ = true;
};

}  // namespace rankd::http
