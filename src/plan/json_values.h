// Reading plan-folder JSON (plans, experiments.json) with simdjson's DOM: the number and
// scalar tests every loader of the folder shares, so a number is a number everywhere.
//
// Threads: any thread; pure functions.
#pragma once

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

#include "data/value.h"

namespace rankd::json {

// The DOM's types by their own names: a loader writes `using namespace json;`.
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

inline bool IsInt(simdjson::dom::element e) {
  return e.type() == simdjson::dom::element_type::INT64;
}
inline bool IsNumber(simdjson::dom::element e) {
  auto t = e.type();
  return t == simdjson::dom::element_type::INT64 || t == simdjson::dom::element_type::DOUBLE ||
         t == simdjson::dom::element_type::UINT64;
}
// REQUIRES: IsNumber(e).
inline double NumberOf(simdjson::dom::element e) {
  return IsInt(e) ? double(int64_t(e.get_int64())) : double(e.get_double());
}
// A scalar JSON value (number, string, bool) as a Value; nullopt for others.
inline std::optional<Value> Scalar(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::INT64: return Value(int64_t(e.get_int64()));
    case simdjson::dom::element_type::DOUBLE: return Value(double(e.get_double()));
    case simdjson::dom::element_type::STRING:
      return Value(std::string(std::string_view(e.get_string())));
    case simdjson::dom::element_type::BOOL: return Value(bool(e.get_bool()));
    default: return std::nullopt;
  }
}

}  // namespace rankd::json
