// Request parameters a plan declares ("params", docs/plan.md) and their per-request
// values. Plain values: any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/value.h"

namespace rankd {

struct ParamDecl {
  std::string name;
  ColumnType type = ColumnType::kF64;  // i64, f64, str or bool
  Value default_value;                 // of `type`
  std::optional<double> min, max;      // numbers only
};

struct ParamDecls {
  std::vector<ParamDecl> decls;
  // Index in decls, or -1.
  int index_of(std::string_view name) const {
    for (size_t i = 0; i < decls.size(); ++i)
      if (decls[i].name == name) return static_cast<int>(i);
    return -1;
  }
};

// One run's values, by declaration index, defaults filled in; then the plan's `from`
// values (plan/plan.h FromValue), null until the node they read has finished. An
// expression reads both kinds the same way: a scalar per run.
using ParamValues = std::vector<Value>;

}  // namespace rankd
