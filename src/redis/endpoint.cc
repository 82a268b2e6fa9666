#include "redis/endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <expected>
#include <optional>

#include "core/parse_int.h"

namespace rankd {

namespace {

constexpr std::string_view kSchemes[] = {"redis://", "rediss://", "redis-cluster://",
                                         "rediss-cluster://"};

// Where the userinfo of `text` lies: [begin, at) with `at` its last '@'; begin is just
// after "://", or 0 when there is none. Empty (begin == at == npos) without an '@' after
// begin. MaskRedisUrl and ParseRedisUrl both read the userinfo from here.
struct UserinfoSpan {
  size_t begin = std::string_view::npos;
  size_t at = std::string_view::npos;
  bool found() const { return at != std::string_view::npos; }
};

UserinfoSpan FindUserinfo(std::string_view text) {
  size_t scheme = text.find("://");
  size_t begin = scheme == std::string_view::npos ? 0 : scheme + 3;
  size_t at = text.rfind('@');
  if (at == std::string_view::npos || at < begin) return {};
  return {begin, at};
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded ('+' stays '+'); nullopt on a '%' not followed by two hex digits.
std::optional<std::string> PercentDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return std::nullopt;
    int hi = HexDigit(in[i + 1]), lo = HexDigit(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool ValidName(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  return true;
}

// "host[:port]" or "[v6]:port" -> address; else what is wrong with it.
std::expected<RedisAddress, std::string> ParseAddress(std::string_view rest);

}  // namespace

std::string MaskRedisUrl(std::string_view text) {
  UserinfoSpan u = FindUserinfo(text);
  if (!u.found()) return std::string(text);
  std::string_view userinfo = text.substr(u.begin, u.at - u.begin);
  size_t colon = userinfo.find(':');
  std::string out(text.substr(0, u.begin));
  if (colon == std::string_view::npos || u.begin == 0) {
    out += "***";  // the bare "password@" form, or no URL: all of it
  } else {
    out += userinfo.substr(0, colon + 1);
    if (colon + 1 < userinfo.size()) out += "***";
  }
  out += text.substr(u.at);
  return out;
}

bool HasRedisScheme(std::string_view text) {
  for (std::string_view s : kSchemes)
    if (text.starts_with(s)) return true;
  return false;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string RedisEndpoint::Label() const {
  if (is_cluster()) {
    std::string out = name + " (cluster ";
    for (size_t i = 0; i < cluster_seeds.size(); ++i)
      out += (i ? "," : "") + cluster_seeds[i].host + ":" + std::to_string(cluster_seeds[i].port);
    return out + ")";
  }
  std::string out = name + " (" + host + ":" + std::to_string(port);
  if (db != 0) out += "/" + std::to_string(db);
  return out + ")";
}

RedisEndpoint RedisEndpoint::AtNode(const RedisAddress& node) const {
  RedisEndpoint ep = *this;
  ep.host = node.host;
  ep.port = node.port;
  ep.cluster_seeds.clear();
  return ep;
}

namespace {

// The parts of a Redis URL, each into `ep`; each returns what is wrong ("" when nothing),
// for ParseRedisUrl to word with the endpoint's name and the masked URL.

// Userinfo: [user]:password@ (a bare "password@" is accepted too), up to the last '@'.
// Errors name the part, never quote it. `rest` is what follows it.
std::string ParseUrlUserinfo(std::string_view url, RedisEndpoint& ep, std::string_view& rest) {
  UserinfoSpan u = FindUserinfo(url);
  if (!u.found()) return {};
  std::string_view userinfo = url.substr(u.begin, u.at - u.begin);
  rest = url.substr(u.at + 1);
  // Read as a URL usually is, a '/' or '?' would end the host part before this '@': a
  // password holding one, or an '@' in the path or a parameter. Either reading could be
  // wrong, so neither is taken.
  if (userinfo.find_first_of("/?") != std::string_view::npos)
    return "a '/' or '?' before the last '@': percent-encode it in a password (%2F, %3F) "
           "and an '@' in a parameter (%40)";
  size_t colon = userinfo.find(':');
  std::string_view user = colon == std::string_view::npos ? "" : userinfo.substr(0, colon);
  std::string_view password =
      colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1);
  auto decoded_user = PercentDecode(user);
  if (!decoded_user) return "bad %-escape in the user name (%XX: two hex digits)";
  auto decoded_password = PercentDecode(password);
  if (!decoded_password) return "bad %-escape in the password (%XX: two hex digits)";
  ep.user = std::move(*decoded_user);
  ep.password = std::move(*decoded_password);
  return {};
}

// One query parameter, known and given once (its key in `seen`), its value decoded.
std::string ParseUrlParam(std::string_view kv, bool cluster, RedisEndpoint& ep,
                          std::vector<std::string_view>& seen) {
  size_t eq = kv.find('=');
  std::string_view key = kv.substr(0, eq);
  const bool known = key == "prefix" || key == "password_file" || (key == "read_from" && cluster) ||
                     key == "tls_ca" || key == "tls_cert" || key == "tls_key" ||
                     key == "tls_verify";
  if (!known || eq == std::string_view::npos)
    return "unknown query parameter '" + std::string(kv) + "' (known: prefix=P, " +
           (cluster ? "read_from=master|replica, " : "") +
           "password_file=PATH; with TLS tls_ca=FILE, tls_cert=FILE, tls_key=FILE, "
           "tls_verify=on|off)";
  if (std::find(seen.begin(), seen.end(), key) != seen.end())
    return "query parameter '" + std::string(key) + "' given twice";
  seen.push_back(key);
  auto value = PercentDecode(kv.substr(eq + 1));
  if (!value) return "bad %-escape in the value of '" + std::string(key) + "'";
  if (key != "prefix" && value->empty())
    return "query parameter '" + std::string(key) + "' has no value";
  if (key == "prefix") {
    ep.prefix = std::move(*value);
  } else if (key == "read_from") {
    if (*value != "master" && *value != "replica")
      return "unknown query parameter '" + std::string(kv) + "' (read_from is master or replica)";
    ep.read_from_replica = *value == "replica";
  } else if (key == "password_file") {
    ep.password_file = std::move(*value);
  } else if (key == "tls_ca") {
    ep.tls.ca_file = std::move(*value);
  } else if (key == "tls_cert") {
    ep.tls.cert_file = std::move(*value);
  } else if (key == "tls_key") {
    ep.tls.key_file = std::move(*value);
  } else if (*value == "on" || *value == "off") {  // tls_verify
    ep.tls.verify = *value == "on";
  } else {
    return "tls_verify='" + *value + "' is neither on nor off";
  }
  return {};
}

// Query: each parameter at most once; TLS parameters only with TLS; a password in one
// place. `rest` loses the query.
std::string ParseUrlQuery(bool cluster, RedisEndpoint& ep, std::string_view& rest) {
  std::vector<std::string_view> seen;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view kv = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      if (std::string bad = ParseUrlParam(kv, cluster, ep, seen); !bad.empty()) return bad;
    }
  }
  std::string tls_params;
  for (std::string_view p : seen)
    if (p.starts_with("tls_")) tls_params += (tls_params.empty() ? "" : ", ") + std::string(p);
  if (!ep.tls.enabled && !tls_params.empty())
    return tls_params +
           ": TLS parameters on a URL without TLS (use rediss:// or "
           "rediss-cluster://)";
  if (!ep.password_file.empty() && !ep.password.empty())
    return "a password both in the URL and in password_file (a userinfo without ':' is a "
           "password: write 'user:@' for an ACL user whose password is in the file)";
  return {};
}

// Path (/db) and hosts: host:port, or a cluster's comma-separated seeds.
std::string ParseUrlHosts(bool cluster, RedisEndpoint& ep, std::string_view rest) {
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (cluster) return "a Redis Cluster has no databases: remove '/" + std::string(db) + "'";
    if (!db.empty()) {
      std::optional<int> n = ParseStrictInt<int>(db);
      if (!n || *n < 0) return "database '" + std::string(db) + "' is not a non-negative integer";
      ep.db = *n;
    }
  }
  if (!cluster) {
    auto addr = ParseAddress(rest);
    if (!addr) return std::move(addr.error());
    ep.host = std::move(addr->host);
    ep.port = addr->port;
    return {};
  }
  while (true) {
    size_t comma = rest.find(',');
    auto addr = ParseAddress(rest.substr(0, comma));
    if (!addr) return std::move(addr.error());
    ep.cluster_seeds.push_back(std::move(*addr));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  ep.host = ep.cluster_seeds.front().host;
  ep.port = ep.cluster_seeds.front().port;
  return {};
}

}  // namespace

Result<RedisEndpoint> ParseRedisUrl(std::string_view name, std::string_view url) {
  auto bad = [&](std::string what) {
    return Fail(Error::InvalidParam("redis endpoint '" + std::string(name) + "': " + what +
                                    " in URL '" + MaskRedisUrl(url) + "'"));
  };
  if (!ValidName(name)) return bad("endpoint name must be [A-Za-z0-9_.-]+");
  if (!HasRedisScheme(url))
    return bad(
        "URL must start with redis://, redis-cluster:// or, for TLS, rediss:// or "
        "rediss-cluster://");
  const size_t scheme_end = url.find("://") + 3;
  const std::string_view scheme = url.substr(0, scheme_end);
  const bool cluster = scheme.find("-cluster") != std::string_view::npos;
  RedisEndpoint ep;
  ep.name = std::string(name);
  ep.tls.enabled = scheme.starts_with("rediss");
  std::string_view rest = url.substr(scheme_end);
  if (std::string what = ParseUrlUserinfo(url, ep, rest); !what.empty()) return bad(what);
  if (std::string what = ParseUrlQuery(cluster, ep, rest); !what.empty()) return bad(what);
  if (std::string what = ParseUrlHosts(cluster, ep, rest); !what.empty()) return bad(what);
  // Certificates name hosts: a cluster's nodes, announced as IP addresses by CLUSTER
  // SLOTS, are checked against the first seed's host name (AtNode keeps it).
  if (ep.tls.enabled) ep.tls.server_name = ep.host;
  return ep;
}

namespace {
std::expected<RedisAddress, std::string> ParseAddress(std::string_view rest) {
  using Bad = std::unexpected<std::string>;
  auto bad = [](std::string what) { return Bad(std::move(what)); };
  // Host and port; an IPv6 literal goes in brackets.
  std::string_view host = rest;
  std::string_view port;
  if (rest.starts_with('[')) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unterminated '[' in host");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("unexpected text after ']'");
      port = after.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else if (size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) return bad("empty port");
  }
  if (host.empty()) return bad("missing host");
  RedisAddress addr{std::string(host)};
  if (!port.empty()) {
    std::optional<int> n = ParseStrictInt<int>(port);
    if (!n || *n < 1 || *n > 65535)
      return bad("port '" + std::string(port) + "' is not in 1..65535");
    addr.port = *n;
  }
  return addr;
}
}  // namespace

