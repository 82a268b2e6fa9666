// Value: one value of a row set cell, a plan or request parameter, or a task parameter
// (null, i64, f64, str, bool, and for task parameters only a list of strings), and the
// column types of a plan (docs/plan.md). Plain value types: any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace rankd {

enum class ColumnType : uint8_t { kI64, kF64, kStr, kBool };

std::string_view ColumnTypeName(ColumnType t);  // "i64", "f64", "str", "bool"

// index order matters: monostate = null. A cell or a request parameter is never a list.
using Value =
    std::variant<std::monostate, int64_t, double, std::string, bool, std::vector<std::string>>;

inline bool IsNull(const Value& v) { return v.index() == 0; }

}  // namespace rankd
