#include "metrics/exposition.h"

#include <charconv>
#include <cmath>
#include <string_view>
#include <type_traits>
#include <vector>

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

// name[suffix]{labels[,le="bound"]} value
template <class V>
void AppendLine(const std::string& name, std::string_view suffix,
                const std::vector<ClientMetric::Label>& labels, V value, std::string& out,
                std::string_view le = {}) {
  AppendSeries(name, suffix, labels, le.empty() ? "" : "le", le, out);
  out += ' ';
  if constexpr (std::is_same_v<V, double>)
    AppendDouble(value, out);
  else
    AppendUint(value, out);
  out += '\n';
}

std::string_view TypeName(MetricType t) {
  switch (t) {
    case MetricType::Counter: return "counter";
    case MetricType::Histogram: return "histogram";
    default: return "gauge";
  }
}

}  // namespace

void WriteFamily(const prometheus::MetricFamily& f, std::string& out) {
  if (f.metric.empty()) return;
  out += "# HELP ";
  out += f.name;
  out += ' ';
  AppendEscaped(f.help, false, out);
  out += "\n# TYPE ";
  out += f.name;
  out += ' ';
  out += TypeName(f.type);
  out += '\n';
  char le[32];
  for (const auto& m : f.metric) {
    if (f.type == MetricType::Counter) {
      AppendLine(f.name, "", m.label, m.counter.value, out);
    } else if (f.type != MetricType::Histogram) {
      AppendLine(f.name, "", m.label, m.gauge.value, out);
    } else {
      for (const auto& b : m.histogram.bucket) {
        std::string_view bound = "+Inf";
        if (!std::isinf(b.upper_bound)) {
          auto [p, ec] = std::to_chars(le, le + sizeof le, b.upper_bound);
          bound = std::string_view(le, static_cast<size_t>(p - le));
        }
        AppendLine(f.name, "_bucket", m.label, b.cumulative_count, out, bound);
      }
      AppendLine(f.name, "_sum", m.label, m.histogram.sample_sum, out);
      AppendLine(f.name, "_count", m.label, m.histogram.sample_count, out);
    }
  }
}

}  // namespace rankd
