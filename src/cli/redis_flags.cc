#include "cli/redis_flags.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "redis/tls_context.h"

namespace rankd {

namespace {

Error Bad(std::string what) { return Error::BadRequest(std::move(what)); }

// The password in `path`: the file's content less one trailing "\n" or "\r\n". Errors
// name the endpoint and the file; the content never appears in one.
Result<std::string> ReadPasswordFile(const RedisEndpoint& ep, const std::string& path) {
  const std::string where = "redis endpoint '" + ep.name + "': password file '" + path + "'";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Fail(Bad(where + ": cannot read it: " + std::strerror(errno)));
  std::string out(kMaxRedisPasswordFileBytes + 1, '\0');
  size_t n = std::fread(out.data(), 1, out.size(), f);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return Fail(Bad(where + ": cannot read it: " + std::strerror(err)));
  if (n > kMaxRedisPasswordFileBytes)
    return Fail(Bad(where + ": larger than " + std::to_string(kMaxRedisPasswordFileBytes) +
                    " bytes, which no password is"));
  out.resize(n);
  if (out.ends_with("\r\n"))
    out.resize(out.size() - 2);
  else if (out.ends_with('\n'))
    out.pop_back();
  if (out.empty()) return Fail(Bad(where + ": empty (no password in it)"));
  return out;
}

// --redis-password-file NAME=PATH onto the endpoint NAME.
Status SetPasswordFile(std::vector<RedisEndpoint>& endpoints, std::string_view value) {
  size_t eq = value.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == value.size())
    return Fail(Bad("--redis-password-file '" + std::string(value) + "': expected NAME=PATH"));
  const std::string name(value.substr(0, eq));
  const std::string path(value.substr(eq + 1));
  for (RedisEndpoint& ep : endpoints) {
    if (ep.name != name) continue;
    if (!ep.password.empty())
      return Fail(Bad("--redis-password-file " + name +
                      ": the endpoint's URL has a password already; give it in one place"));
    if (!ep.password_file.empty())
      return Fail(Bad("--redis-password-file " + name +
                      ": the endpoint has a password file "
                      "already ('" +
                      ep.password_file + "')"));
    ep.password_file = path;
    return {};
  }
  return Fail(
      Bad("--redis-password-file " + name + ": no --redis endpoint is named '" + name + "'"));
}

}  // namespace

std::vector<Flag> RedisFlagRows(RedisFlags& flags) {
  return {
      RepeatedFlag("--redis", "NAME=URL",
                   "a Redis endpoint, repeatable ({});\n"
                   "URL: redis://[[user]:password@]host:port[/db][?prefix=P]\n"
                   "or redis-cluster://[[user]:password@]host:port[,host:port...];\n"
                   "rediss:// and rediss-cluster:// speak TLS (docs/operations.md)",
                   flags.endpoints,
                   [] {
                     return std::string(kDefaultRedisEndpointName) + "=" +
                            std::string(kDefaultRedisUrl);
                   }),
      RepeatedFlag("--redis-password-file", "NAME=PATH",
                   "endpoint NAME's password is the content of PATH (less one\n"
                   "trailing newline), read at start-up; repeatable",
                   flags.password_files),
      TextFlag("--redis-tls-ca", "FILE",
               "CA certificates of rediss:// endpoints (OpenSSL's default\n"
               "trust store); a URL's ?tls_ca= overrides it",
               flags.tls_ca),
      TextFlag("--redis-tls-cert", "FILE",
               "client certificate of rediss:// endpoints (mutual TLS,\n"
               "with --redis-tls-key); a URL's ?tls_cert= overrides it",
               flags.tls_cert),
      TextFlag("--redis-tls-key", "FILE",
               "the client certificate's private key; a URL's ?tls_key=\n"
               "overrides it",
               flags.tls_key),
  };
}

Result<std::vector<RedisEndpoint>> ResolveRedisFlags(const RedisFlags& flags) {
  auto endpoints = ParseRedisFlags(flags.endpoints);
  if (!endpoints) return Fail(Bad("--redis: " + endpoints.error().message));
  for (const std::string& v : flags.password_files)
    if (auto st = SetPasswordFile(*endpoints, v); !st) return Fail(st.error());
  bool any_tls = false;
  for (RedisEndpoint& ep : *endpoints) {
    if (!ep.password_file.empty()) {
      auto password = ReadPasswordFile(ep, ep.password_file);
      if (!password) return Fail(password.error());
      ep.password = std::move(*password);
    }
    if (!ep.user.empty() && ep.password.empty())
      return Fail(Bad("--redis: endpoint '" + ep.name + "': user '" + ep.user +
                      "' without a password (give one in the URL, in ?password_file= or "
                      "with --redis-password-file)"));
    if (!ep.tls.enabled) continue;
    any_tls = true;
    if (ep.tls.ca_file.empty()) ep.tls.ca_file = flags.tls_ca;
    if (ep.tls.cert_file.empty()) ep.tls.cert_file = flags.tls_cert;
    if (ep.tls.key_file.empty()) ep.tls.key_file = flags.tls_key;
  }
  if (!any_tls) {
    for (auto [flag, value] : {std::pair{"--redis-tls-ca", &flags.tls_ca},
                               std::pair{"--redis-tls-cert", &flags.tls_cert},
                               std::pair{"--redis-tls-key", &flags.tls_key}})
      if (!value->empty())
        return Fail(Bad(std::string(flag) +
                        ": no --redis endpoint uses TLS (rediss:// or rediss-cluster://)"));
  }
  if (auto st = LoadRedisTls(*endpoints); !st) return Fail(Bad("--redis: " + st.error().message));
  return endpoints;
}

}  // namespace rankd
