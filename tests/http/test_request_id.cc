// Request ids: which client ids are echoed, and generated ids are unique.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "http/request_id.h"

using namespace rankd::http;

TEST_CASE("printable ids of 1..128 characters are valid") {
  CHECK(IsValidRequestId("a"));
  CHECK(IsValidRequestId("req-42_ABC:/=+~ x"));
  CHECK(IsValidRequestId(std::string(128, 'x')));
}

TEST_CASE("empty, too long and non-printable ids are not") {
  CHECK_FALSE(IsValidRequestId(""));
  CHECK_FALSE(IsValidRequestId(std::string(129, 'x')));
  CHECK_FALSE(IsValidRequestId("a\tb"));
  CHECK_FALSE(IsValidRequestId("a\rb"));
  CHECK_FALSE(IsValidRequestId(std::string("a\0b", 3)));
  CHECK_FALSE(IsValidRequestId("caf\xc3\xa9"));
  CHECK_FALSE(IsValidRequestId("a\x7f"));
}

TEST_CASE("generated ids are valid, distinct, and distinct across listeners") {
  RequestIdGenerator a(3, NextListenerInstance());
  RequestIdGenerator b(3, NextListenerInstance());
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string x = a.Next(), y = b.Next();
    CHECK(IsValidRequestId(x));
    CHECK(seen.insert(x).second);
    CHECK(seen.insert(y).second);
  }
  CHECK(a.Next().starts_with("3-"));
}
