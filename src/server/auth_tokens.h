// AuthTokens: the API tokens of --auth-token-file, and the check of a request's
// `Authorization: Bearer <token>` against them (docs/operations.md, "Security").
//
// The file holds one token a line; whitespace around a token is trimmed, empty lines and
// lines starting with '#' are ignored. A token is what RFC 6750 allows (letters, digits,
// "-._~+/", then '=' padding), so that every token can be sent in the header. Only the
// SHA-256 of each token is kept: a request's token is hashed once and compared with
// every digest in time that depends on neither the tokens nor where they differ.
//
// Threads: Load on any thread (the main thread: start-up and SIGHUP). An AuthTokens is
// immutable once loaded; a shard loop holds a shared_ptr to the set it was given, so
// Check runs on any thread without a lock.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace rankd {

class AuthTokens {
 public:
  // Errors (bad_request), each naming the file: unreadable, over 1 MiB, no token, a line
  // that is not a token (by line number: the line itself is a secret and is not shown).
  static Result<std::shared_ptr<const AuthTokens>> Load(const std::string& path);

  size_t size() const { return digests_.size(); }
  // The value of a request's Authorization header ("" when it has none): ok when it is
  // "Bearer <token>" (the scheme in any case) with one of the tokens; else unauthorized,
  // saying which of missing, malformed or unknown (never quoting the header).
  Status Check(std::string_view authorization) const;

 private:
  using Digest = std::array<uint8_t, 32>;
  explicit AuthTokens(std::vector<Digest> digests) : digests_(std::move(digests)) {}
  std::vector<Digest> digests_;
};

}  // namespace rankd
