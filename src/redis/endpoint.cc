#include "redis/endpoint.h"

#include <cctype>
#include <expected>
#include <optional>

#include "core/parse_int.h"

namespace rankd {

namespace {

// The URL with any password replaced by "***", for error messages.
std::string MaskUrl(std::string_view url) {
  size_t scheme = url.find("://");
  size_t at = url.find('@');
  if (scheme == std::string_view::npos || at == std::string_view::npos || at < scheme)
    return std::string(url);
  size_t colon = url.find(':', scheme + 3);
  if (colon == std::string_view::npos || colon > at) return std::string(url);
  return std::string(url.substr(0, colon + 1)) + "***" + std::string(url.substr(at));
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

Result<RedisEndpoint> ParseRedisUrl(std::string_view name, std::string_view url) {
  auto bad = [&](std::string what) {
    return Fail(Error::InvalidParam("redis endpoint '" + std::string(name) + "': " + what +
                                    " in URL '" + MaskUrl(url) + "'"));
  };
  if (!ValidName(name)) return bad("endpoint name must be [A-Za-z0-9_.-]+");
  constexpr std::string_view kScheme = "redis://";
  constexpr std::string_view kClusterScheme = "redis-cluster://";
  const bool cluster = url.starts_with(kClusterScheme);
  if (!cluster && !url.starts_with(kScheme))
    return bad("URL must start with redis:// or redis-cluster://");
  RedisEndpoint ep;
  ep.name = std::string(name);
  std::string_view rest = url.substr(cluster ? kClusterScheme.size() : kScheme.size());

  // Query: prefix=P, and read_from=master|replica for a cluster.
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view kv = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      size_t eq = kv.find('=');
      std::string_view key = kv.substr(0, eq);
      std::string_view value =
          eq == std::string_view::npos ? std::string_view{} : kv.substr(eq + 1);
      if (key == "read_from" && cluster && (value == "master" || value == "replica")) {
        ep.read_from_replica = value == "replica";
        continue;
      }
      if (key != "prefix" || eq == std::string_view::npos)
        return bad("unknown query parameter '" + std::string(kv) +
                   (cluster ? "' (only prefix=P, read_from=master|replica)" : "' (only prefix=P)"));
      ep.prefix = std::string(value);
    }
  }
  // Path: /db
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (cluster) return bad("a Redis Cluster has no databases: remove '/" + std::string(db) + "'");
    if (!db.empty()) {
      std::optional<int> n = ParseStrictInt<int>(db);
      if (!n || *n < 0)
        return bad("database '" + std::string(db) + "' is not a non-negative integer");
      ep.db = *n;
    }
  }
  // Userinfo: [user]:password@ (a bare "password@" is accepted too).
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      ep.password = std::string(userinfo);
    } else {
      ep.user = std::string(userinfo.substr(0, colon));
      ep.password = std::string(userinfo.substr(colon + 1));
    }
  }
  if (!cluster) {
    auto addr = ParseAddress(rest);
    if (!addr) return bad(std::move(addr.error()));
    ep.host = std::move(addr->host);
    ep.port = addr->port;
    return ep;
  }
  while (true) {
    size_t comma = rest.find(',');
    auto addr = ParseAddress(rest.substr(0, comma));
    if (!addr) return bad(std::move(addr.error()));
    ep.cluster_seeds.push_back(std::move(*addr));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  ep.host = ep.cluster_seeds.front().host;
  ep.port = ep.cluster_seeds.front().port;
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
    return Fail(Error::InvalidParam("--redis '" + MaskUrl(flag_value) +
                                    "': expected NAME=redis://host:port[/db][?prefix=P] or "
                                    "NAME=redis-cluster://host:port[,host:port...][?prefix=P]"));
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
        return Fail(Error::InvalidParam("--redis: endpoint '" + ep->name + "' given twice"));
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
