// ann: the nearest items of an index (schema.json `indexes`, docs/vectors.md) to the
// viewer's vector: min(k, items not excluded) rows of `id` (the family's id type),
// `similarity` (higher is nearer) and, with with_vectors, the items' vectors from the
// index (no read from Redis). The items excluded during the search are the ids of an
// input node, or the members of the viewer's set or zset (read here: SRANDMEMBER or
// ZRANGE ... REV of at most kMaxExcluded members). The search runs on a CPU worker of
// the shard, against the index set the request started with (TaskContext::ann).
// Threads: the run executes on the request's loop thread; the search on a CPU worker.
#include <algorithm>

#include "ann/ann_set.h"
#include "core/awaitables.h"
#include "data/column_builder.h"
#include "tasks/read_through.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// Members of an exclude family read per request; a larger set excludes an arbitrary
// kMaxExcluded of its members (SRANDMEMBER), a zset its newest ones.
constexpr int64_t kMaxExcluded = 10000;

// {"from": node, "key": column} of `query`, or of the kColumnMap's [k, v, k, v].
struct QueryRef {
  std::string_view from, key;
};
std::optional<QueryRef> QueryOf(const std::vector<std::string>& pairs) {
  if (pairs.size() != 4) return std::nullopt;
  QueryRef q;
  for (size_t i = 0; i < 4; i += 2) {
    if (pairs[i] == "from")
      q.from = pairs[i + 1];
    else if (pairs[i] == "key")
      q.key = pairs[i + 1];
  }
  if (q.from.empty() || q.key.empty()) return std::nullopt;
  return q;
}

// exclude: "" (none), a node id ([id]) or {"family": NAME} ([family, NAME]).
struct ExcludeRef {
  std::string_view node, family;
};
std::optional<ExcludeRef> ExcludeOf(const std::vector<std::string>& v) {
  if (v.empty()) return ExcludeRef{};
  if (v.size() == 1 && !v[0].empty()) return ExcludeRef{v[0], {}};
  if (v.size() == 2 && v[0] == "family") return ExcludeRef{{}, v[1]};
  return std::nullopt;
}

std::string DeclaredIndexes(const Schema* s) {
  std::string names;
  if (s)
    for (const AnnIndexSpec& i : s->indexes) names += (names.empty() ? "" : ", ") + i.name;
  return names.empty() ? "the schema declares no indexes" : "declared: " + names;
}

Result<ColumnTypes> AnnSchema(const SchemaArgs& a) {
  const std::string& name = a.args.Str("index");
  const AnnIndexSpec* spec = a.schema ? a.schema->FindIndex(name) : nullptr;
  if (!spec)
    return Fail(Error::BadRequest("params.index: unknown index '" + name + "' (" +
                                  DeclaredIndexes(a.schema) + ")"));
  const KeyFamily* family = a.schema->Find(spec->family);
  auto q = QueryOf(a.args.StrList("query"));
  if (!q)
    return Fail(Error::BadRequest(
        "params.query: expected {\"from\": \"<viewer node id>\", \"key\": \"<column>\"}"));
  auto ex = ExcludeOf(a.args.StrList("exclude"));
  if (!ex)
    return Fail(Error::BadRequest(
        "params.exclude: expected a node id or {\"family\": \"<set or zset family>\"}"));
  const size_t want = ex->node.empty() ? 1 : 2;
  std::string expected = "[\"" + std::string(q->from) + "\"" +
                         (ex->node.empty() ? "" : ", \"" + std::string(ex->node) + "\"") + "]";
  if (a.inputs.size() != want || a.input_ids[0] != q->from ||
      (want == 2 && a.input_ids[1] != ex->node))
    return Fail(Error::BadRequest("inputs: must be exactly " + expected +
                                  " (the query's from node, then the exclude node when given)"));
  const TypedColumn* qc = a.inputs[0].get(q->key);
  if (!qc || qc->type != ColumnType::kVec)
    return Fail(Error::BadRequest("params.query: node '" + std::string(q->from) +
                                  "' has no vector column '" + std::string(q->key) +
                                  "' (columns: " + a.inputs[0].names() + ")"));
  if (qc->dim != spec->dim)
    return Fail(Error::BadRequest("params.query: column '" + std::string(q->key) + "' of node '" +
                                  std::string(q->from) + "' is " + TypeText(qc->type, qc->dim) +
                                  " but index '" + name +
                                  "' holds vec:" + std::to_string(spec->dim)));
  if (!ex->node.empty()) {
    auto id = a.inputs[1].find("id");
    if (id != family->id_type)
      return Fail(Error::BadRequest(
          "params.exclude: node '" + std::string(ex->node) + "' needs an id column of " +
          std::string(ColumnTypeName(family->id_type)) + " ids (index '" + name + "' holds them)"));
  }
  if (!ex->family.empty()) {
    const KeyFamily* f = a.schema->Find(ex->family);
    if (!f || (f->type != FamilyType::kSet && f->type != FamilyType::kZset))
      return Fail(Error::BadRequest(
          "params.exclude.family: " +
          (f ? "'" + f->name + "' is a " + std::string(FamilyTypeName(f->type)) + " family"
             : "unknown family '" + std::string(ex->family) + "'") +
          "; exclude reads a set or zset family keyed by the user"));
    auto viewer_id = a.inputs[0].find("id");
    if (viewer_id && f->id_type != *viewer_id)
      return Fail(Error::BadRequest("params.exclude.family: '" + f->name + "' is keyed by " +
                                    std::string(ColumnTypeName(f->id_type)) +
                                    " ids but the viewer's are " +
                                    std::string(ColumnTypeName(*viewer_id))));
    if (f->members_type != family->id_type)
      return Fail(Error::BadRequest("params.exclude.family: '" + f->name + "' holds " +
                                    std::string(ColumnTypeName(f->members_type)) +
                                    " members but index '" + name + "' holds " +
                                    std::string(ColumnTypeName(family->id_type)) + " ids"));
  }
  ColumnTypes t;
  t.cols.push_back({"id", family->id_type, 0});
  t.cols.push_back({"similarity", ColumnType::kF64, 0});
  if (a.args.Bool("with_vectors")) t.cols.push_back({spec->field, ColumnType::kVec, spec->dim});
  return t;
}

