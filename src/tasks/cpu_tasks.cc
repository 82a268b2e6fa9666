// The small CPU tasks: vm, filter, take, dedupe (sort.cc and concat.cc hold the bigger
// ones). None copies a column it does not create: filter and take only produce a new
// selection vector, vm adds one column and shares the rest.
#include <algorithm>
#include <bit>
#include <type_traits>

#include "core/distinct_keys.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

Result<ColumnTypes> ConcatSchema(const SchemaArgs& a);       // concat.cc
Result<RowSet> RunSort(const TaskContext& ctx, RowSets in);  // sort.cc
Result<RowSet> RunConcat(const TaskContext& ctx, RowSets in);

namespace {

Result<ColumnTypes> VmSchema(const SchemaArgs& a) {
  ColumnTypes t = a.inputs[0];
  SetColumnType(t, a.args.Str("out_key"), a.expr->type());
  return t;
}

Result<RowSet> RunVm(const TaskContext& ctx, RowSets in) {
  // Polled before the run starts (a job abandoned while it queued does not evaluate),
  // then by the VM between blocks of rows.
  if (ctx.cancelled()) return Fail(CancelledError("vm"));
  RowSet out = std::move(in[0]);
  std::optional<Column> col = ctx.node->expr->Evaluate(out, *ctx.params, CancelCheckOf(ctx));
  if (!col) return Fail(CancelledError("vm"));
  out.SetColumn(ctx.args->Str("out_key"), Share(std::move(*col)));
  return out;
}

Result<RowSet> RunFilter(const TaskContext& ctx, RowSets in) {
  if (ctx.cancelled()) return Fail(CancelledError("filter"));
  std::optional<Selection> rows = ctx.node->pred->Select(in[0], *ctx.params, CancelCheckOf(ctx));
  if (!rows) return Fail(CancelledError("filter"));
  return in[0].WithSelection(std::move(*rows));
}

Result<RowSet> RunTake(const TaskContext& ctx, RowSets in) {
  return in[0].Take(static_cast<size_t>(ctx.args->I64("count")));
}

// The column types sort and dedupe order or compare rows by: any but a vector.
const std::vector<ColumnType> kKeyTypes = {ColumnType::kI64, ColumnType::kF64, ColumnType::kStr,
                                           ColumnType::kBool};

// sort, dedupe: the input's columns, of which `key` must be one (not a vector).

Result<ColumnTypes> KeyedSchema(const SchemaArgs& a) {
  const std::string& key = a.args.Str("key");
  const TypedColumn* col = a.inputs[0].get(key);
  if (!col)
    return Fail(Error::BadRequest("params.key: the input has no column '" + key + "' (it has " +
                                  a.inputs[0].names() + ")"));
  if (col->type == ColumnType::kVec)
    return Fail(Error::BadRequest("params.key: column '" + key + "' is " +
                                  TypeText(col->type, col->dim) + "; " + a.op->op +
                                  " takes an i64, f64, str or bool column"));
  return a.inputs[0];
}

// Keeps the first logical row of each distinct key value; all nulls count as one value.
template <class Key, class KeyOf>
Selection FirstOfEach(const RowSet& rs, const Column& col, KeyOf key_of) {
  // One block rather than a heap node per key: DistinctKeys for 64-bit keys,
  // DistinctStrings for strings.
  using Set =
      std::conditional_t<std::is_same_v<Key, std::string_view>, DistinctStrings, DistinctKeys<Key>>;
  Set seen(rs.size());
  bool seen_null = false;
  Selection keep;
  keep.reserve(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    uint32_t r = rs.row(i);
    bool fresh = col.valid(r) ? seen.Add(key_of(r)).first : !std::exchange(seen_null, true);
    if (fresh) keep.push_back(r);
  }
  return keep;
}

Result<RowSet> RunDedupe(const TaskContext& ctx, RowSets in) {
  const RowSet& rs = in[0];
  auto key = KeyColumn(ctx, rs, "dedupe");
  if (!key) return Fail(key.error());
  const Column* col = *key;
  Selection keep;
  switch (col->type) {
    case ColumnType::kI64:
      keep = FirstOfEach<int64_t>(rs, *col, [&](uint32_t r) { return col->i64[r]; });
      break;
    case ColumnType::kF64:  // by value: +0.0 and -0.0 are one key
      keep = FirstOfEach<uint64_t>(rs, *col, [&](uint32_t r) {
        double d = col->f64[r];
        return std::bit_cast<uint64_t>(d == 0.0 ? 0.0 : d);
      });
      break;
    case ColumnType::kBool:
      keep = FirstOfEach<int64_t>(rs, *col, [&](uint32_t r) { return int64_t{col->b[r]}; });
      break;
    case ColumnType::kStr:
      keep = FirstOfEach<std::string_view>(rs, *col, [&](uint32_t r) { return col->str(r); });
      break;
    case ColumnType::kVec: return Fail(Error::Internal("dedupe: a vector key"));  // typed at load
  }
  if (keep.size() == rs.size()) return std::move(in[0]);
  return rs.WithSelection(std::move(keep));
}

}  // namespace

void RegisterOps_cpu_tasks(TaskRegistry& r) {
  using P = TaskParamSpec;
  using S = TaskSpec;
  using C = AddedColumn;
  r.Add(S::Cpu("vm", 1, 1,
               {P::Required("out_key", ParamKind::kColumn).Writes(),
                P::Required("expr", ParamKind::kExprId)},
               &VmSchema, &RunVm)
            .Doc("Evaluates an expression for every selected row into the column out_key "
                 "(added or replaced).")
            .Adds({C::ByParam("out_key", ColumnFrom::kExpr)}));
  r.Add(S::Cpu("filter", 1, 1, {P::Required("pred", ParamKind::kPredId)}, &SchemaSameAsInput,
               &RunFilter)
            .Doc("Keeps the rows where the predicate is true, in their order."));
  r.Add(S::Cpu("sort", 1, 1,
               {P::Required("key", ParamKind::kColumn).Reads(kKeyTypes),
                P::Optional("order", ParamKind::kStr, std::string("desc"))
                    .Allowed({"desc", "asc"})
                    .Ref()},
               &KeyedSchema, &RunSort)
            .Doc("Sorts the rows by one column, stably, nulls last in either order."));
  r.Add(S::Cpu("take", 1, 1, {P::Required("count", ParamKind::kI64).Bounds(1, 10000).Ref()},
               &SchemaSameAsInput, &RunTake)
            .Doc("Keeps the first count rows."));
  r.Add(S::Cpu("concat", 2, UINT32_MAX, {}, &ConcatSchema, &RunConcat)
            .Doc("The rows of each input in the listed order; the columns are the union, cells "
                 "an input lacks null."));
  r.Add(S::Cpu("dedupe", 1, 1,
               {P::Optional("key", ParamKind::kColumn, std::string("id")).Reads(kKeyTypes)},
               &KeyedSchema, &RunDedupe)
            .Doc("Keeps the first row of each distinct key value; all nulls are one value."));
}

}  // namespace rankd
