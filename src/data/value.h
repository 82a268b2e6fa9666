// Value: one scalar of a row set or a parameter (null, i64, f64, str, bool), and the
// column types of PLAN.md. Plain value types: any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace rankd {

enum class ColumnType : uint8_t { kI64, kF64, kStr, kBool };

std::string_view ColumnTypeName(ColumnType t);  // "i64", "f64", "str", "bool"

// index order matters: monostate = null.
using Value = std::variant<std::monostate, int64_t, double, std::string, bool>;

inline bool IsNull(const Value& v) { return v.index() == 0; }

}  // namespace rankd
