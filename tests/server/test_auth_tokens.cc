// AuthTokens (server/auth_tokens.h): the token file's format and errors, and the check
// of an Authorization header against the tokens.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "server/auth_tokens.h"

namespace {

// A temporary file holding `text`, removed with the object.
struct TempFile {
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/rankd-tokens-XXXXXX";
    int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
  std::string path;
};

}  // namespace

TEST_SUITE("auth_tokens") {
  TEST_CASE("one token a line, trimmed; empty and # lines ignored") {
    TempFile f("# the API tokens\n\n  tok-one  \r\n\ttok_two.~+/==\n   # indented comment\n");
    auto tokens = rankd::AuthTokens::Load(f.path);
    REQUIRE(tokens);
    CHECK((*tokens)->size() == 2);
    CHECK((*tokens)->Check("Bearer tok-one"));
    CHECK((*tokens)->Check("Bearer tok_two.~+/=="));
    CHECK((*tokens)->Check("bearer tok-one"));       // the scheme in any case
    CHECK((*tokens)->Check("BEARER   tok-one"));     // more than one space
    CHECK_FALSE((*tokens)->Check("Bearer tok-on"));  // a prefix is not the token
    CHECK_FALSE((*tokens)->Check("Bearer tok-one2"));
    CHECK_FALSE((*tokens)->Check("Bearer # the API tokens"));
  }

  TEST_CASE("missing, malformed and unknown tokens are unauthorized, and say which") {
    TempFile f("secret-1\n");
    auto tokens = rankd::AuthTokens::Load(f.path);
    REQUIRE(tokens);
    auto check = [&](std::string_view h) { return (*tokens)->Check(h); };
    auto missing = check("");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == rankd::ErrorCode::kUnauthorized);
    CHECK(missing.error().message.find("needs an 'Authorization: Bearer <token>'") !=
          std::string::npos);
    for (std::string_view bad :
         {"secret-1", "Basic c2VjcmV0LTE=", "Bearer", "Bearer ", "Bearersecret-1",
          "Bearer secret-1 x", "Bearer sec ret", "Bearer =secret", "Bearer secret=1"}) {
      CAPTURE(bad);
      auto r = check(bad);
      REQUIRE_FALSE(r);
      CHECK(r.error().code == rankd::ErrorCode::kUnauthorized);
      CHECK(r.error().message.find("is not 'Bearer <token>'") != std::string::npos);
      CHECK(r.error().message.find("secret") == std::string::npos);  // never echoed
    }
    auto wrong = check("Bearer secret-2");
    REQUIRE_FALSE(wrong);
    CHECK(wrong.error().message.find("not one this server accepts") != std::string::npos);
  }

  TEST_CASE("a file with no token, an unreadable one and a bad line are errors naming it") {
    TempFile empty("# only comments\n\n   \n");
    auto r = rankd::AuthTokens::Load(empty.path);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find(empty.path + " holds no token") != std::string::npos);

    r = rankd::AuthTokens::Load("/nonexistent/rankd-tokens");
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("cannot read /nonexistent/rankd-tokens") != std::string::npos);

    TempFile bad("good-token\nnot a token\n");
    r = rankd::AuthTokens::Load(bad.path);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find(bad.path + " line 2: not a token") != std::string::npos);
    CHECK(r.error().message.find("not a token (") != std::string::npos);
  }
}
