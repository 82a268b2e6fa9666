#include "server/exposition.h"

#include <charconv>
#include <cmath>
#include <string_view>

namespace rankd {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricType;

void AppendDouble(double v, std::string& out) {
  if (std::isnan(v)) return out.append("NaN"), void();
  if (std::isinf(v)) return out.append(v > 0 ? "+Inf" : "-Inf"), void();
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, p);
}

void AppendUint(uint64_t v, std::string& out) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, p);
}

// HELP text escapes backslash and newline; label values also escape the double quote.
void AppendEscaped(std::string_view s, bool quote, std::string& out) {
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quote && c == '"')
      out += "\\\"";
    else
      out += c;
  }
}

// name{labels[,extra_name="extra_value"]}
void AppendSeries(const std::string& name, std::string_view suffix,
                  const std::vector<ClientMetric::Label>& labels, std::string_view extra_name,
                  std::string_view extra_value, std::string& out) {
  out += name;
  out += suffix;
  if (labels.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& l : labels) {
    if (!first) out += ',';
    first = false;
    out += l.name;
    out += "=\"";
    AppendEscaped(l.value, true, out);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

std::string_view TypeName(MetricType t) {
  switch (t) {
    case MetricType::Counter: return "counter";
    case MetricType::Gauge: return "gauge";
    case MetricType::Histogram: return "histogram";
    case MetricType::Summary: return "summary";
    default: return "untyped";
  }
}

}  // namespace

void WriteFamily(const prometheus::MetricFamily& f, std::string& out) {
  if (f.metric.empty()) return;
  char le[32];
  out += "# HELP ";
  out += f.name;
  out += ' ';
  AppendEscaped(f.help, false, out);
  out += "\n# TYPE ";
  out += f.name;
  out += ' ';
  out += TypeName(f.type);
  out += '\n';
  for (const auto& m : f.metric) {
    switch (f.type) {
      case MetricType::Counter:
        AppendSeries(f.name, "", m.label, {}, {}, out);
        out += ' ';
        AppendDouble(m.counter.value, out);
        out += '\n';
        break;
      case MetricType::Gauge:
        AppendSeries(f.name, "", m.label, {}, {}, out);
        out += ' ';
        AppendDouble(m.gauge.value, out);
        out += '\n';
        break;
      case MetricType::Histogram: {
        for (const auto& b : m.histogram.bucket) {
          std::string_view bound;
          if (std::isinf(b.upper_bound)) {
            bound = "+Inf";
          } else {
            auto [p, ec] = std::to_chars(le, le + sizeof le, b.upper_bound);
            bound = std::string_view(le, static_cast<size_t>(p - le));
          }
          AppendSeries(f.name, "_bucket", m.label, "le", bound, out);
          out += ' ';
          AppendUint(b.cumulative_count, out);
          out += '\n';
        }
        AppendSeries(f.name, "_sum", m.label, {}, {}, out);
        out += ' ';
        AppendDouble(m.histogram.sample_sum, out);
        out += '\n';
        AppendSeries(f.name, "_count", m.label, {}, {}, out);
        out += ' ';
        AppendUint(m.histogram.sample_count, out);
        out += '\n';
        break;
      }
      case MetricType::Summary:
        for (const auto& q : m.summary.quantile) {
          char qb[32];
          auto [p, ec] = std::to_chars(qb, qb + sizeof qb, q.quantile);
          AppendSeries(f.name, "", m.label, "quantile",
                       std::string_view(qb, static_cast<size_t>(p - qb)), out);
          out += ' ';
          AppendDouble(q.value, out);
          out += '\n';
        }
        AppendSeries(f.name, "_sum", m.label, {}, {}, out);
        out += ' ';
        AppendDouble(m.summary.sample_sum, out);
        out += '\n';
        AppendSeries(f.name, "_count", m.label, {}, {}, out);
        out += ' ';
        AppendUint(m.summary.sample_count, out);
        out += '\n';
        break;
      default:
        AppendSeries(f.name, "", m.label, {}, {}, out);
        out += ' ';
        AppendDouble(m.untyped.value, out);
        out += '\n';
    }
  }
}

}  // namespace rankd
