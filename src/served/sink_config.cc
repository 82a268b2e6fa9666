#include "served/sink_config.h"

#include <algorithm>

#include "core/parse_int.h"

namespace rankd {

namespace {

Error Bad(std::string_view what) { return Error::BadRequest("--served-log: " + std::string(what)); }

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// "k=v&k=v" into pairs; false on an empty or '='-less part.
bool SplitQuery(std::string_view q,
                std::vector<std::pair<std::string_view, std::string_view>>& out) {
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    out.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return true;
}

}  // namespace

Result<SinkConfig> ParseSinkFlag(std::string_view value) {
  size_t eq = value.find('=');
  if (eq == std::string_view::npos)
    return Fail(Bad("'" + std::string(value) + "' is not NAME=URL"));
  SinkConfig c;
  c.name = std::string(value.substr(0, eq));
  c.url = std::string(value.substr(eq + 1));
  if (!ValidName(c.name))
    return Fail(Bad("sink name '" + c.name + "' must be 1 to 64 of A-Z a-z 0-9 _ - ."));
  std::string_view url = c.url;
  std::string where = "sink '" + c.name + "' (" + c.url + "): ";
  std::string_view rest;
  if (url.starts_with("redis-stream://")) {
    c.kind = SinkConfig::Kind::kRedisStream;
    rest = url.substr(15);
  } else if (url.starts_with("file://")) {
    c.kind = SinkConfig::Kind::kFile;
    rest = url.substr(7);
  } else {
    return Fail(Bad(where + "unknown scheme: use redis-stream:// or file://"));
  }
  size_t qm = rest.find('?');
  std::string_view target = rest.substr(0, qm);
  std::vector<std::pair<std::string_view, std::string_view>> query;
  if (qm == std::string_view::npos || !SplitQuery(rest.substr(qm + 1), query))
    return Fail(Bad(where + (c.kind == SinkConfig::Kind::kFile ? "needs ?max_mb=N&keep=K"
                                                               : "needs ?stream=S&maxlen=N")));
  bool have[2] = {false, false};
  for (auto [k, v] : query) {
    auto number = [&](int64_t lo, int64_t hi) -> Result<int64_t> {
      auto n = ParseStrictInt<int64_t>(v);
      if (!n || *n < lo || *n > hi)
        return Fail(Bad(where + std::string(k) + "='" + std::string(v) + "' is not an integer in " +
                        std::to_string(lo) + ".." + std::to_string(hi)));
      return *n;
    };
    if (c.kind == SinkConfig::Kind::kRedisStream && k == "stream") {
      if (v.empty()) return Fail(Bad(where + "stream= is empty"));
      c.stream = std::string(v);
      have[0] = true;
    } else if (c.kind == SinkConfig::Kind::kRedisStream && k == "maxlen") {
      auto n = number(1, int64_t{1} << 40);
      if (!n) return Fail(n.error());
      c.maxlen = static_cast<uint64_t>(*n);
      have[1] = true;
    } else if (c.kind == SinkConfig::Kind::kFile && k == "max_mb") {
      auto n = number(1, 1 << 20);
      if (!n) return Fail(n.error());
      c.max_bytes = static_cast<uint64_t>(*n) << 20;
      have[0] = true;
    } else if (c.kind == SinkConfig::Kind::kFile && k == "keep") {
      auto n = number(0, 1000);
      if (!n) return Fail(n.error());
      c.keep = static_cast<uint32_t>(*n);
      have[1] = true;
    } else {
      return Fail(Bad(where + "unknown parameter '" + std::string(k) + "'"));
    }
  }
  if (c.kind == SinkConfig::Kind::kRedisStream) {
    if (!have[0] || !have[1]) return Fail(Bad(where + "stream= and maxlen= are required"));
    if (target.empty() || target.find('/') != std::string_view::npos)
      return Fail(Bad(where + "after redis-stream:// comes the name of a --redis endpoint"));
    c.endpoint = std::string(target);
  } else {
    if (!have[0] || !have[1]) return Fail(Bad(where + "max_mb= and keep= are required"));
    if (!target.starts_with('/') || target.size() < 2 || target.back() == '/')
      return Fail(Bad(where + "needs an absolute file path: file:///dir/served.jsonl"));
    c.path = std::string(target);
  }
  return c;
}

Result<std::vector<SinkConfig>> ParseSinkFlags(const std::vector<std::string>& values,
                                               const std::vector<RedisEndpoint>& endpoints) {
  std::vector<SinkConfig> out;
  for (const auto& v : values) {
    auto c = ParseSinkFlag(v);
    if (!c) return Fail(c.error());
    for (const SinkConfig& o : out) {
      if (o.name == c->name) return Fail(Bad("sink '" + c->name + "' is given twice"));
      if (o.kind == SinkConfig::Kind::kFile && c->kind == SinkConfig::Kind::kFile &&
          o.path == c->path)
        return Fail(Bad("sinks '" + o.name + "' and '" + c->name + "' write the same file"));
    }
    if (c->kind == SinkConfig::Kind::kRedisStream &&
        std::none_of(endpoints.begin(), endpoints.end(),
                     [&](const RedisEndpoint& e) { return e.name == c->endpoint; }))
      return Fail(
          Bad("sink '" + c->name + "': no --redis endpoint is named '" + c->endpoint + "'"));
    out.push_back(std::move(*c));
  }
  return out;
}

std::vector<std::string> LogOnlyEndpoints(const std::vector<SinkConfig>& sinks,
                                          const PlanSet& plans) {
  std::vector<std::string> exempt;
  for (const SinkConfig& c : sinks)
    if (c.kind == SinkConfig::Kind::kRedisStream) exempt.push_back(c.endpoint);
  for (const auto& [name, plan] : plans.plans)
    for (const PlanNode& node : plan->nodes)
      for (size_t i = 0; i < node.args.size(); ++i)
        if (node.args.spec(i).name == "endpoint" &&
            std::holds_alternative<std::string>(node.args.at(i)))
          std::erase(exempt, std::get<std::string>(node.args.at(i)));
  return exempt;
}

}  // namespace rankd
