// Value: one value of a row set cell, a plan or request parameter, or a task parameter
// (null, i64, f64, str, bool, for task parameters only a list of strings, and a vector of
// float32 for a `vec` cell, docs/vectors.md), and the column types of a plan
// (docs/plan.md). Plain value types: any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace rankd {

// kVec: a fixed-dimension vector of float32 per row (Column::dim; docs/vectors.md).
enum class ColumnType : uint8_t { kI64, kF64, kStr, kBool, kVec };

std::string_view ColumnTypeName(ColumnType t);  // "i64", "f64", "str", "bool", "vec"

// The largest dimension of a `vec` field or column (docs/vectors.md).
inline constexpr uint32_t kMaxVecDim = 4096;

// index order matters: monostate = null. A cell or a request parameter is never a list;
// a vector (index 6) is a `vec` cell, e.g. a viewer's embedding bound by {"from"}.
using Value = std::variant<std::monostate, int64_t, double, std::string, bool,
                           std::vector<std::string>, std::vector<float>>;

inline bool IsNull(const Value& v) { return v.index() == 0; }

// A request's user_id (docs/api.md): an integer >= 0, or a string when the plan's viewer
// family is keyed by str ids (docs/data.md).
struct UserId {
  UserId() = default;
  UserId(int64_t n) : num(n) {}  // NOLINT: an integer id converts implicitly
  static UserId Str(std::string s) {
    UserId u;
    u.str = std::move(s);
    u.is_str = true;
    return u;
  }
  int64_t num = 0;
  std::string str;
  bool is_str = false;
  // The id as text: its decimal digits or the string itself.
  std::string Text() const { return is_str ? str : std::to_string(num); }
};

// An id of a row or a request: an i64, or a str id (a view; `num` unused).
struct IdRef {
  int64_t num = 0;
  std::string_view str;
};

}  // namespace rankd
