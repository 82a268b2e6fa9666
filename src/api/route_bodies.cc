#include "api/route_bodies.h"

#include <algorithm>
#include <vector>

#include "api/rank_response.h"
#include "core/json_escape.h"

namespace rankd {

std::string ReadyzBody(std::string_view reasons) {
  if (reasons.empty()) return R"({"status":"ready"})";
  std::string body = R"({"status":"not_ready","reasons":)";
  AppendJsonString(reasons, body);
  body += "}";
  return body;
}

std::string PlansBody(const PlanSet& set) {
  std::vector<const Plan*> list;
  for (const auto& [n, p] : set.plans) list.push_back(p.get());
  std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::string body = R"({"plans":[)";
  for (size_t i = 0; i < list.size(); ++i) {
    const Plan& p = *list[i];
    if (i) body += ',';
    body += R"({"name":)";
    AppendJsonString(p.name, body);
    body += R"(,"description":)";
    AppendJsonString(p.description, body);
    body += R"(,"params":{)";
    for (size_t k = 0; k < p.params.decls.size(); ++k) {
      const auto& d = p.params.decls[k];
      if (k) body += ',';
      AppendJsonString(d.name, body);
      body += R"(:{"type":)";
      AppendJsonString(ColumnTypeName(d.type), body);
      body += '}';
    }
    body += R"(},"nodes":)";
    AppendJsonInt(static_cast<int64_t>(p.nodes.size()), body);
    body += '}';
  }
  body += "]}";
  return body;
}

std::string PlanBody(const Plan& plan) {
  if (plan.models.empty()) return plan.json;
  // The root object's closing brace: the loader parsed the text as one object.
  size_t close = plan.json.find_last_of('}');
  std::string body = plan.json.substr(0, close);
  body += ",\"models\":[";
  for (size_t i = 0; i < plan.models.size(); ++i) {
    body += i ? ",{\"name\":" : "{\"name\":";
    AppendJsonString(plan.models[i]->name(), body);
    body += ",\"sha256\":\"" + plan.models[i]->sha256() + "\"}";
  }
  body += ']';
  body.append(plan.json, close);
  return body;
}

std::string SchemaBody(const Schema& schema) {
  return R"({"sha256":")" + schema.sha256 + R"(","builtin":)" +
         (schema.builtin ? "true" : "false") + R"(,"schema":)" + schema.json + "}";
}

std::string_view ExperimentsBody(const ExperimentSet& set) {
  if (set.json.empty()) return R"({"experiments":[]})";
  return set.json;
}

}  // namespace rankd
