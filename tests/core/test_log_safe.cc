// Log lines stay one line of text whatever a client or a Redis reply put into them
// (core/log.h AppendLogSafe): control bytes, DEL and bytes outside valid UTF-8 as \xNN.
#include <doctest/doctest.h>

#include <string>

#include "core/log.h"

using namespace rankd;

namespace {
std::string Safe(std::string_view s) {
  std::string out;
  AppendLogSafe(s, out);
  return out;
}
}  // namespace

TEST_CASE("printable text and valid UTF-8 pass as they are") {
  CHECK(Safe("plan 'feed': ok") == "plan 'feed': ok");
  CHECK(Safe("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(Safe("") == "");
}

TEST_CASE("control bytes, DEL and invalid UTF-8 become \\xNN") {
  CHECK(Safe("ERR bad\nsecond line") == "ERR bad\\x0asecond line");
  CHECK(Safe("a\rb\tc\x7f"
             "d") == "a\\x0db\\x09c\\x7fd");
  CHECK(Safe(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(Safe("\xff\xfe") == "\\xff\\xfe");
  CHECK(Safe("\xc3") == "\\xc3");                             // cut sequence
  CHECK(Safe("\xc0\xaf") == "\\xc0\\xaf");                    // overlong
  CHECK(Safe("\xed\xa0\x80") == "\\xed\\xa0\\x80");           // surrogate
  CHECK(Safe("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  CHECK(Safe("\x80"
             "abc") == "\\x80abc");  // stray continuation byte
}
