// Helpers of the expression tests: build row sets from literals, compile JSON text, and
// read a column back as Values. Test thread only.
#pragma once

#include <doctest/doctest.h>
#include <simdjson.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/column_builder.h"
#include "plan/expr.h"

namespace rankd::test {

template <class T>
using Cells = std::vector<std::optional<T>>;

// A column of `type` from cells (nullopt = null), appended with `append`.
template <class T, class AppendFn>
ColumnPtr ColumnOf(ColumnType type, const Cells<T>& v, AppendFn append) {
  ColumnBuilder b(type, v.size());
  for (const auto& cell : v) {
    if (cell)
      append(b, *cell);
    else
      b.AppendNulls(1);
  }
  return std::make_shared<Column>(std::move(b).Finish());
}

inline ColumnPtr I64Col(const Cells<int64_t>& v) {
  return ColumnOf(ColumnType::kI64, v, [](ColumnBuilder& b, int64_t x) { b.AppendI64(x); });
}
inline ColumnPtr F64Col(const Cells<double>& v) {
  return ColumnOf(ColumnType::kF64, v, [](ColumnBuilder& b, double x) { b.AppendF64(x); });
}
inline ColumnPtr BoolCol(const Cells<bool>& v) {
  return ColumnOf(ColumnType::kBool, v, [](ColumnBuilder& b, bool x) { b.AppendBool(x); });
}
inline ColumnPtr StrCol(const Cells<std::string>& v) {
  return ColumnOf(ColumnType::kStr, v,
                  [](ColumnBuilder& b, const std::string& x) { b.AppendStr(x); });
}

// Compiles JSON text against the columns of `rows` (their load-time types) and `params`.
struct ExprFixture {
  simdjson::dom::parser parser;
  RowSet rows;
  ParamDecls params;
  ParamValues values;
  ColumnTypes extra;  // columns typed at load but absent from `rows`

  ColumnTypes Types() const {
    ColumnTypes t = extra;
    for (size_t i = 0; i < rows.num_columns(); ++i)
      t.cols.push_back({rows.column_name(i), rows.column_at(i)->type, rows.column_at(i)->dim});
    return t;
  }
  void Param(std::string name, ColumnType t, Value def) {
    params.decls.push_back({std::move(name), t, def, {}, {}});
    values.push_back(std::move(def));
  }
  simdjson::dom::element Parse(const std::string& json) {
    simdjson::dom::element e;
    auto err = parser.parse(json).get(e);
    REQUIRE_MESSAGE(!err, "bad test JSON: " << json);
    return e;
  }
  Result<std::shared_ptr<const CompiledExpr>> Compile(const std::string& json) {
    return CompileExpr(Parse(json), Types(), params, "test");
  }
  Result<std::shared_ptr<const CompiledPred>> CompileP(const std::string& json) {
    return CompilePred(Parse(json), Types(), params, "test");
  }
  // Evaluates and returns every physical row as a Value.
  std::vector<Value> Eval(const std::string& json) { return EvalOn(json, rows); }
  std::vector<Value> EvalOn(const std::string& json, const RowSet& in) {
    auto e = Compile(json);
    REQUIRE_MESSAGE(e.has_value(), (e ? "" : e.error().message));
    Column c = *(*e)->Evaluate(in, values);
    REQUIRE(c.size() == in.physical_rows());
    REQUIRE(c.type == (*e)->type());
    std::vector<Value> out;
    for (size_t i = 0; i < c.size(); ++i) out.push_back(c.Get(i));
    return out;
  }
  Selection Select(const std::string& json) { return SelectOn(json, rows); }
  Selection SelectOn(const std::string& json, const RowSet& in) {
    auto p = CompileP(json);
    REQUIRE_MESSAGE(p.has_value(), (p ? "" : p.error().message));
    return *(*p)->Select(in, values);
  }
  std::string ExprError(const std::string& json) {
    auto e = Compile(json);
    REQUIRE_MESSAGE(!e.has_value(), "expected a load error for " << json);
    return e.error().message;
  }
  std::string PredError(const std::string& json) {
    auto p = CompileP(json);
    REQUIRE_MESSAGE(!p.has_value(), "expected a load error for " << json);
    return p.error().message;
  }
};

inline const Value kNull{std::monostate{}};
inline Value I(int64_t v) { return Value(v); }
inline Value F(double v) { return Value(v); }
inline Value S(std::string v) { return Value(std::move(v)); }
inline Value B(bool v) { return Value(v); }

}  // namespace rankd::test

inline std::string ValueString(const rankd::Value& v) {
  switch (v.index()) {
    case 0: return "null";
    case 1: return std::to_string(std::get<1>(v)) + "i";
    case 2: return std::to_string(std::get<2>(v)) + "f";
    case 3: {
      std::string s = "\"";
      s.append(std::get<3>(v)).append("\"");
      return s;
    }
    case 4: return std::get<4>(v) ? "true" : "false";
    default: return "(a list)";  // task parameters only
  }
}

// doctest prints Values and rows of Values in failure messages.
template <>
struct doctest::StringMaker<rankd::Value> {
  static doctest::String convert(const rankd::Value& v) { return ValueString(v).c_str(); }
};
template <>
struct doctest::StringMaker<std::vector<rankd::Value>> {
  static doctest::String convert(const std::vector<rankd::Value>& vs) {
    std::string s = "[";
    for (const auto& v : vs) s.append(s.size() > 1 ? ", " : "").append(ValueString(v));
    s.append("]");
    return s.c_str();
  }
};
template <>
struct doctest::StringMaker<rankd::Selection> {
  static doctest::String convert(const rankd::Selection& vs) {
    std::string s = "[";
    for (auto v : vs) s.append(s.size() > 1 ? ", " : "").append(std::to_string(v));
    s.append("]");
    return s.c_str();
  }
};
