#include "tasks/catalogue.h"

#include <charconv>

#include "core/json_escape.h"

namespace rankd {

namespace {

// The catalogue's name of a parameter type.
std::string_view KindName(ParamKind k) {
  switch (k) {
    case ParamKind::kI64: return "i64";
    case ParamKind::kF64: return "f64";
    case ParamKind::kBool: return "bool";
    case ParamKind::kStr: return "str";
    case ParamKind::kStrList: return "str_list";
    case ParamKind::kColumn: return "column";
    case ParamKind::kExprId: return "expr";
    case ParamKind::kPredId: return "pred";
    case ParamKind::kModel: return "model";
    case ParamKind::kColumnMap: return "column_map";
    case ParamKind::kStrOrMap: return "str_or_map";
    case ParamKind::kNumberMap: return "number_map";
  }
  return "?";
}

std::string Num(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string Str(std::string_view s) {
  std::string out;
  AppendJsonString(s, out);
  return out;
}

template <class T, class F>
std::string List(const std::vector<T>& xs, F each, std::string_view sep = ", ") {
  std::string out;
  for (const T& x : xs) out += (out.empty() ? "" : std::string(sep)) + each(x);
  return out;
}

std::string ValueJson(const Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "null";
        if constexpr (std::is_same_v<T, int64_t>) return std::to_string(x);
        if constexpr (std::is_same_v<T, double>) return Num(x);
        if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        if constexpr (std::is_same_v<T, std::string>) return Str(x);
        if constexpr (std::is_same_v<T, std::vector<std::string>>)
          return "[" + List(x, [](const std::string& s) { return Str(s); }) + "]";
        if constexpr (std::is_same_v<T, std::vector<float>>)
          return "[" + List(x, [](float f) { return Num(f); }) + "]";
      },
      v);
}

std::string TypeNames(const std::vector<ColumnType>& ts) {
  return "[" + List(ts, [](ColumnType t) { return Str(ColumnTypeName(t)); }) + "]";
}

std::string ParamJson(const TaskParamSpec& p) {
  std::string j = "{\"type\": " + Str(KindName(p.kind));
  if (p.required)
    j += ", \"required\": true";
  else
    j += ", \"default\": " + ValueJson(p.default_value);
  if (p.kind == ParamKind::kStrList) {
    if (p.min) j += ", \"min_items\": " + std::to_string(*p.min);
  } else {
    if (p.min) j += ", \"min\": " + std::to_string(*p.min);
    if (p.max) j += ", \"max\": " + std::to_string(*p.max);
  }
  if (p.min_f64) j += ", \"min\": " + Num(*p.min_f64);
  if (p.max_f64) j += ", \"max\": " + Num(*p.max_f64);
  if (!p.allowed.empty())
    j += ", \"values\": [" + List(p.allowed, [](const std::string& s) { return Str(s); }) + "]";
  if (p.allow_ref) j += ", \"ref\": true";
  if (p.column == TaskParamSpec::Column::kReads) j += ", \"reads\": " + TypeNames(p.column_types);
  if (p.column == TaskParamSpec::Column::kWrites) j += ", \"writes\": true";
  return j + "}";
}

std::string AddedJson(const AddedColumn& c) {
  std::string j = c.name_param ? "{\"param\": " : "{\"name\": ";
  j += Str(c.name) + ", \"type\": ";
  j += Str(c.from == ColumnFrom::kFixed ? ColumnTypeName(c.type) : ColumnFromName(c.from));
  return j + "}";
}

std::string FamilyTypeList(const std::vector<FamilyType>& ts) {
  return "[" + List(ts, [](FamilyType t) { return Str(FamilyTypeName(t)); }) + "]";
}

std::string OpJson(const TaskSpec& s) {
  std::string j = "    " + Str(s.op) + ": {\n";
  j += "      \"doc\": " + Str(s.doc) + ",\n";
  j += "      \"inputs\": {\"min\": " + std::to_string(s.min_inputs) + ", \"max\": " +
       (s.max_inputs == UINT32_MAX ? std::string("null") : std::to_string(s.max_inputs)) + "},\n";
  j += std::string("      \"test_only\": ") + (s.test_only ? "true" : "false") + ",\n";
  if (s.family_types.empty()) {
    j += "      \"family\": null,\n";
  } else {
    j += "      \"family\": {\"types\": " + FamilyTypeList(s.family_types) +
         ", \"keyed_by\": " + (s.keyed_by_user ? "\"user_id\"" : "\"input.id\"") + "},\n";
  }
  j += "      \"params\": {";
  for (size_t i = 0; i < s.params.size(); ++i)
    j += std::string(i ? "," : "") + "\n        " + Str(s.params[i].name) + ": " +
         ParamJson(s.params[i]);
  j += s.params.empty() ? "},\n" : "\n      },\n";
  j += std::string("      \"output\": {\"input\": ") + (s.keeps_input ? "true" : "false") +
       ", \"adds\": [" + List(s.adds, AddedJson) + "]}\n";
  return j + "    }";
}

// ---- markdown ----

std::string Code(std::string_view s) { return "`" + std::string(s) + "`"; }

std::string ParamCell(const TaskParamSpec& p) {
  std::string c = Code(p.name) + " " + std::string(KindName(p.kind));
  if (p.required)
    c += ", required";
  else if (!std::holds_alternative<std::monostate>(p.default_value))
    c += " (" + Code(ValueJson(p.default_value)) + ")";
  if (p.kind == ParamKind::kStrList && p.min) c += ", at least " + std::to_string(*p.min);
  if (p.kind != ParamKind::kStrList && (p.min || p.max))
    c +=
        ", " + (p.min ? std::to_string(*p.min) : "") + ".." + (p.max ? std::to_string(*p.max) : "");
  if (p.min_f64 || p.max_f64)
    c += ", " + (p.min_f64 ? Num(*p.min_f64) : "") + ".." + (p.max_f64 ? Num(*p.max_f64) : "");
  if (!p.allowed.empty()) c += ", one of " + List(p.allowed, Code);
  if (p.column == TaskParamSpec::Column::kReads)
    c +=
        p.column_types.empty()
            ? ", reads an input column"
            : ", reads an input column of " +
                  List(
                      p.column_types, [](ColumnType t) { return Code(ColumnTypeName(t)); }, " or ");
  if (p.column == TaskParamSpec::Column::kWrites) c += ", names a column it writes";
  if (p.allow_ref) c += ", **ref**";
  return c;
}

std::string OutputCell(const TaskSpec& s) {
  std::string c = s.keeps_input ? "input" : "";
  for (const AddedColumn& a : s.adds) {
    std::string type = a.from == ColumnFrom::kFixed ? std::string(ColumnTypeName(a.type))
                                                    : std::string(ColumnFromName(a.from));
    std::string col = a.name_param ? "the column named by " + Code(a.name) : Code(a.name);
    if (a.from == ColumnFrom::kFamilyFields) col = "a column per field of " + Code(a.name);
    c += (c.empty() ? "" : c == "input" ? " + " : ", ") + col + " " + type;
  }
  return c.empty() ? "input" : c;
}

std::string FamilyCell(const TaskSpec& s) {
  if (s.family_types.empty()) return "";
  return " Reads a " +
         List(
             s.family_types, [](FamilyType t) { return Code(FamilyTypeName(t)); }, " or ") +
         " family keyed by " + (s.keyed_by_user ? "the user_id." : "the input's ids.");
}

}  // namespace

