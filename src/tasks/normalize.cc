// normalize: rescales a numeric column over the input's selected rows into an f64 column,
// as Vespa's global-phase normalizers do, so that scores of different scales (a model's
// margin, a like count, a retrieval rank) can be summed by a following vm. Statistics are
// computed in f64 in two passes over the selected non-null values (min, max and the mean,
// then the population variance); `rank` and `reciprocal_rank` sort those values, so the
// op costs O(rows) or O(rows log rows). Nulls stay null and count in no statistic.
// Threads: runs on the loop (small inputs) or a CPU worker (TaskContext).
#include <algorithm>
#include <cmath>

#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// Rows between two polls of ctx.cancelled() (each row costs a few ns).
constexpr size_t kNormalizePollRows = 16384;

enum class Method : uint8_t { kMinMax, kZScore, kRank, kReciprocalRank };

Method MethodOf(const std::string& name) {
  if (name == "zscore") return Method::kZScore;
  if (name == "rank") return Method::kRank;
  if (name == "reciprocal_rank") return Method::kReciprocalRank;
  return Method::kMinMax;  // the loader admits only the four names
}

// The selected non-null values of `col`, as f64 (bool as 0/1), with their physical rows.
struct Values {
  PoolVector<double> x;
  PoolVector<uint32_t> rows;
};

Values SelectedValues(const RowSet& rs, const Column& col) {
  Values v;
  v.x.reserve(rs.size());
  v.rows.reserve(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    const uint32_t r = rs.row(i);
    if (!col.valid(r)) continue;
    double x = col.type == ColumnType::kI64   ? static_cast<double>(col.i64[r])
               : col.type == ColumnType::kF64 ? col.f64[r]
                                              : static_cast<double>(col.b[r]);
    v.x.push_back(x);
    v.rows.push_back(r);
  }
  return v;
}

// out[i] for minmax and zscore: a shift and a scale from the two passes' statistics. A
// constant column (zero range or deviation) gives 0 for every row.
bool Rescale(Method m, const Values& v, PoolVector<double>& out, const TaskContext& ctx) {
  const size_t n = v.x.size();
  double lo = v.x[0], hi = v.x[0], mean = 0;
  for (size_t i = 0; i < n; ++i) {  // a running mean does not overflow where a sum would
    if (i % kNormalizePollRows == 0 && ctx.cancelled()) return false;
    lo = std::min(lo, v.x[i]);
    hi = std::max(hi, v.x[i]);
    mean += (v.x[i] - mean) / static_cast<double>(i + 1);
  }
  double shift = lo, scale = hi - lo;
  if (m == Method::kZScore) {
    double var = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i % kNormalizePollRows == 0 && ctx.cancelled()) return false;
      const double d = v.x[i] - mean;
      var += (d * d - var) / static_cast<double>(i + 1);
    }
    shift = mean;
    scale = std::sqrt(var);
  }
  for (size_t i = 0; i < n; ++i) out[i] = scale == 0 ? 0 : (v.x[i] - shift) / scale;
  return true;
}

// out[i] for rank and reciprocal_rank: 1 + the number of values greater than x[i] (ties
// share the smallest rank), or 1 / (k + that rank).
bool Ranks(Method m, double k, const Values& v, PoolVector<double>& out, const TaskContext& ctx) {
  const size_t n = v.x.size();
  PoolVector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return v.x[a] > v.x[b]; });
  if (ctx.cancelled()) return false;
  double rank = 1;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && v.x[order[i]] != v.x[order[i - 1]]) rank = static_cast<double>(i + 1);
    out[order[i]] = m == Method::kRank ? rank : 1 / (k + rank);
  }
  return true;
}

Result<RowSet> RunNormalize(const TaskContext& ctx, RowSets in) {
  if (ctx.cancelled()) return Fail(CancelledError("normalize"));
  RowSet out = std::move(in[0]);
  auto key = KeyColumn(ctx, out, "normalize");
  if (!key) return Fail(key.error());
  const Values v = SelectedValues(out, **key);
  const Method m = MethodOf(ctx.args->Str("method"));
  PoolVector<double> normalized(v.x.size());
  if (!v.x.empty()) {
    const bool done = m == Method::kMinMax || m == Method::kZScore
                          ? Rescale(m, v, normalized, ctx)
                          : Ranks(m, ctx.args->F64("k"), v, normalized, ctx);
    if (!done) return Fail(CancelledError("normalize"));
  }
  // By physical row, lined up with the input's other columns: null outside the selection,
  // where the key is null, and where the result is not finite (f64 columns never hold one).
  const size_t rows = out.physical_rows();
  PoolVector<double> cells(rows, 0.0);
  PoolVector<uint64_t> valid((rows + 63) / 64, 0);
  for (size_t i = 0; i < v.x.size(); ++i) {
    if (i % kNormalizePollRows == 0 && ctx.cancelled()) return Fail(CancelledError("normalize"));
    if (!std::isfinite(normalized[i])) continue;
    const uint32_t r = v.rows[i];
    cells[r] = normalized[i];
    valid[r >> 6] |= uint64_t{1} << (r & 63);
  }
  Column col = Column::F64(std::move(cells));
  col.validity.mutable_words() = std::move(valid);
  out.SetColumn(ctx.args->Str("out_key"), Share(std::move(col)));
  return out;
}

}  // namespace

void RegisterOps_normalize(TaskRegistry& r) {
  using P = TaskParamSpec;
  r.Add(TaskSpec::Cpu("normalize", 1, 1,
                      {P::Required("key", ParamKind::kColumn)
                           .Reads({ColumnType::kI64, ColumnType::kF64, ColumnType::kBool}),
                       P::Required("out_key", ParamKind::kColumn).Writes(),
                       P::Required("method", ParamKind::kStr)
                           .Allowed({"minmax", "zscore", "rank", "reciprocal_rank"}),
                       P::Optional("k", ParamKind::kF64, 60.0).BoundsF64(0, 1e9).Ref()},
                      &SchemaAsDeclared, &RunNormalize)
            .Doc("Rescales key over the selected rows into the f64 column out_key: minmax, "
                 "zscore, rank or reciprocal_rank (1 / (k + rank)).")
            .Adds({AddedColumn::ByParam("out_key", ColumnFrom::kFixed, ColumnType::kF64)}));
}

}  // namespace rankd
