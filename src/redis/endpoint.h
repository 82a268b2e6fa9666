// Redis endpoints as configured by flags: `--redis NAME=URL`, repeatable, where URL is
// redis://[[user]:password@]host[:port][/db][?prefix=P] (one server) or
// redis-cluster://[[user]:password@]host[:port][,host[:port]...][?prefix=P][&read_from=R]
// (a Redis Cluster, found through any of those seed nodes; a cluster has no databases;
// R is master, the default, or replica: reads go to a replica of the key's slot). The parsers are
// shared by every CLI subcommand (run, bench, seed) so that they all accept the same syntax.
//
// Threads: pure functions and plain values; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace rankd {

inline constexpr std::string_view kDefaultRedisEndpointName = "redis_default";
inline constexpr std::string_view kDefaultRedisUrl = "redis://127.0.0.1:6379";

struct RedisAddress {
  std::string host;
  int port = 6379;
  bool operator==(const RedisAddress&) const = default;
};

class TlsClientContext;  // redis/tls_context.h

// TLS to an endpoint: rediss:// and rediss-cluster:// URLs. The file names come from
// --redis-tls-ca/--redis-tls-cert/--redis-tls-key, each overridable per URL
// (?tls_ca=&tls_cert=&tls_key=).
struct RedisTls {
  bool enabled = false;
  std::string ca_file;    // empty: OpenSSL's default trust store
  std::string cert_file;  // client certificate (mutual TLS): with key_file, or neither
  std::string key_file;
  bool verify = true;  // ?tls_verify=off: no certificate or host name check (logged)
  // Sent as SNI and checked against the server's certificate: the URL's host; for a
  // cluster's nodes and redirect targets given as IP addresses, the seed URL's host
  // (AtNode keeps it), since managed clusters' certificates name hosts.
  std::string server_name;
  // Loaded from the files above once, at start-up (LoadRedisTls, redis/tls_context.h),
  // and shared by every shard's connections to the endpoint.
  std::shared_ptr<const TlsClientContext> context;
};

struct RedisEndpoint {
  std::string name;  // how plans refer to it ("endpoint": "redis_default")
  std::string host;  // a cluster's: its first seed node
  int port = 6379;
  // redis-cluster://: the seed nodes, in the URL's order (the first is host:port). Empty
  // for a single server.
  std::vector<RedisAddress> cluster_seeds;
  std::string user;      // AUTH user password when set (Redis 6 ACL), else AUTH password
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECT db when non-zero
  std::string prefix;    // prepended to every key
  // redis-cluster:// only: read commands go to a replica of their slot; connections send
  // READONLY after connecting.
  bool read_from_replica = false;
  RedisTls tls;

  bool is_cluster() const { return !cluster_seeds.empty(); }
  // "redis_default (127.0.0.1:6379)", "shop (cluster 10.0.0.1:7000,10.0.0.2:7000)": how
  // error messages name the endpoint (never the password).
  std::string Label() const;
  // The same endpoint at one node of its cluster: a single server, same name, password
  // and prefix.
  RedisEndpoint AtNode(const RedisAddress& node) const;
};

// Parses a URL for the endpoint `name`. Errors are InvalidParam and quote the URL
// (with the password masked) and the offending part.
Result<RedisEndpoint> ParseRedisUrl(std::string_view name, std::string_view url);

// Parses one `--redis` flag value: "NAME=URL".
Result<RedisEndpoint> ParseRedisFlag(std::string_view flag_value);

// Parses every `--redis` value; a name given twice is an error. When no value names
// redis_default, it is added as redis://127.0.0.1:6379.
Result<std::vector<RedisEndpoint>> ParseRedisFlags(const std::vector<std::string>& values);

}  // namespace rankd
