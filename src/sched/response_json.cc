#include "sched/response_json.h"

#include <charconv>
#include <cmath>

namespace rankd {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t Utf8Len(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    auto d = static_cast<unsigned char>(s[i + k]);
    if ((d >> 6) != 0x2) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  // Reject overlong forms, surrogates and code points past U+10FFFF.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return 0;
  return n;
}

void AppendCell(const Column& c, uint32_t row, std::string& out) {
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

}  // namespace

void AppendJsonString(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      ++i;
      continue;
    }
    size_t n = Utf8Len(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  out += '"';
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

void AppendRankResponse(const RunResult& r, bool explain, std::string& out) {
  const Plan& plan = *r.plan;
  const RowSet& rows = r.output;
  // The output columns and their `"name":` keys, looked up once.
  std::vector<std::pair<std::string, const Column*>> cols;
  if (plan.output_columns.empty()) {
    for (size_t i = 0; i < rows.num_columns(); ++i)
      cols.emplace_back(rows.column_name(i), rows.column_at(i).get());
  } else {
    for (const auto& name : plan.output_columns) cols.emplace_back(name, rows.column(name));
  }
  for (auto& [key, col] : cols) {
    std::string k;
    AppendJsonString(key, k);
    key = std::move(k) + ":";
  }
  out += "{\"plan\":";
  AppendJsonString(plan.name, out);
  out += ",\"user_id\":";
  AppendJsonInt(r.user_id, out);
  out += ",\"items\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += '{';
    uint32_t row = rows.row(i);
    for (size_t c = 0; c < cols.size(); ++c) {
      if (c) out += ',';
      out += cols[c].first;
      if (cols[c].second)
        AppendCell(*cols[c].second, row, out);
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
      out += ",\"start_us\":";
      AppendJsonInt(s.start_us, out);
      out += ",\"took_us\":";
      AppendJsonInt(s.took_us, out);
      out += '}';
    }
    out += ']';
  }
  out += '}';
}

void AppendErrorJson(const Error& e, std::string& out) {
  out += "{\"error\":{\"code\":";
  AppendJsonString(e.code_name(), out);
  out += ",\"message\":";
  AppendJsonString(e.message, out);
  out += "}}";
}

std::string ErrorJson(const Error& e) {
  std::string out;
  AppendErrorJson(e, out);
  return out;
}

}  // namespace rankd
