#include "server/auth_tokens.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/sha256.h"
#include "core/small_file.h"
#include "http/message.h"

namespace rankd {

namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

// RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
bool IsToken(std::string_view t) {
  size_t i = 0;
  while (i < t.size() && IsTokenChar(t[i])) ++i;
  if (i == 0) return false;
  while (i < t.size() && t[i] == '=') ++i;
  return i == t.size();
}

std::string_view Trim(std::string_view s) {
  const char* kSpace = " \t\r\n\v\f";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

}  // namespace

Result<std::shared_ptr<const AuthTokens>> AuthTokens::Load(const std::string& path) {
  auto text = ReadSmallFile(path, kMaxFileBytes, "token file");
  if (!text) return Fail(std::move(text.error()));
  std::vector<Digest> digests;
  std::istringstream lines(*text);
  std::string line;
  for (size_t n = 1; std::getline(lines, line); ++n) {
    std::string_view t = Trim(line);
    if (t.empty() || t.front() == '#') continue;
    if (!IsToken(t))
      return Fail(Error::BadRequest(path + " line " + std::to_string(n) +
                                    ": not a token (letters, digits and -._~+/, then = "
                                    "padding: what 'Authorization: Bearer' can carry)"));
    Sha256 h;
    h.Update(t);
    digests.push_back(h.Final());
  }
  if (digests.empty())
    return Fail(Error::BadRequest(path + " holds no token (one a line; empty lines and lines "
                                         "starting with # are ignored)"));
  return std::shared_ptr<const AuthTokens>(new AuthTokens(std::move(digests)));
}

Status AuthTokens::Check(std::string_view authorization) const {
  if (authorization.empty())
    return Fail(Error::Unauthorized("this route needs an 'Authorization: Bearer <token>' header"));
  constexpr std::string_view kScheme = "Bearer";
  std::string_view token;
  if (authorization.size() > kScheme.size() && authorization[kScheme.size()] == ' ' &&
      http::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    token = authorization.substr(kScheme.size());
    token.remove_prefix(std::min(token.find_first_not_of(' '), token.size()));
  }
  if (!IsToken(token))
    return Fail(Error::Unauthorized("the Authorization header is not 'Bearer <token>'"));
  Sha256 h;
  h.Update(token);
  const Digest given = h.Final();
  // Every digest, every byte, whatever matched: the time says nothing about the tokens.
  uint8_t found = 0;
  for (const Digest& d : digests_) {
    uint8_t diff = 0;
    for (size_t i = 0; i < d.size(); ++i) diff |= static_cast<uint8_t>(d[i] ^ given[i]);
    found |= static_cast<uint8_t>(diff == 0);
  }
  if (!found) return Fail(Error::Unauthorized("the bearer token is not one this server accepts"));
  return {};
}

}  // namespace rankd
