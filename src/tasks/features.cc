// features: the listed fields of each input row's hash or json (one HMGET, or MGET for
// json, per distinct id), read through the cache (read_through.h); or of its counters,
// sums and rates at the request's time (one HMGET of the windows' buckets per distinct id).
// Threads: the run executes on the request's loop thread.
#include "tasks/read_through.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

Result<ColumnTypes> FeaturesSchema(const SchemaArgs& a) {
  if (auto ok = NeedValuesFamily(a, "features"); !ok) return Fail(ok.error());
  if (auto ok = NeedInputIds(a, a.family->id_type, "is keyed by"); !ok) return Fail(ok.error());
  ColumnTypes t = a.inputs[0];
  if (auto ok = AddFields(a, a.args.StrList("fields"), t); !ok) return Fail(ok.error());
  return t;
}

Coro<Result<RowSet>> RunFeatures(const TaskContext& ctx, RowSets in) {
  const RowSet& input = in.at(0);
  const KeyFamily& family = *ctx.node->family;
  const auto& fields = ctx.args->StrList("fields");
  std::vector<size_t> field_index(fields.size());
  for (size_t f = 0; f < fields.size(); ++f) field_index[f] = *family.FieldIndex(fields[f]);
  // A counters entry holds blocks, not fields: any field may read it.
  auto io = StartIo(ctx, family.type == FamilyType::kCounters || CacheableFields(field_index));
  if (!io) co_return Fail(io.error());
  auto ids = IdsOf(input, family);
  if (!ids) co_return Fail(ids.error());
  Distinct distinct = DistinctIds(*ids);
  if (family.type == FamilyType::kCounters) {
    auto cells = co_await ReadCounters(ctx, *io, distinct.ids, field_index);
    if (!cells) co_return Fail(std::move(cells.error()));
    co_return FeatureRows(io->src, input, *ids, distinct.reply_of, fields, field_index, *cells);
  }
  auto read = co_await ReadHashes(ctx, *io, distinct.ids, field_index, false);
  if (!read) co_return Fail(std::move(read.error()));
  if (read->all_hit)
    co_return FeatureRows(io->src, input, *ids, distinct.reply_of, fields, field_index,
                          read->found);
  co_return FeatureRows(io->src, input, *ids, distinct.reply_of, fields, field_index, read->cells);
}

}  // namespace

void RegisterOps_features(TaskRegistry& r) {
  r.Add(TaskSpec::Async(
            "features", 1, 1,
            {Endpoint(), Cache(), FamilyParam("item"),
             TaskParamSpec::Required("fields", ParamKind::kStrList).Bounds(1, std::nullopt)},
            &FeaturesSchema, &RunFeatures)
            .Doc("The input plus the listed fields of each row's key (added or replaced), null "
                 "where missing; a counters family's sums and rates at the request's time.")
            .Reads({FamilyType::kHash, FamilyType::kJson, FamilyType::kCounters})
            .Adds({AddedColumn::ByParam("fields", ColumnFrom::kFamilyFields)}));
}

}  // namespace rankd