// The viewer's (user_id's) members of the exclude family: at most kMaxExcluded.
Coro<Result<CachedList>> ReadExcludeFamily(const TaskContext& ctx, const KeyFamily& family) {
  RedisClient* pool = ctx.redis ? ctx.redis->Get(ctx.args->Str("endpoint")) : nullptr;
  if (!pool)
    co_return Fail(Error::Unavailable("ann: no Redis endpoint '" + ctx.args->Str("endpoint") +
                                      "' to read exclude.family '" + family.name + "' from"));
  RedisCommands cmds;
  const bool zset = family.type == FamilyType::kZset;
  cmds.Add(zset ? 5 : 3).Arg(zset ? "ZRANGE" : "SRANDMEMBER");
  if (family.id_type == ColumnType::kStr)
    cmds.Key(pool->prefix(), family.key_template(), ctx.user_id.str);
  else
    cmds.Key(pool->prefix(), family.key_template(), ctx.user_id.num);
  if (zset)
    cmds.Arg(int64_t{0}).Arg(kMaxExcluded - 1).Arg("REV");
  else
    cmds.Arg(kMaxExcluded);
  auto replies = co_await pool->Batch(std::move(cmds), ctx.deadline);
  if (!replies) co_return Fail(std::move(replies.error()));
  const ReplySource src{pool->endpoint().name, pool->prefix(), &pool->endpoint(), &family};
  co_return DecodeList(src, ctx.user_id, static_cast<uint32_t>(kMaxExcluded), false, (*replies)[0]);
}

// The excluded labels: the ids of the exclude node's rows, or the family's members.
Coro<Result<AnnIndex::Excluded>> ExcludedLabels(const TaskContext& ctx, const AnnIndex& index,
                                                const ExcludeRef& ex, const RowSets& in) {
  const bool str = index.id_type() == ColumnType::kStr;
  std::vector<int64_t> nums;
  std::vector<std::string_view> strs;
  CachedList members;
  if (!ex.node.empty()) {
    const RowSet& rs = in.at(1);
    const Column* id = rs.column("id");
    if (!id) co_return Fail(Error::Internal("ann: exclude node has no id column"));
    for (size_t i = 0; i < rs.size(); ++i) {
      const uint32_t r = rs.row(i);
      if (!id->valid(r)) continue;
      if (str)
        strs.push_back(id->str(r));
      else
        nums.push_back(id->i64[r]);
    }
  } else if (!ex.family.empty()) {
    const KeyFamily* family = ctx.schema->Find(ex.family);
    if (!family) co_return Fail(Error::Internal("ann: no family '" + std::string(ex.family) + "'"));
    auto read = co_await ReadExcludeFamily(ctx, *family);
    if (!read) co_return Fail(std::move(read.error()));
    members = std::move(*read);
    size_t bad = 0;
    for (size_t i = 0; i < members.members.size(); ++i) {
      if (bad < members.bad.size() && members.bad[bad] == i) {
        ++bad;
        continue;
      }
      if (str)
        strs.push_back(members.str(i));
      else
        nums.push_back(members.members[i]);
    }
  }
  co_return str ? index.ExcludedLabels(strs) : index.ExcludedLabels(nums);
}

