#include <cassert>

#include "tasks/task.h"

namespace rankd {

namespace {

TaskSpec WithSchema(std::string op, uint32_t min_inputs, uint32_t max_inputs,
                    std::vector<TaskParamSpec> params, SchemaFn output, RunKind kind) {
  TaskSpec s;
  s.op = std::move(op);
  s.min_inputs = min_inputs;
  s.max_inputs = max_inputs;
  s.params = std::move(params);
  s.output = output;
  s.kind = kind;
  return s;
}

}  // namespace

TaskSpec TaskSpec::Cpu(std::string op, uint32_t min_inputs, uint32_t max_inputs,
                       std::vector<TaskParamSpec> params, SchemaFn output, CpuRunFn run,
                       RunKind kind) {
  assert(kind != RunKind::kAsync);
  TaskSpec s = WithSchema(std::move(op), min_inputs, max_inputs, std::move(params), output, kind);
  s.run_cpu = std::move(run);
  return s;
}

TaskSpec TaskSpec::Async(std::string op, uint32_t min_inputs, uint32_t max_inputs,
                         std::vector<TaskParamSpec> params, SchemaFn output, AsyncRunFn run) {
  TaskSpec s =
      WithSchema(std::move(op), min_inputs, max_inputs, std::move(params), output, RunKind::kAsync);
  s.run_async = std::move(run);
  return s;
}

void TaskRegistry::Add(TaskSpec spec) {
  assert(!by_op_.contains(spec.op));
  specs_.push_back(std::move(spec));
  by_op_[specs_.back().op] = &specs_.back();
}

TaskSpec TaskSpec::Doc(std::string line) && {
  doc = std::move(line);
  return std::move(*this);
}

TaskSpec TaskSpec::Reads(std::vector<FamilyType> types, bool by_user) && {
  family_types = std::move(types);
  keyed_by_user = by_user;
  is_io = true;
  return std::move(*this);
}

TaskSpec TaskSpec::ReadsIndex() && {
  reads_index = true;
  return std::move(*this);
}

TaskSpec TaskSpec::Adds(std::vector<AddedColumn> columns) && {
  adds = std::move(columns);
  keeps_input = true;
  return std::move(*this);
}

TaskSpec TaskSpec::Replaces(std::vector<AddedColumn> columns) && {
  adds = std::move(columns);
  keeps_input = false;
  return std::move(*this);
}

TaskSpec TaskSpec::TestOnly() && {
  test_only = true;
  return std::move(*this);
}

const TaskSpec* TaskRegistry::Find(std::string_view op) const {
  auto it = by_op_.find(std::string(op));
  return it == by_op_.end() ? nullptr : it->second;
}

std::vector<std::string> TaskRegistry::ops() const {
  std::vector<std::string> out;
  for (const auto& s : specs_) out.push_back(s.op);
  return out;
}

namespace {

// Built in place: plans keep pointers into the registry, so it never moves.
struct BuiltinTasks {
  TaskRegistry r;
  explicit BuiltinTasks(bool test_ops_enabled) : r(test_ops_enabled) { RegisterBuiltinOps(r); }
};

}  // namespace

const TaskRegistry& TaskRegistry::Default() {
  static const BuiltinTasks tasks(/*test_ops_enabled=*/false);
  return tasks.r;
}

const TaskRegistry& TaskRegistry::WithTestOps() {
  static const BuiltinTasks tasks(/*test_ops_enabled=*/true);
  return tasks.r;
}

}  // namespace rankd
