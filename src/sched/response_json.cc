#include "sched/response_json.h"

#include <charconv>
#include <cmath>
#include <span>

namespace rankd {

void AppendJsonCell(const Column& c, uint32_t row, std::string& out) {
  if (!c.valid(row)) {
    out += "null";
    return;
  }
  switch (c.type) {
    case ColumnType::kI64: AppendJsonInt(c.i64[row], out); break;
    case ColumnType::kF64: AppendJsonDouble(c.f64[row], out); break;
    case ColumnType::kBool: out += c.b[row] ? "true" : "false"; break;
    case ColumnType::kStr: AppendJsonString(c.str(row), out); break;
  }
}

void AppendJsonDouble(double d, std::string& out) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  out.append(buf, r.ptr);
}

void AppendJsonInt(int64_t v, std::string& out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendRankResponse(const RunResult& r, bool explain, std::string& out,
                        const ResponseExtras& extras) {
  const Plan& plan = *r.plan;
  const RowSet& rows = r.output;
  // The output columns and their `"name":` keys, looked up once.
  std::vector<std::pair<std::string, const Column*>> heap_cols;
  std::pair<std::string, const Column*> inline_cols[8];  // most plans: no allocation
  const size_t ncols =
      plan.output_columns.empty() ? rows.num_columns() : plan.output_columns.size();
  std::span<std::pair<std::string, const Column*>> cols(inline_cols);
  if (ncols > std::size(inline_cols)) {
    heap_cols.resize(ncols);
    cols = heap_cols;
  }
  cols = cols.first(ncols);
  if (plan.output_columns.empty()) {
    for (size_t i = 0; i < ncols; ++i) cols[i] = {rows.column_name(i), rows.column_at(i).get()};
  } else {
    for (size_t i = 0; i < ncols; ++i)
      cols[i] = {plan.output_columns[i], rows.column(plan.output_columns[i])};
  }
  for (auto& [key, col] : cols) {
    std::string k;
    AppendJsonString(key, k);
    k += ':';
    key = std::move(k);
  }
  out += "{\"plan\":";
  AppendJsonString(plan.name, out);
  out += ",\"user_id\":";
  if (r.user_id.is_str)
    AppendJsonString(r.user_id.str, out);
  else
    AppendJsonInt(r.user_id.num, out);
  out += ",\"items\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += '{';
    uint32_t row = rows.row(i);
    for (size_t c = 0; c < cols.size(); ++c) {
      if (c) out += ',';
      out += cols[c].first;
      if (cols[c].second)
        AppendJsonCell(*cols[c].second, row, out);
      else
        out += "null";
    }
    out += '}';
  }
  out += "],\"count\":";
  AppendJsonInt(static_cast<int64_t>(rows.size()), out);
  out += ",\"took_us\":";
  AppendJsonInt(r.took_us, out);
  out += ",\"degraded\":[";
  for (size_t i = 0; i < r.degraded.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(plan.nodes[r.degraded[i]].id, out);
  }
  out += ']';
  if (!extras.experiment.empty()) {
    out += ",\"experiment\":";
    AppendJsonString(extras.experiment, out);
    out += ",\"variant\":";
    AppendJsonString(extras.variant, out);
  }
  if (!extras.served_id.empty()) {
    out += ",\"served_id\":\"";
    out += extras.served_id;
    out += '"';
  }
  if (explain) {
    out += ",\"nodes\":[";
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      const NodeStat& s = r.nodes[i];
      if (i) out += ',';
      out += "{\"node_id\":";
      AppendJsonString(plan.nodes[i].id, out);
      out += ",\"op\":";
      AppendJsonString(plan.nodes[i].op, out);
      out += ",\"status\":\"";
      out += NodeStatusName(s.status);
      out += "\",\"rows\":";
      AppendJsonInt(static_cast<int64_t>(s.rows), out);
      if (!plan.nodes[i].inputs.empty() && s.status != NodeStatus::kSkipped) {
        // What the node read: its inputs' rows (an input listed twice counts twice).
        size_t rows_in = 0;
        for (uint32_t in : plan.nodes[i].inputs) rows_in += r.nodes[in].rows;
        out += ",\"rows_in\":";
        AppendJsonInt(static_cast<int64_t>(rows_in), out);
      }
      out += ",\"start_us\":";
      AppendJsonInt(s.start_us, out);
      out += ",\"took_us\":";
      AppendJsonInt(s.took_us, out);
      if (s.cache.used) {
        out += ",\"cache_hits\":";
        AppendJsonInt(static_cast<int64_t>(s.cache.hits), out);
        out += ",\"cache_misses\":";
        AppendJsonInt(static_cast<int64_t>(s.cache.misses), out);
      }
      if (const ModelPtr& m = plan.nodes[i].model.model) {
        out += ",\"model\":";
        AppendJsonString(m->name(), out);
        out += ",\"model_sha256\":\"";
        out += m->sha256();
        out += '"';
      }
      out += '}';
    }
    out += ']';
  }
  out += '}';
}

}  // namespace rankd
