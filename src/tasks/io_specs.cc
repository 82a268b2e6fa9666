// The IO tasks' specs (docs/plan.md task table, docs/data.md types). Their runs live in
// io_tasks.cc; until installed they fail with `unavailable`.
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

TaskParamSpec Endpoint() {
  return TaskParamSpec::Optional("endpoint", ParamKind::kStr, std::string("redis_default"));
}
// `cache`: read through the shard's cache (docs/cache.md).
TaskParamSpec Cache() { return TaskParamSpec::Optional("cache", ParamKind::kBool, false); }
TaskParamSpec Count(std::string name, int64_t def, int64_t lo, int64_t hi) {
  return TaskParamSpec::Optional(std::move(name), ParamKind::kI64, def).Bounds(lo, hi).Ref();
}

Result<ColumnTypes> ViewerSchema(const SchemaArgs& a) {
  ColumnTypes t = *SchemaIdOnly(a);
  for (const auto& f : UserFields()) t.cols.emplace_back(f, *UserFieldType(f));
  return t;
}

Result<ColumnTypes> MediaSchema(const SchemaArgs& a) {
  ColumnTypes t = *SchemaIdOnly(a);
  t.cols.emplace_back("author", ColumnType::kI64);
  return t;
}

Result<ColumnTypes> FeaturesSchema(const SchemaArgs& a) {
  ColumnTypes t = a.inputs[0];
  for (const auto& f : a.args.StrList("fields")) SetColumnType(t, f, *ItemFieldType(f));
  return t;
}

Task<Result<RowSet>> NotBuilt(std::string op) {
  co_return Fail(Error::Unavailable(op + ": the Redis-backed task is not built yet"));
}

// Until io_tasks.cc installs the real run, the op answers `unavailable`.
TaskSpec Io(std::string op, uint32_t inputs, std::vector<TaskParamSpec> params, SchemaFn out) {
  TaskSpec s = TaskSpec::Async(op, inputs, inputs, std::move(params), out,
                               [op](const TaskContext&, RowSets) { return NotBuilt(op); });
  s.is_io = true;
  return s;
}

}  // namespace

void RegisterIoTaskSpecs(TaskRegistry& r) {
  r.Add(Io("viewer", 0, {Endpoint(), Cache()}, &ViewerSchema));
  r.Add(Io("follow", 1, {Endpoint(), Cache(), Count("fanout", 100, 1, 1000)}, &SchemaIdOnly));
  r.Add(
      Io("recommendation", 1, {Endpoint(), Cache(), Count("fanout", 100, 1, 1000)}, &SchemaIdOnly));
  r.Add(Io("media", 1, {Endpoint(), Cache(), Count("per_author", 10, 1, 100)}, &MediaSchema));
  r.Add(Io("features", 1,
           {Endpoint(), Cache(),
            TaskParamSpec::Required("fields", ParamKind::kStrList)
                .Bounds(1, std::nullopt)
                .Allowed(ItemFields())},
           &FeaturesSchema));
  r.Add(Io("seen_filter", 1, {Endpoint()}, &SchemaSameAsInput));
}

}  // namespace rankd
