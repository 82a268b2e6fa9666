// The IO tasks' specs (docs/plan.md task table): their parameters and output columns,
// typed by the family each node reads (plan/schema.h). Their runs live in io_tasks.cc;
// until installed they fail with `unavailable`.
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

TaskParamSpec Endpoint() {
  return TaskParamSpec::Optional("endpoint", ParamKind::kStr, std::string("redis_default"));
}
// `family`: the schema family the node reads; the default is the demo schema's name.
TaskParamSpec FamilyParam(std::string def) {
  return TaskParamSpec::Optional("family", ParamKind::kStr, std::move(def));
}
// `cache`: read through the shard's cache (docs/cache.md).
TaskParamSpec Cache() { return TaskParamSpec::Optional("cache", ParamKind::kBool, false); }
TaskParamSpec Count(std::string name, int64_t def, int64_t lo, int64_t hi) {
  return TaskParamSpec::Optional(std::move(name), ParamKind::kI64, def).Bounds(lo, hi).Ref();
}
// A column name to write, "" meaning none (score_as).
TaskParamSpec ColumnName(std::string name, std::string def) {
  return TaskParamSpec::Optional(std::move(name), ParamKind::kStr, std::move(def));
}

std::string Types(const KeyFamily& f) {
  return "family '" + f.name + "' (" + std::string(FamilyTypeName(f.type)) + ")";
}

// The node's family must be one of `types`.
Result<void> NeedType(const SchemaArgs& a, std::initializer_list<FamilyType> types,
                      std::string_view what) {
  for (FamilyType t : types)
    if (a.family->type == t) return {};
  return Fail(Error::BadRequest("params.family: " + Types(*a.family) +
                                " cannot be read by this op (" + std::string(what) + ")"));
}

// The input's id column must have the type that fills the family's {id} (`of`: which
// type of the family, for the message).
Result<void> NeedInputIds(const SchemaArgs& a, ColumnType want, std::string_view of) {
  std::optional<ColumnType> have;
  if (!a.inputs.empty()) have = a.inputs[0].find("id");
  if (!have) return Fail(Error::BadRequest("input has no 'id' column"));
  if (*have != want)
    return Fail(Error::BadRequest("params.family: family '" + a.family->name + "' " +
                                  std::string(of) + " " + std::string(ColumnTypeName(want)) +
                                  " ids but the input's id column is " +
                                  std::string(ColumnTypeName(*have))));
  return {};
}

Result<void> ValidColumnName(std::string_view param, const std::string& name) {
  if (name.empty() || name.size() > 64 || name.find_first_of("\"\\") != std::string::npos)
    return Fail(Error::BadRequest("params." + std::string(param) + ": '" + name +
                                  "' is not a column name (1..64 bytes)"));
  return {};
}

// The fields of a hash or json family that `fields` names (all of them when empty).
Result<void> AddFields(const SchemaArgs& a, const std::vector<std::string>& fields,
                       ColumnTypes& t) {
  if (fields.empty()) {
    for (const SchemaField& f : a.family->fields) SetColumnType(t, f.name, ColumnTypeOf(f.type));
    return {};
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    auto idx = a.family->FieldIndex(fields[i]);
    if (!idx) {
      std::string known;
      for (const SchemaField& f : a.family->fields) known += (known.empty() ? "" : ", ") + f.name;
      return Fail(Error::BadRequest("params.fields: '" + fields[i] +
                                    "' is not a field of family '" + a.family->name +
                                    "' (declared: " + known + ")"));
    }
    for (size_t j = 0; j < i; ++j)
      if (fields[j] == fields[i])
        return Fail(Error::BadRequest("params.fields: '" + fields[i] + "' is listed twice"));
    if (fields[i] == "id")
      return Fail(Error::BadRequest("params.fields: 'id' would replace the id column"));
    SetColumnType(t, fields[i], ColumnTypeOf(a.family->fields[*idx].type));
  }
  return {};
}

Result<ColumnTypes> ViewerSchema(const SchemaArgs& a) {
  if (auto ok = NeedType(a, {FamilyType::kHash, FamilyType::kJson}, "viewer reads hash or json");
      !ok)
    return Fail(ok.error());
  ColumnTypes t;
  t.cols.emplace_back("id", a.family->id_type);
  if (auto ok = AddFields(a, a.args.StrList("fields"), t); !ok) return Fail(ok.error());
  return t;
}

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

Result<ColumnTypes> FeaturesSchema(const SchemaArgs& a) {
  if (auto ok = NeedType(a, {FamilyType::kHash, FamilyType::kJson}, "features reads hash or json");
      !ok)
    return Fail(ok.error());
  if (auto ok = NeedInputIds(a, a.family->id_type, "is keyed by"); !ok) return Fail(ok.error());
  ColumnTypes t = a.inputs[0];
  if (auto ok = AddFields(a, a.args.StrList("fields"), t); !ok) return Fail(ok.error());
  return t;
}

Result<ColumnTypes> SeenFilterSchema(const SchemaArgs& a) {
  if (auto ok = NeedType(a, {FamilyType::kSet}, "seen_filter reads a set"); !ok)
    return Fail(ok.error());
  if (auto ok = NeedInputIds(a, a.family->members_type, "holds"); !ok) return Fail(ok.error());
  return a.inputs[0];
}

Coro<Result<RowSet>> NotBuilt(std::string op) {
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
  TaskSpec viewer =
      Io("viewer", 0,
         {Endpoint(), Cache(), FamilyParam("user"),
          TaskParamSpec::Optional("fields", ParamKind::kStrList, std::vector<std::string>{})},
         &ViewerSchema);
  viewer.keyed_by_user = true;
  r.Add(std::move(viewer));
  r.Add(Io("follow", 1,
           {Endpoint(), Cache(), FamilyParam("follow"), Count("fanout", 100, 1, 1000),
            ColumnName("score_as", "")},
           &FollowSchema));
  r.Add(Io("recommendation", 1,
           {Endpoint(), Cache(), FamilyParam("recs"), Count("fanout", 100, 1, 1000),
            ColumnName("score_as", "")},
           &FollowSchema));
  r.Add(Io("media", 1,
           {Endpoint(), Cache(), FamilyParam("media"), Count("per_author", 10, 1, 100),
            ColumnName("score_as", ""), ColumnName("source_as", "author")},
           &MediaSchema));
  r.Add(Io("features", 1,
           {Endpoint(), Cache(), FamilyParam("item"),
            TaskParamSpec::Required("fields", ParamKind::kStrList).Bounds(1, std::nullopt)},
           &FeaturesSchema));
  TaskSpec seen = Io("seen_filter", 1, {Endpoint(), FamilyParam("seen")}, &SeenFilterSchema);
  seen.keyed_by_user = true;
  r.Add(std::move(seen));
}

}  // namespace rankd
