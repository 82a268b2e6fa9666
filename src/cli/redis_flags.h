// The Redis flags every command that talks to Redis takes (serve, run, bench, seed,
// replay), declared once and resolved once into endpoints:
//   --redis NAME=URL                 an endpoint (redis/endpoint.h), repeatable
//   --redis-password-file NAME=PATH  endpoint NAME's password is PATH's content, repeatable
//   --redis-tls-ca FILE, --redis-tls-cert FILE, --redis-tls-key FILE
//                                    the TLS files of every rediss:// endpoint, unless its
//                                    URL names its own (?tls_ca=&tls_cert=&tls_key=)
// Resolving reads the password files and loads the TLS files (redis/tls_context.h), so a
// missing or bad file is an error at start-up, not at the first connection.
//
// Threads: the main thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_flags.h"
#include "core/error.h"
#include "redis/endpoint.h"

namespace rankd {

// The flags' values as given, for ResolveRedisFlags once every flag is read.
struct RedisFlags {
  std::vector<std::string> endpoints;       // --redis NAME=URL
  std::vector<std::string> password_files;  // --redis-password-file NAME=PATH
  std::string tls_ca, tls_cert, tls_key;    // --redis-tls-*
};

// A password file's size limit: a password is short, and a path to a large file (or to
// /dev/zero) is a mistake to report, not to read to its end.
inline constexpr size_t kMaxRedisPasswordFileBytes = 64 * 1024;

// The flag rows bound to `flags`, with their --help lines (`rankd serve --help` shows them).
std::vector<Flag> RedisFlagRows(RedisFlags& flags);

// The endpoints: every --redis (redis_default added when none names it), each with its
// password read from its file (the content less one trailing "\n" or "\r\n") and, for TLS
// endpoints, the flags' files where the URL names none and the TLS context loaded.
// Errors are bad_request naming the flag, the endpoint and the file (never a password):
// a password file given for an endpoint that has one in its URL or already a file, or
// naming no endpoint; a file that cannot be read, is empty or is over the limit; an ACL
// user without a password; --redis-tls-* with no TLS endpoint (a forgotten "rediss"
// would send the password in clear); a CA, certificate or key OpenSSL cannot load.
Result<std::vector<RedisEndpoint>> ResolveRedisFlags(const RedisFlags& flags);

}  // namespace rankd
