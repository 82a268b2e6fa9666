// Runs of the Redis-backed tasks (viewer, follow, recommendation, media, features,
// seen_filter); their specs are in io_specs.cc.
//
// Every run builds all of its commands first and sends them as one RedisPool::Batch:
// one write, one round trip, however many input rows. Error replies (WRONGTYPE) and
// replies of the wrong type become backend_error (the key and the Redis text in the
// error's detail, for the log); a lost or refused connection is unavailable; the node's
// deadline is the batch's. Values are parsed strictly (std::from_chars, the whole text):
// a field that is missing or does not parse becomes null and is counted in the pool's
// RedisStats (fields_missing, fields_unparsable); a list member that is not an id is
// dropped and counted (bad_ids).
//
// Threads: runs execute on the request's loop thread, the thread that owns ctx.redis.
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "redis/pools.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// ---- strict parsing -----------------------------------------------------------------

std::optional<int64_t> ParseI64(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> ParseF64(std::string_view s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

// ---- helpers shared by the runs -----------------------------------------------------

// The pool of the node's `endpoint` parameter.
Result<RedisPool*> PoolFor(const TaskContext& ctx) {
  const std::string& name = ctx.args->Str("endpoint");
  if (ctx.redis == nullptr)
    return Fail(Error::Unavailable("no Redis is configured in this process"));
  RedisPool* pool = ctx.redis->Get(name);
  if (pool == nullptr)
    return Fail(Error::Unavailable("redis endpoint '" + name +
                                   "' is not configured (see --redis NAME=URL)"));
  return pool;
}

// backend_error for an error reply or a reply of the wrong shape. The client is told
// the command, the endpoint's name and the kind of reply; the key, the address and the
// raw Redis error text go to the detail (the log).
Error BadReply(const RedisPool& pool, std::string_view command,
               const std::string& key, const RedisReply& r) {
  std::string what = r.is_error() ? "error reply"
                                  : "unexpected " + std::string(RedisReplyKindName(r.kind)) + " reply";
  Error e = Error::Backend(std::string(command) + " at redis endpoint " + pool.endpoint().name +
                           ": " + what);
  e.detail = std::string(command) + " " + key + " at redis endpoint " + pool.endpoint().Label() +
             ": " + (r.is_error() ? r.str : what);
  return e;
}

std::string KeyOf(const RedisPool& pool, std::string_view kind, int64_t id) {
  return pool.prefix() + std::string(kind) + std::to_string(id);
}

// The input's ids in logical order, with the physical row each came from; rows whose id
// is null are skipped (they name no key).
struct InputIds {
  std::vector<int64_t> ids;
  std::vector<uint32_t> rows;
};
Result<InputIds> IdsOf(const RowSet& in) {
  const Column* id = in.column("id");
  if (id == nullptr || id->type != ColumnType::kI64)
    return Fail(Error::Internal("input has no i64 'id' column"));
  InputIds out;
  out.ids.reserve(in.size());
  out.rows.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t r = in.row(i);
    if (!id->valid(r)) continue;
    out.ids.push_back(id->i64[r]);
    out.rows.push_back(r);
  }
  return out;
}

// Where every per-row IO task starts: the pool of the node's endpoint and the ids of
// its input rows.
struct RowIo {
  RedisPool* pool;
  InputIds ids;
};

Result<RowIo> StartRowIo(const TaskContext& ctx, const RowSet& in) {
  auto pool = PoolFor(ctx);
  if (!pool) return Fail(pool.error());
  auto ids = IdsOf(in);
  if (!ids) return Fail(ids.error());
  return RowIo{*pool, std::move(*ids)};
}

// One typed column filled row by row from Redis text; rows never set stay null.
class FieldColumn {
 public:
  FieldColumn(ColumnType type, size_t rows)
      : type_(type), rows_(rows), valid_(rows, 0) {
    if (type_ == ColumnType::kI64) i64_.assign(rows, 0);
    if (type_ == ColumnType::kF64) f64_.assign(rows, 0);
    if (type_ == ColumnType::kStr) str_.assign(rows, std::nullopt);
    if (type_ == ColumnType::kBool) b_.assign(rows, 0);
  }

  // `r` is a bulk string (the value) or nil (missing).
  void Set(size_t row, const RedisReply& r, RedisStats& stats) {
    if (!r.is_string()) {
      Bump(stats.fields_missing);
      return;
    }
    bool ok = true;
    switch (type_) {
      case ColumnType::kI64:
        if (auto v = ParseI64(r.str)) i64_[row] = *v; else ok = false;
        break;
      case ColumnType::kF64:
        if (auto v = ParseF64(r.str)) f64_[row] = *v; else ok = false;
        break;
      case ColumnType::kStr:
        str_[row] = r.str;
        break;
      case ColumnType::kBool:
        if (r.str == "1" || r.str == "true") b_[row] = 1;
        else if (r.str == "0" || r.str == "false") b_[row] = 0;
        else ok = false;
        break;
    }
    if (ok) valid_[row] = 1; else Bump(stats.fields_unparsable);
  }

  ColumnPtr Finish() {
    Column c;
    switch (type_) {
      case ColumnType::kI64: c = Column::I64(std::move(i64_)); break;
      case ColumnType::kF64: c = Column::F64(std::move(f64_)); break;
      case ColumnType::kStr: c = Column::Str(str_); break;
      case ColumnType::kBool: c = Column::Bool(std::move(b_)); break;
    }
    for (size_t i = 0; i < rows_; ++i)
      if (!valid_[i]) c.validity.SetNull(i, rows_);
    return std::make_shared<const Column>(std::move(c));
  }

 private:
  ColumnType type_;
  size_t rows_;
  std::vector<uint8_t> valid_;
  std::vector<int64_t> i64_;
  std::vector<double> f64_;
  std::vector<std::optional<std::string>> str_;
  std::vector<uint8_t> b_;
};

// ---- viewer -------------------------------------------------------------------------

Task<Result<RowSet>> RunViewer(const TaskContext& ctx, std::vector<RowSet>) {
  auto pool = PoolFor(ctx);
  if (!pool) co_return Fail(pool.error());
  RedisPool& p = **pool;
  RedisCommand cmd{"HGETALL"};
  cmd.Key(p.prefix(), "user:", ctx.user_id);
  std::vector<RedisCommand> cmds;
  cmds.push_back(std::move(cmd));
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies) co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  const RedisReply& r = replies->at(0);
  if (!r.is_array() || r.elements.size() % 2 != 0)
    co_return Fail(BadReply(p, "HGETALL", KeyOf(p, "user:", ctx.user_id), r));

  const bool found = !r.elements.empty();
  const size_t rows = found ? 1 : 0;
  RowSet out;
  out.SetColumn("id", std::make_shared<const Column>(
                          Column::I64(found ? std::vector<int64_t>{ctx.user_id} : std::vector<int64_t>{})));
  for (const auto& field : UserFields()) {
    FieldColumn col(*UserFieldType(field), rows);
    if (found) {
      const RedisReply* value = nullptr;
      for (size_t i = 0; i + 1 < r.elements.size(); i += 2)
        if (r.elements[i].str == field) value = &r.elements[i + 1];
      col.Set(0, value ? *value : RedisReply{}, p.mutable_stats());
    }
    out.SetColumn(field, col.Finish());
  }
  co_return out;
}