std::string CatalogueJson(const TaskRegistry& r) {
  std::string j =
      "{\n  \"catalogue_version\": 1,\n  \"note\": \"generated by rankd ops --json; do not "
      "edit\",\n  \"ops\": {\n";
  const std::vector<std::string> ops = r.ops();
  for (size_t i = 0; i < ops.size(); ++i)
    j += OpJson(*r.Find(ops[i])) + (i + 1 < ops.size() ? ",\n" : "\n");
  return j + "  }\n}\n";
}

std::string CatalogueMarkdown(const TaskRegistry& r) {
  std::string t =
      "| op | inputs | parameters | output columns | what it does |\n"
      "|---|---|---|---|---|\n";
  for (const std::string& op : r.ops()) {
    const TaskSpec& s = *r.Find(op);
    std::string inputs = std::to_string(s.min_inputs);
    if (s.max_inputs == UINT32_MAX)
      inputs = "≥ " + inputs;
    else if (s.max_inputs != s.min_inputs)
      inputs += " or " + std::to_string(s.max_inputs);
    std::string params = s.params.empty() ? "none" : List(s.params, ParamCell, "; ");
    t += "| " + Code(op) + " | " + inputs + " | " + params + " | " + OutputCell(s) + " | " + s.doc +
         FamilyCell(s) + (s.test_only ? " Test-only." : "") + " |\n";
  }
  return t;
}

}  // namespace rankd
