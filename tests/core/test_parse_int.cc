#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "core/parse_int.h"

using rankd::ParseStrictInt;

TEST_CASE("ParseStrictInt takes whole decimal integers, fast path and long ones alike") {
  CHECK(ParseStrictInt<int64_t>("0") == 0);
  CHECK(ParseStrictInt<int64_t>("-0") == 0);
  CHECK(ParseStrictInt<int64_t>("007") == 7);
  CHECK(ParseStrictInt<int64_t>("123456") == 123456);
  CHECK(ParseStrictInt<int64_t>("-123456") == -123456);
  // 18 digits (the loop), 19 digits (from_chars), the limits.
  CHECK(ParseStrictInt<int64_t>("999999999999999999") == 999999999999999999);
  CHECK(ParseStrictInt<int64_t>("1000000000000000000") == 1000000000000000000);
  CHECK(ParseStrictInt<int64_t>("9223372036854775807") == INT64_MAX);
  CHECK(ParseStrictInt<int64_t>("-9223372036854775808") == INT64_MIN);
  CHECK(ParseStrictInt<int32_t>("2147483647") == INT32_MAX);
  CHECK(ParseStrictInt<int32_t>("-2147483648") == INT32_MIN);
  CHECK(ParseStrictInt<uint64_t>("18446744073709551615") == UINT64_MAX);
  CHECK(ParseStrictInt<size_t>("4096") == 4096u);
}

TEST_CASE("ParseStrictInt refuses anything but one integer that fits") {
  for (const char* bad : {"", "-", "+1", " 1", "1 ", "12a", "a12", "1.5", "--1", "0x10", "1-"}) {
    CAPTURE(std::string(bad));
    CHECK_FALSE(ParseStrictInt<int64_t>(bad).has_value());
    CHECK_FALSE(ParseStrictInt<uint32_t>(bad).has_value());
  }
  CHECK_FALSE(ParseStrictInt<int64_t>("9223372036854775808").has_value());
  CHECK_FALSE(ParseStrictInt<int64_t>("-9223372036854775809").has_value());
  CHECK_FALSE(ParseStrictInt<int32_t>("2147483648").has_value());
  CHECK_FALSE(ParseStrictInt<uint64_t>("18446744073709551616").has_value());
  CHECK_FALSE(ParseStrictInt<uint32_t>("-1").has_value());
  CHECK_FALSE(ParseStrictInt<size_t>("-0").has_value());
  CHECK_FALSE(ParseStrictInt<int64_t>(std::string(40, '9')).has_value());
}
