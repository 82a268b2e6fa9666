// viewer: the request's viewer, one row read from the user_id's key of a hash or json
// family (HGETALL, or MGET for json), the whole value kept so that one cache entry
// serves every viewer node of the family (read_through.h); or of a counters family keyed
// by the user, its sums and rates at the request's time (always one row: a user without
// events has sums of 0).
// Threads: the run executes on the request's loop thread.
#include "tasks/read_through.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

Result<ColumnTypes> ViewerSchema(const SchemaArgs& a) {
  if (auto ok = NeedValuesFamily(a, "viewer"); !ok) return Fail(ok.error());
  if (a.family->counters && a.family->counters->by != CountersSpec::By::kUser)
    return Fail(Error::BadRequest("params.family: " + Types(*a.family) +
                                  " counts by item: viewer reads a family keyed by the user (by: "
                                  "\"user\")"));
  ColumnTypes t;
  t.cols.emplace_back("id", a.family->id_type);
  if (auto ok = AddFields(a, a.args.StrList("fields"), t); !ok) return Fail(ok.error());
  return t;
}

Coro<Result<RowSet>> RunViewer(const TaskContext& ctx, RowSets) {
  const KeyFamily& family = *ctx.node->family;
  // The node's columns: `fields`, or every declared field.
  const std::vector<std::string>& asked = ctx.args->StrList("fields");
  std::vector<size_t> columns;
  if (asked.empty()) {
    for (size_t f = 0; f < family.fields.size(); ++f) columns.push_back(f);
  } else {
    for (const std::string& name : asked) columns.push_back(*family.FieldIndex(name));
  }
  if (family.type == FamilyType::kCounters) {
    auto io = StartIo(ctx);
    if (!io) co_return Fail(io.error());
    const IdRef id = ctx.user_id;
    auto cells = co_await ReadCounters(ctx, *io, std::span<const IdRef>(&id, 1), columns);
    if (!cells) co_return Fail(std::move(cells.error()));
    // ViewerRows reads field f at cells[f]: spread the columns' values out.
    CachedFields by_field;
    by_field.resize(family.fields.size());
    for (size_t c = 0; c < columns.size(); ++c) by_field.Set(columns[c], *cells, c);
    co_return ViewerRows(io->src, id, columns, true, by_field);
  }
  // The whole hash is read (HGETALL, or the json object) and kept: the same entry serves
  // every viewer node of that family, whatever fields it shows.
  std::vector<size_t> all(family.fields.size());
  for (size_t f = 0; f < all.size(); ++f) all[f] = f;
  auto io = StartIo(ctx, CacheableFields(all));
  if (!io) co_return Fail(io.error());
  const IdRef id = ctx.user_id;
  auto read = co_await ReadHashes(ctx, *io, std::span<const IdRef>(&id, 1), all, true);
  if (!read) co_return Fail(std::move(read.error()));
  if (read->all_hit) {  // the entry's fields, copied: ViewerRows reads cells
    read->cells.resize(all.size());
    for (size_t f : all) read->found[0].CopyField(f, read->cells, f);
  }
  co_return ViewerRows(io->src, id, columns, read->exists[0] != 0, read->cells);
}

}  // namespace

void RegisterOps_viewer(TaskRegistry& r) {
  using C = AddedColumn;
  r.Add(
      TaskSpec::Async(
          "viewer", 0, 0,
          {Endpoint(), Cache(), FamilyParam("user"),
           TaskParamSpec::Optional("fields", ParamKind::kStrList, std::vector<std::string>{})},
          &ViewerSchema, &RunViewer)
          .Doc("The request's viewer: one row, its user_id's fields (all, or those listed), "
               "none when the key does not exist (a counters family's: always one, sums and rates "
               "at the request's time).")
          .Reads({FamilyType::kHash, FamilyType::kJson, FamilyType::kCounters}, /*by_user=*/true)
          .Replaces({C::Named("id", ColumnFrom::kFamilyId),
                     C::ByParam("fields", ColumnFrom::kFamilyFields)}));
}

}  // namespace rankd
