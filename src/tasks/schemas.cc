#include "tasks/schemas.h"

#include <algorithm>

namespace rankd {

Result<ColumnTypes> SchemaSameAsInput(const SchemaArgs& a) {
  if (a.inputs.empty()) return SchemaIdOnly(a);
  return a.inputs[0];
}

Result<ColumnTypes> SchemaIdOnly(const SchemaArgs&) {
  ColumnTypes t;
  t.cols.emplace_back("id", ColumnType::kI64);
  return t;
}

Result<ColumnTypes> SchemaAsDeclared(const SchemaArgs& a) {
  for (size_t i = 0; i < a.args.size(); ++i) {
    const TaskParamSpec& p = a.args.spec(i);
    if (p.column != TaskParamSpec::Column::kReads) continue;
    const std::string& name = std::get<std::string>(a.args.at(i));
    std::optional<ColumnType> t = a.inputs.empty() ? std::nullopt : a.inputs[0].find(name);
    if (!t)
      return Fail(Error::BadRequest("params." + p.name + ": the input has no column '" + name +
                                    "' (it has " + (a.inputs.empty() ? "" : a.inputs[0].names()) +
                                    ")"));
    if (p.column_types.empty() || std::ranges::find(p.column_types, *t) != p.column_types.end())
      continue;
    std::string want;
    for (ColumnType c : p.column_types)
      want += (want.empty() ? "" : " or ") + std::string(ColumnTypeName(c));
    return Fail(Error::BadRequest("params." + p.name + ": column '" + name + "' is " +
                                  std::string(ColumnTypeName(*t)) + "; " + a.op->op + " takes an " +
                                  want + " column"));
  }
  ColumnTypes out;
  if (a.op->keeps_input) out = *SchemaSameAsInput(a);
  for (const AddedColumn& c : a.op->adds) {
    const std::string& name = c.name_param ? a.args.Str(c.name) : c.name;
    if (name.empty()) continue;
    if (c.from == ColumnFrom::kFixed)
      SetColumnType(out, name, c.type);
    else if (c.from == ColumnFrom::kExpr && a.expr)
      SetColumnType(out, name, a.expr->type());
    else
      return Fail(Error::Internal(a.op->op + ": its column '" + name +
                                  "' is typed by a family or the input; SchemaAsDeclared cannot"));
  }
  return out;
}

void SetColumnType(ColumnTypes& t, std::string_view name, ColumnType type, uint32_t dim) {
  for (TypedColumn& c : t.cols) {
    if (c.name == name) {
      c.type = type;
      c.dim = dim;
      return;
    }
  }
  t.cols.push_back({std::string(name), type, dim});
}

TaskParamSpec Endpoint() {
  return TaskParamSpec::Optional("endpoint", ParamKind::kStr, std::string("redis_default"));
}
TaskParamSpec FamilyParam(std::string def) {
  return TaskParamSpec::Optional("family", ParamKind::kStr, std::move(def));
}
TaskParamSpec Cache() { return TaskParamSpec::Optional("cache", ParamKind::kBool, false); }
TaskParamSpec Count(std::string name, int64_t def, int64_t lo, int64_t hi) {
  return TaskParamSpec::Optional(std::move(name), ParamKind::kI64, def).Bounds(lo, hi).Ref();
}
TaskParamSpec ColumnName(std::string name, std::string def) {
  return TaskParamSpec::Optional(std::move(name), ParamKind::kStr, std::move(def)).Writes();
}

std::string Types(const KeyFamily& f) {
  return "family '" + f.name + "' (" + std::string(FamilyTypeName(f.type)) + ")";
}

Result<void> NeedType(const SchemaArgs& a, std::initializer_list<FamilyType> types,
                      std::string_view what) {
  for (FamilyType t : types)
    if (a.family->type == t) return {};
  return Fail(Error::BadRequest("params.family: " + Types(*a.family) +
                                " cannot be read by this op (" + std::string(what) + ")"));
}

Result<void> NeedValuesFamily(const SchemaArgs& a, std::string_view op) {
  return NeedType(a, {FamilyType::kHash, FamilyType::kJson, FamilyType::kCounters},
                  std::string(op) + " reads hash, json or counters");
}

Result<void> NeedInputIds(const SchemaArgs& a, ColumnType want, std::string_view of) {
  std::optional<ColumnType> have;
  if (!a.inputs.empty()) have = a.inputs[0].find("id");
  if (!have) return Fail(Error::BadRequest("input has no 'id' column"));
  if (*have != want)
    return Fail(Error::BadRequest("params.family: family '" + a.family->name + "' " +
                                  std::string(of) + " " + std::string(ColumnTypeName(want)) +
                                  " ids but the input's id column is " +
                                  std::string(ColumnTypeName(*have))));
  return {};
}

Result<void> ValidColumnName(std::string_view param, const std::string& name) {
  if (name.empty() || name.size() > 64 || name.find_first_of("\"\\") != std::string::npos)
    return Fail(Error::BadRequest("params." + std::string(param) + ": '" + name +
                                  "' is not a column name (1..64 bytes)"));
  return {};
}

Result<void> AddFields(const SchemaArgs& a, const std::vector<std::string>& fields,
                       ColumnTypes& t) {
  if (fields.empty()) {
    for (const SchemaField& f : a.family->fields)
      SetColumnType(t, f.name, ColumnTypeOf(f.type), f.dim);
    return {};
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    auto idx = a.family->FieldIndex(fields[i]);
    if (!idx) {
      std::string known;
      for (const SchemaField& f : a.family->fields) known += (known.empty() ? "" : ", ") + f.name;
      return Fail(Error::BadRequest("params.fields: '" + fields[i] +
                                    "' is not a field of family '" + a.family->name +
                                    "' (declared: " + known + ")"));
    }
    for (size_t j = 0; j < i; ++j)
      if (fields[j] == fields[i])
        return Fail(Error::BadRequest("params.fields: '" + fields[i] + "' is listed twice"));
    if (fields[i] == "id")
      return Fail(Error::BadRequest("params.fields: 'id' would replace the id column"));
    const SchemaField& f = a.family->fields[*idx];
    SetColumnType(t, fields[i], ColumnTypeOf(f.type), f.dim);
  }
  return {};
}

}  // namespace rankd
