#include "api/rank_response.h"

#include <charconv>
#include <cmath>
#include <span>

namespace rankd {

RankItemWriter::RankItemWriter(const RunResult& r) {
  const Plan& plan = *r.plan;
  const RowSet& rows = r.output;
  const size_t ncols =
      plan.output_columns.empty() ? rows.num_columns() : plan.output_columns.size();
  cols_ = inline_cols_;
  if (ncols > std::size(inline_cols_)) {
    heap_cols_.resize(ncols);
    cols_ = heap_cols_;
  }
  cols_ = cols_.first(ncols);
  if (plan.output_columns.empty()) {
    for (size_t i = 0; i < ncols; ++i) cols_[i] = {rows.column_name(i), rows.column_at(i).get()};
  } else {
    for (size_t i = 0; i < ncols; ++i)
      cols_[i] = {plan.output_columns[i], rows.column(plan.output_columns[i])};
  }
  for (auto& [key, col] : cols_) {
    std::string k;
    AppendJsonString(key, k);
    k += ':';
    key = std::move(k);
  }
}

void RankItemWriter::Append(uint32_t row, std::string& out) const {
  out += '{';
  for (size_t c = 0; c < cols_.size(); ++c) {
    if (c) out += ',';
    out += cols_[c].first;
    if (cols_[c].second)
      AppendJsonCell(*cols_[c].second, row, out);
    else
      out += "null";
  }
  out += '}';
}

void AppendRankHead(const RunResult& r, std::string& out) {
  out += "{\"plan\":";
  AppendJsonString(r.plan->name, out);
  out += ",\"user_id\":";
  AppendJsonUserId(r.user_id, out);
  out += ",\"items\":[";
}

void AppendRankCounts(size_t count, int64_t took_us, std::string& out) {
  out += "],\"count\":";
  AppendJsonInt(static_cast<int64_t>(count), out);
  out += ",\"took_us\":";
  AppendJsonInt(took_us, out);
}

void AppendRankMeta(const RunResult& r, const ResponseExtras& extras, std::string& out) {
  const Plan& plan = *r.plan;
  out += ",\"degraded\":[";
  for (size_t i = 0; i < r.degraded.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(plan.nodes[r.degraded[i]].id, out);
  }
  out += ']';
  if (r.quality >= 0) {  // the plan has a quality block (docs/plan.md, "quality")
    out += ",\"quality\":";
    AppendJsonDouble(r.quality, out);
  }
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
}

void AppendRankCursor(std::string_view cursor, std::string& out) {
  out += ",\"cursor\":\"";
  out += cursor;
  out += '"';
}

void AppendRankNodes(const RunResult& r, std::string& out) {
  const Plan& plan = *r.plan;
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
      if (m->is_network()) {
        out += ",\"model_dispatch\":\"";
        out += m->dispatch();
        out += '"';
        // A run that did not finish (timeout) may still be writing its count: only a
        // finished one's is read.
        if (s.status == NodeStatus::kOk) {
          out += ",\"null_rows\":";
          AppendJsonInt(static_cast<int64_t>(s.null_rows), out);
        }
      }
    }
    out += '}';
  }
  out += ']';
}

void AppendRankResponse(const RunResult& r, bool explain, std::string& out,
                        const ResponseExtras& extras) {
  const RowSet& rows = r.output;
  RankItemWriter items(r);
  AppendRankHead(r, out);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    items.Append(rows.row(i), out);
  }
  AppendRankCounts(rows.size(), r.took_us, out);
  AppendRankMeta(r, extras, out);
  if (explain) AppendRankNodes(r, out);
  out += '}';
}

}  // namespace rankd
