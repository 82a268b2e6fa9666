// OpSchema: the load-time half of a task — arity, parameters (types, defaults, bounds)
// and the output columns — which is all the plan loader needs to validate and type a
// plan. The run half (coroutine or CPU function) lives in src/tasks/task.h.
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
// folder (bound at load: PlanNode::model). kColumnMap is a JSON object of strings (model
// feature -> column), held in TaskArgs as a list of key, value, key, value, ...
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

  // Builders: TaskParamSpec::Optional("count", ParamKind::kI64, int64_t{10}).Bounds(0, 100).Ref()
  static TaskParamSpec Required(std::string name, ParamKind kind);
  static TaskParamSpec Optional(std::string name, ParamKind kind, Value def);
  TaskParamSpec Bounds(std::optional<int64_t> lo, std::optional<int64_t> hi) &&;
  TaskParamSpec BoundsF64(double lo, double hi) &&;
  TaskParamSpec Allowed(std::vector<std::string> values) &&;
  TaskParamSpec Ref() &&;
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
struct SchemaArgs {
  std::span<const ColumnTypes> inputs;          // in listed order
  std::span<const std::string_view> input_ids;  // node ids of the inputs, same order
  const TaskArgs& args;                         // literals; a `{"param"}` slot holds its default
  const CompiledExpr* expr = nullptr;           // the compiled kExprId param, if the op has one
  const KeyFamily* family = nullptr;  // the schema family of its `family` param, if it has one
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
