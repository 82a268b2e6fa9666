// follow, recommendation, media: the head of each input row's list or zset (LRANGE, or
// ZRANGE ... REV for a zset), members in input order, read through the cache
// (read_through.h). media also keeps which input row each member came from.
// Threads: the runs execute on the request's loop thread.
#include "data/column_builder.h"
#include "tasks/read_through.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// follow, recommendation, media: the members of each input row's list or zset.
Result<ColumnTypes> ListSchema(const SchemaArgs& a, bool media) {
  if (auto ok = NeedType(a, {FamilyType::kList, FamilyType::kZset}, "it reads list or zset"); !ok)
    return Fail(ok.error());
  if (auto ok = NeedInputIds(a, a.family->id_type, "is keyed by"); !ok) return Fail(ok.error());
  ColumnTypes t;
  t.cols.emplace_back("id", a.family->members_type);
  if (media) {
    const std::string& source = a.args.Str("source_as");
    if (auto ok = ValidColumnName("source_as", source); !ok) return Fail(ok.error());
    if (source == "id") return Fail(Error::BadRequest("params.source_as: must not be 'id'"));
    SetColumnType(t, source, a.family->id_type);
  }
  const std::string& score = a.args.Str("score_as");
  if (!score.empty()) {
    if (a.family->type != FamilyType::kZset)
      return Fail(Error::BadRequest("params.score_as: " + Types(*a.family) +
                                    " has no scores (only a zset family does)"));
    if (auto ok = ValidColumnName("score_as", score); !ok) return Fail(ok.error());
    if (score == "id" || (media && score == a.args.Str("source_as")))
      return Fail(Error::BadRequest("params.score_as: '" + score + "' is already a column"));
    SetColumnType(t, score, ColumnType::kF64);
  }
  return t;
}
Result<ColumnTypes> FollowSchema(const SchemaArgs& a) { return ListSchema(a, false); }
Result<ColumnTypes> MediaSchema(const SchemaArgs& a) { return ListSchema(a, true); }

// The list members' rows: id, the score_as column, and (media) the source_as column.
Coro<Result<RowSet>> RunList(const TaskContext& ctx, RowSets in, std::string_view count_param,
                             bool media) {
  auto io = StartIo(ctx);
  if (!io) co_return Fail(io.error());
  auto ids = IdsOf(in.at(0), *io->family);
  if (!ids) co_return Fail(ids.error());
  const std::string& score_as = ctx.args->Str("score_as");
  auto read = co_await ReadLists(ctx, *io, *ids, ctx.args->I64(count_param), !score_as.empty(),
                                 /*with_from=*/media);
  if (!read) co_return Fail(std::move(read.error()));
  const size_t n = read->size();
  RowSet out;
  out.SetColumn("id", IdColumn(*read, io->family->members_type));
  if (media) {  // the input id of every row, head by head
    if (ids->type == ColumnType::kI64) {
      PoolVector<int64_t> from(n);
      size_t r = 0;
      for (const ListRows::Head& h : read->heads)
        for (; r < h.end; ++r) from[r] = ids->ids[h.input];
      out.SetColumn(ctx.args->Str("source_as"), Share(Column::I64(std::move(from))));
    } else {
      ColumnBuilder col(ColumnType::kStr, n);
      size_t r = 0;
      for (const ListRows::Head& h : read->heads)
        for (; r < h.end; ++r) col.AppendStr(ids->strs[h.input]);
      out.SetColumn(ctx.args->Str("source_as"), Share(std::move(col).Finish()));
    }
  }
  if (!score_as.empty()) {
    Column scores = Column::F64(std::move(read->scores));
    for (size_t r = 0; r < read->score_valid.size(); ++r)
      if (!read->score_valid[r]) scores.validity.SetNull(r, read->score_valid.size());
    out.SetColumn(score_as, Share(std::move(scores)));
  }
  co_return out;
}

}  // namespace

void RegisterOps_lists(TaskRegistry& r) {
  using C = AddedColumn;
  const std::vector<FamilyType> lists = {FamilyType::kList, FamilyType::kZset};
  for (const char* op : {"follow", "recommendation"}) {
    const bool follow = std::string_view(op) == "follow";
    r.Add(TaskSpec::Async(op, 1, 1,
                          {Endpoint(), Cache(), FamilyParam(follow ? "follow" : "recs"),
                           Count("fanout", 100, 1, 1000), ColumnName("score_as", "")},
                          &FollowSchema,
                          [](const TaskContext& ctx, RowSets in) {
                            return RunList(ctx, std::move(in), "fanout", false);
                          })
              .Doc(follow ? "The first fanout members of each input row's list or zset (the "
                            "accounts it follows), in input order."
                          : "The first fanout members of each input row's list or zset (its "
                            "recommended items), in input order.")
              .Reads(lists)
              .Replaces({C::Named("id", ColumnFrom::kFamilyMembers),
                         C::ByParam("score_as", ColumnFrom::kFixed, ColumnType::kF64)}));
  }
  r.Add(TaskSpec::Async("media", 1, 1,
                        {Endpoint(), Cache(), FamilyParam("media"), Count("per_author", 10, 1, 100),
                         ColumnName("score_as", ""), ColumnName("source_as", "author")},
                        &MediaSchema,
                        [](const TaskContext& ctx, RowSets in) {
                          return RunList(ctx, std::move(in), "per_author", true);
                        })
            .Doc("The first per_author members of each input row's list or zset, with the "
                 "row's id in source_as.")
            .Reads(lists)
            .Replaces({C::Named("id", ColumnFrom::kFamilyMembers),
                       C::ByParam("source_as", ColumnFrom::kInputId),
                       C::ByParam("score_as", ColumnFrom::kFixed, ColumnType::kF64)}));
}

}  // namespace rankd
