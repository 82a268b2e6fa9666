#include "http/origin_policy.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "http/message.h"

namespace rankd::http {

namespace {

// The names a loopback listener answers to by default: what a browser on this machine
// types. Names that resolve elsewhere (a rebinding attacker's) are not among them.
constexpr std::string_view kLoopbackNames[] = {"localhost", "127.0.0.1", "[::1]"};

// A host and its port as written in a Host header or an origin; port 0: not written.
struct HostPort {
  std::string_view host;
  uint32_t port = 0;
};

std::optional<uint32_t> ParsePort(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  uint32_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  if (n == 0 || n > 65535) return std::nullopt;
  return n;
}

bool HostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// "name", "name:port", "[v6]" or "[v6]:port": the host (brackets kept) and its port.
std::optional<HostPort> SplitHostPort(std::string_view s) {
  HostPort out;
  std::string_view rest;
  if (s.starts_with('[')) {
    size_t end = s.find(']');
    if (end == std::string_view::npos) return std::nullopt;
    out.host = s.substr(0, end + 1);
    for (char c : out.host.substr(1, end - 1))
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'))
        return std::nullopt;
    rest = s.substr(end + 1);
  } else {
    size_t colon = s.find(':');
    out.host = s.substr(0, colon);
    if (!std::all_of(out.host.begin(), out.host.end(), HostChar)) return std::nullopt;
    rest = colon == std::string_view::npos ? std::string_view{} : s.substr(colon);
  }
  if (out.host.empty()) return std::nullopt;
  if (!rest.empty()) {
    if (rest[0] != ':') return std::nullopt;
    auto port = ParsePort(rest.substr(1));
    if (!port) return std::nullopt;
    out.port = *port;
  }
  return out;
}

uint32_t DefaultPort(std::string_view scheme) {
  if (EqualsIgnoreCase(scheme, "http") || EqualsIgnoreCase(scheme, "ws")) return 80;
  if (EqualsIgnoreCase(scheme, "https") || EqualsIgnoreCase(scheme, "wss")) return 443;
  return 0;
}

struct OriginParts {
  std::string_view scheme;
  HostPort where;  // its port filled in with the scheme's default
};

// "scheme://host[:port]" and nothing more (an Origin header has no path).
std::optional<OriginParts> ParseOrigin(std::string_view s) {
  size_t sep = s.find("://");
  if (sep == 0 || sep == std::string_view::npos) return std::nullopt;
  OriginParts o;
  o.scheme = s.substr(0, sep);
  for (char c : o.scheme)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.'))
      return std::nullopt;
  auto where = SplitHostPort(s.substr(sep + 3));
  if (!where) return std::nullopt;
  o.where = *where;
  if (o.where.port == 0) o.where.port = DefaultPort(o.scheme);
  return o;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

bool IsLoopbackAddress(std::string_view listen_host) {
  return listen_host.starts_with("127.") || listen_host == "::1" || listen_host == "localhost";
}

Result<OriginPolicy> OriginPolicy::Make(std::span<const std::string> origins,
                                        std::span<const std::string> hosts,
                                        bool loopback_listener) {
  OriginPolicy p;
  for (const std::string& text : origins) {
    auto o = ParseOrigin(text);
    if (!o)
      return Fail(Error::BadRequest("--allowed-origins: '" + text +
                                    "' is not an origin (scheme://host[:port], no path)"));
    p.origins_.push_back(
        {Lower(o->scheme), Lower(o->where.host), static_cast<uint16_t>(o->where.port)});
  }
  p.any_host_ = hosts.empty() && !loopback_listener;
  if (hosts.empty() && loopback_listener)
    p.hosts_.assign(std::begin(kLoopbackNames), std::end(kLoopbackNames));
  for (const std::string& text : hosts) {
    if (text == "*") {
      p.any_host_ = true;
      continue;
    }
    auto h = SplitHostPort(text);
    if (!h || h->port != 0)
      return Fail(Error::BadRequest("--allowed-hosts: '" + text +
                                    "' is not a host name (any port is allowed: give none)"));
    p.hosts_.push_back(Lower(h->host));
  }
  return p;
}

bool OriginPolicy::HostAllowed(std::string_view host) const {
  if (any_host_ || host.empty()) return true;
  auto h = SplitHostPort(host);
  if (!h) return false;
  return std::any_of(hosts_.begin(), hosts_.end(),
                     [&](const std::string& name) { return EqualsIgnoreCase(h->host, name); });
}

OriginPolicy::Verdict OriginPolicy::CheckOrigin(std::string_view origin, std::string_view host,
                                                size_t origins) const {
  auto o = origins == 1 ? ParseOrigin(origin) : std::nullopt;  // "null" does not parse
  if (!o) return Verdict::kForbidden;
  if (auto h = SplitHostPort(host); h && EqualsIgnoreCase(h->host, o->where.host)) {
    // A Host without a port is the port the client connected to, which a proxy in front
    // may have changed: then the page's scheme's own port counts (https://h behind a
    // TLS proxy that forwards "Host: h" to rankd's plain HTTP).
    uint32_t port = h->port != 0 ? h->port : DefaultPort(o->scheme);
    if (port == o->where.port) return Verdict::kSameHost;
  }
  for (const Origin& listed : origins_)
    if (listed.port == o->where.port && EqualsIgnoreCase(listed.scheme, o->scheme) &&
        EqualsIgnoreCase(listed.host, o->where.host))
      return Verdict::kListed;
  return Verdict::kForbidden;
}

}  // namespace rankd::http