RowSet AnnRows(const AnnIndex& index, const std::vector<AnnIndex::Hit>& hits, bool with_vectors) {
  RowSet rs;
  ColumnBuilder id(index.id_type(), hits.size());
  PoolVector<double> sim;
  sim.reserve(hits.size());
  for (const AnnIndex::Hit& h : hits) {
    if (index.id_type() == ColumnType::kStr)
      id.AppendStr(index.str_id(h.label));
    else
      id.AppendI64(index.id(h.label));
    sim.push_back(h.similarity);
  }
  rs.SetColumn("id", Share(std::move(id).Finish()));
  rs.SetColumn("similarity", Share(Column::F64(std::move(sim))));
  if (with_vectors) {
    ColumnBuilder vec(ColumnType::kVec, hits.size(), index.dim());
    for (const AnnIndex::Hit& h : hits) vec.AppendVec(index.vector(h.label));
    rs.SetColumn(index.spec().field, Share(std::move(vec).Finish()));
  }
  return rs;
}

Coro<Result<RowSet>> RunAnn(const TaskContext& ctx, RowSets in) {
  const std::string& name = ctx.args->Str("index");
  const AnnIndexSpec* spec = ctx.schema ? ctx.schema->FindIndex(name) : nullptr;
  const AnnIndex* index = ctx.ann ? ctx.ann->Find(name) : nullptr;
  if (!spec || !index)
    co_return Fail(Error::Unavailable("ann: index '" + name + "' has no build yet"));
  // A reload that changed the declaration installs the new build before the new plans:
  // a request of the old plans that found it searches nothing it could not type.
  if (index->spec().content_sha256 != spec->content_sha256)
    co_return Fail(Error::Unavailable("ann: index '" + name +
                                      "' was rebuilt for a changed declaration; retry"));
  const bool with_vectors = ctx.args->Bool("with_vectors");
  const QueryRef q = *QueryOf(ctx.args->StrList("query"));
  const RowSet& viewer = in.at(0);
  const Column* qcol = viewer.column(q.key);
  if (viewer.size() == 0 || !qcol || !qcol->valid(viewer.row(0)))
    co_return AnnRows(*index, {}, with_vectors);  // no viewer vector: nothing is near it
  const ExcludeRef ex = *ExcludeOf(ctx.args->StrList("exclude"));
  auto excluded = co_await ExcludedLabels(ctx, *index, ex, in);
  if (!excluded) co_return Fail(std::move(excluded.error()));
  const std::span<const float> query = qcol->vec_row(viewer.row(0));
  const auto k = static_cast<size_t>(ctx.args->I64("k"));
  const int64_t ef_arg = ctx.args->I64("ef");
  const auto ef = static_cast<size_t>(ef_arg > 0 ? ef_arg : kAnnDefaultEf);
  const AnnIndex::Excluded& labels = *excluded;
  // On a CPU worker, never on the loop: a search costs ~0.1-1 ms. The frame (and the
  // request's index set) outlive the hop: the scheduler keeps the run's state until it ends.
  auto search = [index, query, k, ef, &labels] { return index->Search(query, k, ef, labels); };
  std::vector<AnnIndex::Hit> hits;
  if (ctx.pool)
    hits = co_await OffloadCpu(*ctx.loop, *ctx.pool, search);
  else
    hits = search();
  co_return AnnRows(*index, hits, with_vectors);
}

}  // namespace

void RegisterOps_ann(TaskRegistry& r) {
  using C = AddedColumn;
  using P = TaskParamSpec;
  r.Add(TaskSpec::Async("ann", 1, 2,
                        {Endpoint(), P::Required("index", ParamKind::kStr),
                         P::Required("query", ParamKind::kColumnMap),
                         P::Optional("k", ParamKind::kI64, int64_t{100}).Bounds(1, kAnnMaxK).Ref(),
                         P::Optional("ef", ParamKind::kI64, int64_t{0}).Bounds(0, kAnnMaxEf).Ref(),
                         P::Optional("exclude", ParamKind::kStrOrMap, std::vector<std::string>{}),
                         P::Optional("with_vectors", ParamKind::kBool, false)},
                        &AnnSchema, &RunAnn)
            .Doc("The k items of an index (schema.json indexes) nearest to the viewer's vector "
                 "(query: {from, key}), without the exclude node's ids or the viewer's "
                 "exclude.family members: id, similarity (higher is nearer), the vector with "
                 "with_vectors; ef 0 is the default beam (200), never below k.")
            .ReadsIndex()
            .Replaces({C::Named("id", ColumnFrom::kFamilyId),
                       C::Named("similarity", ColumnFrom::kFixed, ColumnType::kF64)}));
}

}  // namespace rankd
