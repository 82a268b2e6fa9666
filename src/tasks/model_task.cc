// The `model` task: scores every selected row with the node's model (PlanNode::model)
// into an f64 column. Rows go to the model a block at a time, converted to float32
// feature columns (ModelInput: a missing value takes the node's fill, else becomes NaN;
// Model::Score takes NaN and +-inf as missing); a row a neural model cannot score (a
// missing input, a bad table index) stays null and is counted (TaskContext::null_rows).
// Cancellation is polled between blocks, each about a millisecond of work or less.
#include <algorithm>
#include <cmath>

#include "tasks/model_input.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

Result<ColumnTypes> ModelSchema(const SchemaArgs& a) {
  ColumnTypes t = a.inputs[0];
  SetColumnType(t, a.args.Str("out_key"), ColumnType::kF64);
  return t;
}

// Rows per block: about 2^16 tree walks (or 2^16 row_cost units for a neural model), so
// a block stays near a millisecond, and a small model still gets blocks long enough to
// run at full speed.
size_t BlockRows(const PlanNode& node) {
  const Model& m = *node.model.model;
  size_t cost = m.is_network() ? node.row_cost * size_t{16} : m.num_trees();
  return std::clamp<size_t>((size_t{1} << 16) / std::max<size_t>(cost, 1), 64, 1024);
}

// Feature f of logical rows [begin, begin + n) of `rs` as float32 into `dst`.
void ToFloats(const RowSet& rs, const Column* col, uint32_t element, float fill, size_t begin,
              size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = ModelInput(col, rs.row(begin + i), element, fill);
}

Result<RowSet> RunModel(const TaskContext& ctx, RowSets in) {
  if (ctx.cancelled()) return Fail(CancelledError("model"));
  RowSet out = std::move(in[0]);
  const NodeModel& bound = ctx.node->model;
  const Model& model = *bound.model;
  size_t nf = bound.columns.size();
  std::vector<const Column*> cols(nf);
  for (size_t f = 0; f < nf; ++f) {
    cols[f] = out.column(bound.columns[f]);  // absent: every row misses it
    if (cols[f] && cols[f]->type == ColumnType::kStr)
      return Fail(Error::BadRequest("model: column '" + bound.columns[f] +
                                    "' is str: a model feature needs i64, f64, bool or vec"));
    if (cols[f] && cols[f]->type == ColumnType::kVec && bound.elements[f] >= cols[f]->dim)
      return Fail(Error::Internal("model: column '" + bound.columns[f] +
                                  "' is vec:" + std::to_string(cols[f]->dim) +
                                  ", not the dimension typed at load"));
  }
  size_t rows = out.size();
  size_t block = BlockRows(*ctx.node);
  std::vector<float> features(nf * std::min(block, rows));
  std::vector<const float*> feature_ptrs(nf);
  std::vector<double> scores(std::min(block, rows));
  Column col = Column::F64(PoolVector<double>(out.physical_rows(), 0.0));
  // The rows a selection leaves out, and the rows without a score, stay null: the bitmap
  // starts all null and each scored row is marked valid.
  PoolVector<uint64_t>& valid = col.validity.mutable_words();
  valid.assign((out.physical_rows() + 63) / 64, 0);
  uint64_t nulls = 0;
  for (size_t begin = 0; begin < rows; begin += block) {
    if (begin > 0 && ctx.cancelled()) return Fail(CancelledError("model"));
    size_t n = std::min(block, rows - begin);
    for (size_t f = 0; f < nf; ++f) {
      ToFloats(out, cols[f], bound.elements[f], bound.fills[f], begin, n, features.data() + f * n);
      feature_ptrs[f] = features.data() + f * n;
    }
    model.Score(feature_ptrs, n, bound.output, scores.data());
    for (size_t i = 0; i < n; ++i) {
      uint32_t r = out.row(begin + i);
      if (std::isnan(scores[i])) {
        ++nulls;
        continue;
      }
      col.f64[r] = scores[i];
      valid[r >> 6] |= uint64_t{1} << (r & 63);
    }
  }
  out.SetColumn(ctx.args->Str("out_key"), Share(std::move(col)));
  if (ctx.null_rows) ctx.null_rows->store(nulls, std::memory_order_relaxed);
  return out;
}

}  // namespace

void RegisterOps_model_task(TaskRegistry& r) {
  using P = TaskParamSpec;
  r.Add(TaskSpec::Cpu("model", 1, 1,
                      {P::Required("model", ParamKind::kModel),
                       P::Required("out_key", ParamKind::kColumn).Writes(),
                       P::Optional("features", ParamKind::kColumnMap, std::vector<std::string>{}),
                       P::Optional("fill", ParamKind::kNumberMap, std::vector<std::string>{}),
                       P::Optional("output", ParamKind::kStr, std::string("default"))
                           .Allowed({"default", "margin"})},
                      &ModelSchema, &RunModel)
            .Doc("Scores every selected row with a model of the plan folder (XGBoost trees or "
                 "an ONNX MLP) into the f64 column out_key.")
            .Adds({AddedColumn::ByParam("out_key", ColumnFrom::kFixed, ColumnType::kF64)}));
}

}  // namespace rankd
