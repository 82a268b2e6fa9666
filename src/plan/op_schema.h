// OpSchema: the load-time half of a task — arity, parameters (types, defaults, bounds)
// and the output columns — which is all the plan loader needs to validate and type a
// plan, and the op's entry in the catalogue (`rankd ops --json`, tasks/catalogue.h) that
// the plan DSL, the console and docs/plan.md are checked against. The run half
// (coroutine or CPU function) lives in src/tasks/task.h.
// Immutable once registered: any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error.h"
#include "plan/expr.h"
#include "plan/schema.h"

namespace rankd {

// What a task parameter holds. kColumn is a column name, kExprId/kPredId name entries of
// the plan's expr_table/pred_table (compiled at load), kModel names a model of the plan
// folder (bound at load: PlanNode::model). kColumnMap is a JSON object whose values are
// column names or lists of them (model feature or ONNX input -> columns), held in
// TaskArgs as a list of key, column, key, column, ... (a list repeats its key once per
// column, in order). kNumberMap is a JSON object of numbers (column -> number), held as
// key, number, ... with each number as the shortest text that reads back to the same
// double.
// kStrOrMap is a string or a JSON object of strings (ann's exclude: a node id, or
// {"family": NAME}), held as a list: [the string], or key, value, ... (none: empty).
enum class ParamKind : uint8_t {
  kI64,
  kF64,
  kBool,
  kStr,
  kStrList,
  kColumn,
  kExprId,
  kPredId,
  kModel,
  kColumnMap,
  kStrOrMap,
  kNumberMap,
};

std::string_view ParamKindName(ParamKind k);
// The kind of a parameter that takes values of column type `t`.
ParamKind ParamKindOf(ColumnType t);

struct TaskParamSpec {
  std::string name;
  ParamKind kind = ParamKind::kI64;
  bool required = false;                   // else default_value applies
  Value default_value;                     // of `kind`
  std::optional<int64_t> min, max;         // kI64: bounds, inclusive; kStrList: min length
  std::optional<double> min_f64, max_f64;  // kF64: bounds, inclusive
  std::vector<std::string> allowed;        // kStr: the only values; kStrList: allowed members
  // Whether `{"param": name}` may stand for the value. Parameters that decide the output
  // columns (column names, expr ids, field lists) must be literals so that a plan's
  // types are fixed at load.
  bool allow_ref = false;
  // Whether a kColumn parameter names a column of the first input the op reads (then
  // `column_types` lists the types it takes; empty: any), or a column the op writes
  // (kColumn or kStr: vm's out_key, media's source_as). Catalogue facts; an op whose
  // output is SchemaAsDeclared (tasks/schemas.h) also has them checked at load.
  enum class Column : uint8_t { kNone, kReads, kWrites };
  Column column = Column::kNone;
  std::vector<ColumnType> column_types;

  // Builders: TaskParamSpec::Optional("count", ParamKind::kI64, int64_t{10}).Bounds(0, 100).Ref()
  static TaskParamSpec Required(std::string name, ParamKind kind);
  static TaskParamSpec Optional(std::string name, ParamKind kind, Value def);
  TaskParamSpec Bounds(std::optional<int64_t> lo, std::optional<int64_t> hi) &&;
  TaskParamSpec BoundsF64(double lo, double hi) &&;
  TaskParamSpec Allowed(std::vector<std::string> values) &&;
  TaskParamSpec Ref() &&;
  TaskParamSpec Reads(std::vector<ColumnType> types = {}) &&;
  TaskParamSpec Writes() &&;
};

// A column an op adds to its output, as the catalogue states it: its name is fixed, or
// the value of a parameter (`name_param`: out_key, score_as; an empty value adds none);
// its type is fixed, or one of the small vocabulary of types a node's params decide
// (ColumnFrom). kFamilyFields stands for one column per field the parameter lists.
enum class ColumnFrom : uint8_t {
  kFixed,          // `type`
  kExpr,           // the type of the node's expression (vm)
  kFamilyId,       // the id type of the family the node reads
  kFamilyMembers,  // the members' type of that family (list, zset, set)
  kFamilyFields,   // each listed field's declared type (bool as i64)
  kInputId,        // the type of the input's id column
};
std::string_view ColumnFromName(ColumnFrom f);  // "f64", "expr", "family.id", ...

struct AddedColumn {
  std::string name;  // the column, or with name_param the parameter naming it
  bool name_param = false;
  ColumnFrom from = ColumnFrom::kFixed;
  ColumnType type = ColumnType::kF64;  // kFixed

