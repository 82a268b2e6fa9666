#include "plan/op_schema.h"

#include <cassert>
#include <cstdlib>

namespace rankd {

std::string_view ParamKindName(ParamKind k) {
  switch (k) {
    case ParamKind::kI64: return "integer";
    case ParamKind::kF64: return "number";
    case ParamKind::kBool: return "bool";
    case ParamKind::kStr: return "string";
    case ParamKind::kStrList: return "array of strings";
    case ParamKind::kColumn: return "column name";
    case ParamKind::kExprId: return "expr id";
    case ParamKind::kPredId: return "pred id";
    case ParamKind::kModel: return "model name";
    case ParamKind::kColumnMap: return "object of column names";
    case ParamKind::kStrOrMap: return "string or object of strings";
    case ParamKind::kNumberMap: return "object of numbers";
  }
  return "?";
}

ParamKind ParamKindOf(ColumnType t) {
  switch (t) {
    case ColumnType::kI64: return ParamKind::kI64;
    case ColumnType::kF64: return ParamKind::kF64;
    case ColumnType::kStr: return ParamKind::kStr;
    case ColumnType::kBool: return ParamKind::kBool;
    case ColumnType::kVec: break;  // never: a plan param is no vector (loader.cc ParseType)
  }
  return ParamKind::kI64;
}

TaskParamSpec TaskParamSpec::Required(std::string name, ParamKind kind) {
  TaskParamSpec s;
  s.name = std::move(name);
  s.kind = kind;
  s.required = true;
  return s;
}

TaskParamSpec TaskParamSpec::Optional(std::string name, ParamKind kind, Value def) {
  TaskParamSpec s;
  s.name = std::move(name);
  s.kind = kind;
  s.default_value = std::move(def);
  return s;
}

TaskParamSpec TaskParamSpec::Bounds(std::optional<int64_t> lo, std::optional<int64_t> hi) && {
  min = lo;
  max = hi;
  return std::move(*this);
}

TaskParamSpec TaskParamSpec::BoundsF64(double lo, double hi) && {
  min_f64 = lo;
  max_f64 = hi;
  return std::move(*this);
}

TaskParamSpec TaskParamSpec::Allowed(std::vector<std::string> values) && {
  allowed = std::move(values);
  return std::move(*this);
}

TaskParamSpec TaskParamSpec::Ref() && {
  allow_ref = true;
  return std::move(*this);
}

TaskParamSpec TaskParamSpec::Reads(std::vector<ColumnType> types) && {
  column = Column::kReads;
  column_types = std::move(types);
  return std::move(*this);
}

TaskParamSpec TaskParamSpec::Writes() && {
  column = Column::kWrites;
  return std::move(*this);
}

std::string_view ColumnFromName(ColumnFrom f) {
  switch (f) {
    case ColumnFrom::kFixed: return "fixed";
    case ColumnFrom::kExpr: return "expr";
    case ColumnFrom::kFamilyId: return "family.id";
    case ColumnFrom::kFamilyMembers: return "family.members";
    case ColumnFrom::kFamilyFields: return "family.fields";
    case ColumnFrom::kInputId: return "input.id";
  }
  return "?";
}

size_t TaskArgs::Index(std::string_view name) const {
  for (size_t i = 0; i < specs_->size(); ++i)
    if ((*specs_)[i].name == name) return i;
  assert(false && "TaskArgs: op does not declare this parameter");
  std::abort();
}

}  // namespace rankd
