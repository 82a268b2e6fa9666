// diversify and cap: the ops that shape a feed by a key column (an author, a category)
// so that one key value does not fill the top of the list (docs/plan.md, "CPU tasks").
// Both walk the rows once in input order with a counter per key value (dense key ids:
// row_keys.h), so both are O(rows); diversify then sorts its new scores (sort.h). Their
// arrays come from the thread's block pool: no malloc once the thread is warm.
#include <algorithm>

#include "tasks/row_keys.h"
#include "tasks/schemas.h"
#include "tasks/sort.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// Rows between two polls of ctx.cancelled() in the walks below (each row costs a few ns).
constexpr size_t kPollRows = 16384;

// params.key names an i64 or str column of the input (f64 keys would compare by value
// with rounding in the way; bool keys are better written as a filter).
Status CheckKey(const SchemaArgs& a, std::string_view op) {
  const std::string& key = a.args.Str("key");
  std::optional<ColumnType> t = a.inputs[0].find(key);
  if (!t)
    return Fail(Error::BadRequest("params.key: the input has no column '" + key + "' (it has " +
                                  a.inputs[0].names() + ")"));
  if (*t != ColumnType::kI64 && *t != ColumnType::kStr)
    return Fail(Error::BadRequest("params.key: column '" + key + "' is " +
                                  std::string(ColumnTypeName(*t)) + "; " + std::string(op) +
                                  " takes an i64 or str key column"));
  return {};
}

// ---- diversify -----------------------------------------------------------------------

// The column diversify writes: out_key, or the score column itself when out_key is absent.
const std::string& OutKey(const TaskArgs& args) {
  const std::string& out = args.Str("out_key");
  return out.empty() ? args.Str("score") : out;
}

Result<ColumnTypes> DiversifySchema(const SchemaArgs& a) {
  if (auto s = CheckKey(a, "diversify"); !s) return Fail(s.error());
  const std::string& score = a.args.Str("score");
  std::optional<ColumnType> t = a.inputs[0].find(score);
  if (!t)
    return Fail(Error::BadRequest("params.score: the input has no column '" + score + "' (it has " +
                                  a.inputs[0].names() + ")"));
  if (*t != ColumnType::kF64)
    return Fail(Error::BadRequest("params.score: column '" + score + "' is " +
                                  std::string(ColumnTypeName(*t)) +
                                  "; diversify needs an f64 score column"));
  if (OutKey(a.args) == "id")
    return Fail(Error::BadRequest("params.out_key: diversify may not replace the id column"));
  ColumnTypes out = a.inputs[0];
  SetColumnType(out, OutKey(a.args), ColumnType::kF64);
  return out;
}

// Each selected row's score times its key's discount, floor + (1 - floor) * decay^k for
// the row that is the k-th (from 0) of its key value; a null key is always k = 0. By
// physical row, so that the column lines up with the input's others (rows outside the
// selection hold 0); null where the score is null. decay^k is a running product, one
// multiplication per new k, kept in a table by k that grows to the largest k met.
std::optional<Column> Discounted(const RowSet& rs, const Column& score,
                                 const PoolVector<uint32_t>& ids, uint32_t distinct, double decay,
                                 double floor, const TaskContext& ctx) {
  PoolVector<double> out(rs.physical_rows(), 0.0);
  // seen[id]: rows of that key met so far. Nulls count in the extra slot `distinct`,
  // which stays 0: no branch per row on whether the key is null.
  PoolVector<uint32_t> seen(size_t{distinct} + 1, 0);
  PoolVector<double> discount;
  double power = 1;  // decay^discount.size()
  const size_t n = rs.size();
  for (size_t begin = 0; begin < n; begin += kPollRows) {
    if (ctx.cancelled()) return std::nullopt;
    const size_t end = std::min(n, begin + kPollRows);
    for (size_t i = begin; i < end; ++i) {
      const uint32_t slot = std::min(ids[i], distinct);
      const uint32_t k = seen[slot];
      seen[slot] = k + (slot != distinct);
      if (k == discount.size()) {
        discount.push_back(floor + (1 - floor) * power);
        power *= decay;
      }
      const uint32_t r = rs.row(i);
      out[r] = score.f64[r] * discount[k];
    }
  }
  Column c = Column::F64(std::move(out));
  c.validity = score.validity;
  return c;
}

Result<RowSet> RunDiversify(const TaskContext& ctx, RowSets in) {
  if (ctx.cancelled()) return Fail(CancelledError("diversify"));
  const RowSet& rs = in[0];
  auto key = KeyColumn(ctx, rs, "diversify");
  if (!key) return Fail(key.error());
  const std::string& score_name = ctx.args->Str("score");
  const Column* score = rs.column(score_name);
  if (!score || score->type != ColumnType::kF64)
    return Fail(Error::Internal("diversify: no f64 column '" + score_name + "'"));
  PoolVector<uint32_t> ids;
  std::optional<uint32_t> distinct = RowKeyIds(rs, **key, ids, CancelCheckOf(ctx));
  if (!distinct) return Fail(CancelledError("diversify"));
  std::optional<Column> scores =
      Discounted(rs, *score, ids, *distinct, ctx.args->F64("decay"), ctx.args->F64("floor"), ctx);
  if (!scores) return Fail(CancelledError("diversify"));
  // Descending, stable, nulls last: the sort task's order. Only the rows a following take
  // reads need their place.
  std::optional<Selection> rows =
      SortRows(rs, *scores, /*desc=*/true, RowsToOrder(ctx.node, ctx.params), CancelCheckOf(ctx));
  if (!rows) return Fail(CancelledError("diversify"));
  RowSet out = rs.WithSelection(std::move(*rows));
  out.SetColumn(OutKey(*ctx.args), Share(std::move(*scores)));
  return out;
}

