// Redis endpoints as configured by flags: `--redis NAME=URL`, repeatable, where URL is
//   redis[s]://[[user]:password@]host[:port][/db][?param=value&...]          (one server)
//   redis[s]-cluster://[[user]:password@]host[:port][,host[:port]...][?...]  (a Redis Cluster)
// A cluster is found through any of its seed nodes and has no databases. rediss:// and
// rediss-cluster:// speak TLS. The parameters: prefix=P (prepended to every key),
// read_from=master|replica (a cluster's reads), password_file=PATH (the password is that
// file's content, read at start-up), and for TLS URLs only tls_ca=, tls_cert=, tls_key=
// (files) and tls_verify=on|off.
//
// Where the parts end: the userinfo is everything between "://" and the URL's LAST '@',
// so a password may hold '@' and ':' as they are; a '/' or '?' in it is an error (it
// could as well be an '@' in a parameter: the URL is ambiguous), to be written %2F, %3F.
// User, password and the parameters' values are percent-decoded (an '@' or '&' in a
// parameter is %40, %26). MaskRedisUrl reads the same positions, so whatever the parser
// takes for the password is what the mask hides, even in a URL it rejects.
//
// The parsers are shared by every CLI subcommand (serve, run, bench, seed, replay) through
// cli/redis_flags.h, which adds the flags' defaults and reads the password files.
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
  std::string password;  // empty: no AUTH. Never printed: messages name the endpoint (Label)
  // ?password_file= or --redis-password-file: the file the password is read from at
  // start-up (cli/redis_flags.h); empty when the password, if any, is in the URL.
  std::string password_file;
  int db = 0;          // SELECT db when non-zero
  std::string prefix;  // prepended to every key
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

// True when `host` is an IPv4 or IPv6 address literal (not a name to look up).
bool IsIpAddress(const std::string& host);

// Parses a URL for the endpoint `name`. Errors are InvalidParam and quote the URL
// (MaskRedisUrl) and the offending part; never the password, nor any part of it.
Result<RedisEndpoint> ParseRedisUrl(std::string_view name, std::string_view url);

// `text` with the password of the Redis URL in it replaced by "***": "rediss://alice:***@h"
// (the user stays), "redis://***@h" for the bare "password@" form. Anything between
// "://" (or the start, when there is none) and the last '@' is userinfo: the parser's
// reading, so a URL it could not parse is masked all the same. The one function that
// makes a Redis URL printable; text without '@' comes back as it is.
std::string MaskRedisUrl(std::string_view text);

// Whether `text` starts with one of the four schemes above (a URL, not NAME=URL).
bool HasRedisScheme(std::string_view text);

// Parses one `--redis` flag value: "NAME=URL".
Result<RedisEndpoint> ParseRedisFlag(std::string_view flag_value);

// Parses every `--redis` value; a name given twice is an error. When no value names
// redis_default, it is added as redis://127.0.0.1:6379.
Result<std::vector<RedisEndpoint>> ParseRedisFlags(const std::vector<std::string>& values);

}  // namespace rankd