  static AddedColumn Named(std::string name, ColumnFrom from, ColumnType t = ColumnType::kF64) {
    return {std::move(name), false, from, t};
  }
  static AddedColumn ByParam(std::string param, ColumnFrom from, ColumnType t = ColumnType::kF64) {
    return {std::move(param), true, from, t};
  }
};

// A node's task parameters, in the order of its op's TaskParamSpec list. A value is
// monostate when absent (an optional param left out).
class TaskArgs {
 public:
  TaskArgs() = default;
  explicit TaskArgs(const std::vector<TaskParamSpec>* specs)
      : specs_(specs), values_(specs->size()) {}

  // By name: a linear scan over the op's few parameters.
  // REQUIRES: the op declares `name` with the matching kind (a bug otherwise: asserts).
  int64_t I64(std::string_view name) const { return std::get<int64_t>(values_[Index(name)]); }
  double F64(std::string_view name) const { return std::get<double>(values_[Index(name)]); }
  bool Bool(std::string_view name) const { return std::get<bool>(values_[Index(name)]); }
  const std::string& Str(std::string_view name) const {
    return std::get<std::string>(values_[Index(name)]);
  }
  const std::vector<std::string>& StrList(std::string_view name) const {
    return std::get<std::vector<std::string>>(values_[Index(name)]);
  }

  size_t size() const { return values_.size(); }
  const Value& at(size_t i) const { return values_[i]; }
  Value& at(size_t i) { return values_[i]; }
  const TaskParamSpec& spec(size_t i) const { return (*specs_)[i]; }
  // Position of `name` in the op's parameter list. REQUIRES: the op declares it.
  size_t Index(std::string_view name) const;

 private:
  const std::vector<TaskParamSpec>* specs_ = nullptr;
  std::vector<Value> values_;
};

// What an op's output-schema function sees at load.
struct OpSchema;
struct SchemaArgs {
  std::span<const ColumnTypes> inputs;          // in listed order
  std::span<const std::string_view> input_ids;  // node ids of the inputs, same order
  const TaskArgs& args;                         // literals; a `{"param"}` slot holds its default
  const CompiledExpr* expr = nullptr;           // the compiled kExprId param, if the op has one
  const KeyFamily* family = nullptr;  // the schema family of its `family` param, if it has one
  const OpSchema* op = nullptr;       // the node's op
  const Schema* schema = nullptr;     // the plan's schema (families, indexes)
};

// The node's output columns, or an error whose message names the field (the loader
// prefixes the file and node).
using SchemaFn = Result<ColumnTypes> (*)(const SchemaArgs&);

struct OpSchema {
  std::string op;
  uint32_t min_inputs = 0;
  uint32_t max_inputs = 0;  // UINT32_MAX: unbounded
  std::vector<TaskParamSpec> params;
  SchemaFn output = nullptr;
  bool is_io = false;
  // Its `family` param's family is keyed by the request's user_id (viewer, seen_filter):
  // the family's id type is the plan's user_id type.
  bool keyed_by_user = false;
  // An op for tests and benchmarks only (sleep, busy_cpu, fixed_source): a plan using it
  // loads only from a catalog whose test_ops_enabled() is true (rankd --enable-test-ops),
  // so that a production server cannot be made to sleep or spin by a plan.
  bool test_only = false;
  // It searches an index of the schema (ann): a request of a plan holding it keeps the
  // process's index set it started with (Plan::reads_indexes).
  bool reads_index = false;

  // The catalogue's description of the op (SchemaAsDeclared computes the output from it;
  // other ops' `output` functions must agree with it).
  std::string doc;                       // one line: what the op does
  std::vector<FamilyType> family_types;  // the family types its `family` may name; none: no IO
  bool keeps_input = true;  // output = the first input's columns + adds; else adds only
  std::vector<AddedColumn> adds;
};

// Where the loader looks ops up. Implemented by TaskRegistry (src/tasks/task.h).
class OpCatalog {
 public:
  virtual ~OpCatalog() = default;
  virtual const OpSchema* FindOp(std::string_view op) const = 0;  // nullptr: unknown
  // Whether plans may use the ops marked test_only; when not, the loader refuses them.
  virtual bool test_ops_enabled() const = 0;
};

}  // namespace rankd