// ---- cap -----------------------------------------------------------------------------

Result<ColumnTypes> CapSchema(const SchemaArgs& a) {
  if (auto s = CheckKey(a, "cap"); !s) return Fail(s.error());
  return a.inputs[0];
}

// The rows cap keeps, in input order, then (with defer) the ones it does not.
struct Capped {
  Selection rows;
  size_t dropped = 0;  // rows not kept (deferred or gone)
};

// A row is kept when fewer than `max` of the last `window - 1` kept rows have its key
// id; a null key is always kept (and takes a place in the window). nullopt when cancelled.
std::optional<Capped> CapRows(const RowSet& rs, const PoolVector<uint32_t>& ids, uint32_t distinct,
                              uint32_t max, size_t window, bool defer, const TaskContext& ctx) {
  const size_t n = rs.size();
  // The last `span` kept rows' slots, a ring once full; in_span[slot]: how many of them
  // have that key. Nulls use the extra slot `distinct`, which is never capped.
  const size_t span = window - 1;
  PoolVector<uint32_t> ring(std::min(span, n));
  PoolVector<uint32_t> in_span(size_t{distinct} + 1, 0);
  size_t filled = 0, oldest = 0;
  // Each row is written to both lists and only its own list's end moves.
  Selection kept(n + 1), dropped(n + 1);
  size_t nkept = 0, ndropped = 0;
  for (size_t begin = 0; begin < n; begin += kPollRows) {
    if (ctx.cancelled()) return std::nullopt;
    const size_t end = std::min(n, begin + kPollRows);
    for (size_t i = begin; i < end; ++i) {
      const uint32_t slot = std::min(ids[i], distinct);
      const bool keep = slot == distinct || in_span[slot] < max;
      const uint32_t r = rs.row(i);
      kept[nkept] = r;
      dropped[ndropped] = r;
      nkept += keep;
      ndropped += !keep;
      if (!keep || span == 0) continue;
      if (filled < span) {
        ring[filled++] = slot;
      } else {
        --in_span[ring[oldest]];
        ring[oldest] = slot;
        if (++oldest == span) oldest = 0;
      }
      ++in_span[slot];
    }
  }
  kept.resize(nkept);
  if (defer) kept.insert(kept.end(), dropped.begin(), dropped.begin() + ptrdiff_t(ndropped));
  return Capped{std::move(kept), ndropped};
}

Result<RowSet> RunCap(const TaskContext& ctx, RowSets in) {
  if (ctx.cancelled()) return Fail(CancelledError("cap"));
  const RowSet& rs = in[0];
  auto key = KeyColumn(ctx, rs, "cap");
  if (!key) return Fail(key.error());
  PoolVector<uint32_t> ids;
  std::optional<uint32_t> distinct = RowKeyIds(rs, **key, ids, CancelCheckOf(ctx));
  if (!distinct) return Fail(CancelledError("cap"));
  // Bounds 1..10000 (checked at load and per request): the casts are exact.
  std::optional<Capped> capped =
      CapRows(rs, ids, *distinct, static_cast<uint32_t>(ctx.args->I64("max")),
              static_cast<size_t>(ctx.args->I64("window")), ctx.args->Bool("defer"), ctx);
  if (!capped) return Fail(CancelledError("cap"));
  if (capped->dropped == 0) return std::move(in[0]);  // nothing capped: the input as it is
  return rs.WithSelection(std::move(capped->rows));
}

}  // namespace

void RegisterOps_feed_ops(TaskRegistry& r) {
  using P = TaskParamSpec;
  using S = TaskSpec;
  const std::vector<ColumnType> key_types = {ColumnType::kI64, ColumnType::kStr};
  r.Add(S::Cpu("diversify", 1, 1,
               {P::Required("key", ParamKind::kColumn).Reads(key_types),
                P::Required("score", ParamKind::kColumn).Reads({ColumnType::kF64}),
                // "": the score column itself (DiversifySchema, OutKey).
                P::Optional("out_key", ParamKind::kColumn, std::string()).Writes(),
                P::Optional("decay", ParamKind::kF64, 0.5).BoundsF64(0, 1).Ref(),
                P::Optional("floor", ParamKind::kF64, 0.25).BoundsF64(0, 1).Ref()},
               &DiversifySchema, &RunDiversify)
            .Doc("Discounts each repeat of a key value's score into out_key (default: the score "
                 "column), then sorts by it, descending.")
            .Adds({AddedColumn::ByParam("out_key", ColumnFrom::kFixed, ColumnType::kF64)}));
  r.Add(S::Cpu("cap", 1, 1,
               {P::Required("key", ParamKind::kColumn).Reads(key_types),
                P::Required("max", ParamKind::kI64).Bounds(1, 10000).Ref(),
                P::Required("window", ParamKind::kI64).Bounds(1, 10000).Ref(),
                P::Optional("defer", ParamKind::kBool, false)},
               &CapSchema, &RunCap)
            .Doc("Keeps at most max rows of a key value in any window consecutive rows; the "
                 "others are dropped, or with defer moved last."));
}

}  // namespace rankd
