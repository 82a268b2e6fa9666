// The float32 a `model` node hands its model for one cell: one definition for the model
// task and the served log (docs/served-log.md), so a logged model input is exactly what
// was scored and a replay reproduces the score bit for bit.
//
// Threads: any thread (a pure function of immutable columns).
#pragma once

#include <cstdint>
#include <limits>

#include "data/row_set.h"

namespace rankd {

// Row `r` (physical) of `col` as a model feature: null (or an absent column) is NaN,
// which Model::Score takes as missing; an i64 or f64 beyond float32's range becomes
// +-inf, which Score also takes as missing; a bool is 0 or 1. `col` is not str (the
// model task refuses str features).
inline float ModelInput(const Column* col, uint32_t r) {
  if (!col || !col->valid(r)) return std::numeric_limits<float>::quiet_NaN();
  switch (col->type) {
    case ColumnType::kI64: return static_cast<float>(col->i64[r]);
    case ColumnType::kF64: return static_cast<float>(col->f64[r]);
    case ColumnType::kBool: return col->b[r] ? 1.0f : 0.0f;
    case ColumnType::kStr:
    case ColumnType::kVec: break;  // never: the loader refuses str and vec features
  }
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace rankd