// ---- follow, recommendation, media: one LRANGE per input row --------------------------

// LRANGE {kind}{id} 0 count-1 for every input id; ids of the members, and for each the
// input id it came from.
struct Expanded {
  std::vector<int64_t> ids;
  std::vector<int64_t> from;
};
Task<Result<Expanded>> ExpandLists(const TaskContext& ctx, const RowSet& in, std::string_view kind,
                                   int64_t count) {
  auto io = StartRowIo(ctx, in);
  if (!io) co_return Fail(io.error());
  RedisPool& p = *io->pool;
  const InputIds* ids = &io->ids;
  std::vector<RedisCommand> cmds;
  cmds.reserve(ids->ids.size());
  for (int64_t id : ids->ids) {
    RedisCommand c{"LRANGE"};
    c.Key(p.prefix(), kind, id).Arg(int64_t{0}).Arg(count - 1);
    cmds.push_back(std::move(c));
  }
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies) co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  Expanded out;
  auto& stats = p.mutable_stats();
  for (size_t i = 0; i < replies->size(); ++i) {
    const RedisReply& r = (*replies)[i];
    if (!r.is_array()) co_return Fail(BadReply(p, "LRANGE", KeyOf(p, kind, ids->ids[i]), r));
    for (const auto& e : r.elements) {
      auto v = e.is_string() ? ParseI64(e.str) : std::nullopt;
      if (!v) {
        Bump(stats.bad_ids);
        continue;
      }
      out.ids.push_back(*v);
      out.from.push_back(ids->ids[i]);
    }
  }
  co_return out;
}

RowSet IdRows(std::vector<int64_t> ids) {
  RowSet out;
  out.SetColumn("id", std::make_shared<const Column>(Column::I64(std::move(ids))));
  return out;
}

// follow and recommendation: the members of each input row's list, as ids.
Task<Result<RowSet>> RunList(const TaskContext& ctx, std::vector<RowSet> in, std::string kind) {
  auto e = co_await ExpandLists(ctx, in.at(0), kind, ctx.args->I64("fanout"));
  if (!e) co_return Fail(e.error());
  co_return IdRows(std::move(e->ids));
}

Task<Result<RowSet>> RunMedia(const TaskContext& ctx, std::vector<RowSet> in) {
  auto e = co_await ExpandLists(ctx, in.at(0), "media:", ctx.args->I64("per_author"));
  if (!e) co_return Fail(e.error());
  RowSet out = IdRows(std::move(e->ids));
  out.SetColumn("author", std::make_shared<const Column>(Column::I64(std::move(e->from))));
  co_return out;
}