Result<RedisEndpoint> ParseRedisFlag(std::string_view flag_value) {
  size_t eq = flag_value.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return Fail(Error::InvalidParam("'" + MaskRedisUrl(flag_value) +
                                    "' is not NAME=URL (NAME=redis[s]://host:port[/db][?prefix=P] "
                                    "or NAME=redis[s]-cluster://host:port[,host:port...])"));
  return ParseRedisUrl(flag_value.substr(0, eq), flag_value.substr(eq + 1));
}

Result<std::vector<RedisEndpoint>> ParseRedisFlags(const std::vector<std::string>& values) {
  std::vector<RedisEndpoint> out;
  bool has_default = false;
  for (const auto& v : values) {
    auto ep = ParseRedisFlag(v);
    if (!ep) return Fail(ep.error());
    for (const auto& seen : out)
      if (seen.name == ep->name)
        return Fail(Error::InvalidParam("endpoint '" + ep->name + "' given twice"));
    has_default |= ep->name == kDefaultRedisEndpointName;
    out.push_back(std::move(*ep));
  }
  if (!has_default) {
    auto def = ParseRedisUrl(kDefaultRedisEndpointName, kDefaultRedisUrl);
    out.insert(out.begin(), std::move(*def));
  }
  return out;
}

}  // namespace rankd
