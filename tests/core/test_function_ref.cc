#include <doctest/doctest.h>

#include <string>

#include "core/function_ref.h"

using rankd::FunctionRef;

namespace {
int Apply(FunctionRef<int(int)> f, int x) { return f(x); }
}  // namespace

TEST_CASE("FunctionRef calls the referenced callable with its captures, without copying it") {
  int base = 10, calls = 0;
  std::string big(100, 'x');  // a capture larger than std::function's inline buffer
  auto add = [&, big](int x) {
    ++calls;
    return base + x + static_cast<int>(big.size());
  };
  CHECK(Apply(add, 1) == 111);
  base = 20;  // by reference: sees the change
  CHECK(Apply(add, 1) == 121);
  CHECK(calls == 2);
  // A FunctionRef passed on refers to the same callable, not to the reference.
  FunctionRef<int(int)> r = add;
  FunctionRef<int(int)> copy = r;
  CHECK(copy(0) == 120);
}
