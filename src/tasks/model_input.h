// The float32 a `model` node hands its model for one cell: one definition for the model
// task and the served log (docs/served-log.md), so a logged model input is exactly what
// was scored and a replay reproduces the score bit for bit.
//
// Threads: any thread (a pure function of immutable columns).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "data/row_set.h"

namespace rankd {

// Row `r` (physical) of `col` as a model feature: null (or an absent column) is NaN,
// which Model::Score takes as missing; an i64 or f64 beyond float32's range becomes
// +-inf, which Score also takes as missing; a bool is 0 or 1; a vec column gives its
// element `element`. Then a missing value (NaN, +-inf) takes `fill` when that is not NaN
// (NodeModel::fills). `col` is not str (the model task refuses str features).
inline float ModelInput(const Column* col, uint32_t r, uint32_t element = 0,
                        float fill = std::numeric_limits<float>::quiet_NaN()) {
  float x = std::numeric_limits<float>::quiet_NaN();
  if (col && col->valid(r)) {
    switch (col->type) {
      case ColumnType::kI64: x = static_cast<float>(col->i64[r]); break;
      case ColumnType::kF64: x = static_cast<float>(col->f64[r]); break;
      case ColumnType::kBool: x = col->b[r] ? 1.0f : 0.0f; break;
      case ColumnType::kVec: x = col->vec[size_t{r} * col->dim + element]; break;
      case ColumnType::kStr: break;  // never: the loader refuses str features
    }
  }
  return std::isfinite(x) || fill != fill ? x : fill;
}

}  // namespace rankd