// ---- features: one HMGET per distinct id -------------------------------------------

Task<Result<RowSet>> RunFeatures(const TaskContext& ctx, std::vector<RowSet> in) {
  const RowSet& input = in.at(0);
  auto io = StartRowIo(ctx, input);
  if (!io) co_return Fail(io.error());
  RedisPool& p = *io->pool;
  const InputIds* ids = &io->ids;
  const auto& fields = ctx.args->StrList("fields");
  // Candidates often repeat an item (before a dedupe, or from several sources): ask
  // once per distinct id and give every row with that id the same reply.
  std::vector<uint32_t> reply_of(ids->ids.size());
  std::vector<int64_t> asked;
  std::unordered_map<int64_t, uint32_t> index;
  index.reserve(ids->ids.size());
  std::vector<RedisCommand> cmds;
  cmds.reserve(ids->ids.size());
  for (size_t i = 0; i < ids->ids.size(); ++i) {
    int64_t id = ids->ids[i];
    auto [it, fresh] = index.try_emplace(id, static_cast<uint32_t>(asked.size()));
    reply_of[i] = it->second;
    if (!fresh) continue;
    asked.push_back(id);
    RedisCommand c{"HMGET"};
    c.Key(p.prefix(), "item:", id);
    for (const auto& f : fields) c.Arg(f);
    cmds.push_back(std::move(c));
  }
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies) co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  for (size_t k = 0; k < replies->size(); ++k) {
    const RedisReply& r = (*replies)[k];
    if (!r.is_array() || r.elements.size() != fields.size())
      co_return Fail(BadReply(p, "HMGET", KeyOf(p, "item:", asked[k]), r));
  }

  // Columns span the input's physical rows (so its selection vector still applies);
  // rows outside the selection, or with a null id, stay null. Missing and unparsable
  // values are counted per row, as they reach the response.
  auto& stats = p.mutable_stats();
  const size_t rows = input.physical_rows();
  std::vector<FieldColumn> cols;
  cols.reserve(fields.size());
  for (const auto& f : fields) cols.emplace_back(*ItemFieldType(f), rows);
  for (size_t i = 0; i < ids->ids.size(); ++i) {
    const RedisReply& r = (*replies)[reply_of[i]];
    for (size_t f = 0; f < fields.size(); ++f) cols[f].Set(ids->rows[i], r.elements[f], stats);
  }
  RowSet out = input;
  for (size_t f = 0; f < fields.size(); ++f) out.SetColumn(fields[f], cols[f].Finish());
  co_return out;
}

// ---- seen_filter: one SMISMEMBER for all rows ---------------------------------------

Task<Result<RowSet>> RunSeenFilter(const TaskContext& ctx, std::vector<RowSet> in) {
  const RowSet& input = in.at(0);
  auto io = StartRowIo(ctx, input);
  if (!io) co_return Fail(io.error());
  RedisPool& p = *io->pool;
  const InputIds* ids = &io->ids;
  if (ids->ids.empty()) co_return input;
  RedisCommand c{"SMISMEMBER"};
  c.Key(p.prefix(), "seen:", ctx.user_id);
  for (int64_t id : ids->ids) c.Arg(id);
  std::vector<RedisCommand> cmds;
  cmds.push_back(std::move(c));
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies) co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  const RedisReply& r = replies->at(0);
  if (!r.is_array() || r.elements.size() != ids->ids.size())
    co_return Fail(BadReply(p, "SMISMEMBER", KeyOf(p, "seen:", ctx.user_id), r));
  // Keep the logical order: rows with a null id were never asked about and stay.
  std::vector<uint8_t> seen(input.physical_rows(), 0);
  for (size_t i = 0; i < ids->rows.size(); ++i)
    if (r.elements[i].is_integer() && r.elements[i].integer == 1) seen[ids->rows[i]] = 1;
  std::vector<uint32_t> keep;
  keep.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i)
    if (!seen[input.row(i)]) keep.push_back(input.row(i));
  co_return input.WithSelection(std::move(keep));
}

}  // namespace

void RegisterIoTaskRuns(TaskRegistry& r) {
  r.SetAsyncRun("viewer", &RunViewer);
  r.SetAsyncRun("follow", [](const TaskContext& ctx, std::vector<RowSet> in) {
    return RunList(ctx, std::move(in), "follow:");
  });
  r.SetAsyncRun("recommendation", [](const TaskContext& ctx, std::vector<RowSet> in) {
    return RunList(ctx, std::move(in), "recs:");
  });
  r.SetAsyncRun("media", &RunMedia);
  r.SetAsyncRun("features", &RunFeatures);
  r.SetAsyncRun("seen_filter", &RunSeenFilter);
}

}  // namespace rankd
