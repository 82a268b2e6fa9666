#include <doctest/doctest.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>

#include "core/parse_f64.h"

using rankd::ParseStrictF64;

namespace {

// What from_chars alone makes of s (the parser's contract), bit for bit.
std::optional<double> Reference(const std::string& s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

void Same(const std::string& s) {
  CAPTURE(s);
  const std::optional<double> got = ParseStrictF64(s), want = Reference(s);
  REQUIRE(got.has_value() == want.has_value());
  if (got) CHECK(std::signbit(*got) == std::signbit(*want));
  if (got) CHECK(*got == *want);
}

}  // namespace

TEST_CASE("ParseStrictF64 gives from_chars's double, fast path or not") {
  // Fast-path forms, the limits of the fast path, and forms only from_chars takes.
  std::istringstream fixed(
      "0 -0 0.0 -0.0 1 0.734 12.5 -3.25 007.50 0.1 0.3 1.000000000000001 123456789012345 "
      "1234567890123456 0.000000000000001 9007199254740993 1e3 1E-3 2.5e+2 1. .5 -.5 "
      "1e-999 4.9e-324 1.7976931348623157e308");
  for (std::string s; fixed >> s;) Same(s);
  // Random decimals of 1–17 digits with the point anywhere, and their negatives.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const int digits = 1 + static_cast<int>(rng() % 17);
    std::string s;
    for (int d = 0; d < digits; ++d) s.push_back(static_cast<char>('0' + rng() % 10));
    const int point = static_cast<int>(rng() % (digits + 1));
    if (point > 0 && point < digits) s.insert(static_cast<size_t>(point), ".");
    if (rng() % 2) s.insert(0, "-");
    Same(s);
  }
}

TEST_CASE("ParseStrictF64 refuses what is not one finite number") {
  for (const char* bad : {"", "-", ".", "-.", "+1", " 1", "1 ", "1..2", "1.2.3", "12a", "0x10",
                          "inf", "-inf", "nan", "infinity", "1e999", "1e", "--1", "1-"}) {
    CAPTURE(std::string(bad));
    CHECK_FALSE(ParseStrictF64(bad).has_value());
  }
}
