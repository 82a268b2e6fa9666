// The one JSON string writer: escapes, and invalid UTF-8 replaced byte by byte.
#include <doctest/doctest.h>

#include <string>

#include "core/json_escape.h"

using rankd::AppendJsonString;

namespace {
std::string Json(std::string_view s) {
  std::string out;
  AppendJsonString(s, out);
  return out;
}
}  // namespace

TEST_SUITE("json_escape") {
  TEST_CASE("quotes, backslashes and control characters are escaped") {
    CHECK(Json("a\"b\\c\n\x01 é \xff") == "\"a\\\"b\\\\c\\n\\u0001 é \\ufffd\"");
    CHECK(Json("\r\t\b\f\x1f") == "\"\\r\\t\\b\\f\\u001f\"");
    CHECK(Json("") == "\"\"");
  }

  TEST_CASE("valid UTF-8 passes through") {
    CHECK(Json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") ==
          "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
  }

  TEST_CASE("invalid UTF-8 becomes U+FFFD, one per byte") {
    CHECK(Json("\x80") == "\"\\ufffd\"");                        // stray continuation byte
    CHECK(Json("\xc0\xaf") == "\"\\ufffd\\ufffd\"");             // overlong '/'
    CHECK(Json("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate U+D800
    CHECK(Json("\xf4\x90\x80\x80") == "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // past U+10FFFF
    CHECK(Json("a\xe2\x82") == "\"a\\ufffd\\ufffd\"");                      // cut short
  }

}  // TEST_SUITE
