#include "plan/experiments.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>

#include "core/sha256.h"
#include "plan/json_values.h"

namespace rankd {

namespace {

using namespace json;  // the DOM's types and the number tests

class Parser {
 public:
  Parser(std::string_view file, const std::unordered_map<std::string, PlanPtr>& plans)
      : file_(file), plans_(plans) {}

  Result<ExperimentSetPtr> Parse(std::string_view text) {
    auto set = std::make_shared<ExperimentSet>();
    set->json = std::string(text);
    simdjson::dom::parser parser;
    element root;
    if (auto err = parser.parse(set->json).get(root))
      return Fail(Err("", std::string("invalid JSON: ") + simdjson::error_message(err)));
    object obj;
    if (root.get_object().get(obj)) return Fail(Err("", "must be a JSON object"));
    for (auto [k, _] : obj)
      if (k != "experiments") return Fail(Err("", "unknown field '" + std::string(k) + "'"));
    element v;
    array list;
    if (obj["experiments"].get(v) || v.get_array().get(list))
      return Fail(Err("", "experiments: missing or not an array"));
    size_t i = 0;
    for (element ej : list) {
      where_ = "experiments[" + std::to_string(i++) + "]";
      auto e = ParseOne(ej);
      if (!e) return Fail(e.error());
      for (const Experiment& o : set->experiments) {
        if (o.name == e->name) return Fail(Err("name", "duplicate experiment name"));
        if (o.plan == e->plan)
          return Fail(Err("plan", "plan '" + e->plan + "' already has experiment '" + o.name +
                                      "' (one experiment per plan)"));
      }
      set->experiments.push_back(std::move(*e));
    }
    return ExperimentSetPtr(std::move(set));
  }

 private:
  Error Err(std::string_view field, std::string_view what) const {
    std::string m = file_ + ": ";
    if (!where_.empty()) m += where_ + (field.empty() ? "" : ".");
    m += std::string(field) + (field.empty() && where_.empty() ? "" : ": ") + std::string(what);
    return Error::BadRequest(std::move(m));
  }

  Result<PlanPtr> PlanNamed(element e, std::string_view field) {
    std::string_view s;
    if (e.get_string().get(s)) return Fail(Err(field, "must be a plan name"));
    auto it = plans_.find(std::string(s));
    if (it == plans_.end()) return Fail(Err(field, "unknown plan '" + std::string(s) + "'"));
    return it->second;
  }

  Result<Experiment> ParseOne(element ej) {
    object o;
    if (ej.get_object().get(o)) return Fail(Err("", "must be an object"));
    for (auto [k, _] : o)
      if (k != "name" && k != "plan" && k != "salt" && k != "variants" && k != "shadow" &&
          k != "start_ms" && k != "end_ms")
        return Fail(Err("", "unknown field '" + std::string(k) + "'"));
    Experiment e;
    element v;
    std::string_view s;
    if (o["name"].get(v) || v.get_string().get(s) || s.empty())
      return Fail(Err("name", "missing or not a non-empty string"));
    e.name = std::string(s);
    where_ += " '" + e.name + "'";
    if (o["plan"].get(v)) return Fail(Err("plan", "missing"));
    auto requested = PlanNamed(v, "plan");
    if (!requested) return Fail(requested.error());
    e.plan = (*requested)->name;
    if (o["salt"].get(v) || v.get_string().get(s) || s.empty())
      return Fail(Err("salt", "missing or not a non-empty string"));
    e.salt = std::string(s);
    for (const char* f : {"start_ms", "end_ms"}) {
      if (o[f].get(v)) continue;
      if (!IsInt(v)) return Fail(Err(f, "must be an integer (Unix ms)"));
      (std::string_view(f) == "start_ms" ? e.start_ms : e.end_ms) = int64_t(v.get_int64());
    }
    if (e.start_ms && e.end_ms && *e.start_ms >= *e.end_ms)
      return Fail(Err("end_ms", "must be after start_ms"));
    array list;
    if (o["variants"].get(v) || v.get_array().get(list))
      return Fail(Err("variants", "missing or not an array"));
    uint32_t next = 0;
    size_t i = 0;
    for (element vj : list) {
      auto var = ParseVariant(vj, "variants[" + std::to_string(i++) + "]", e, **requested);
      if (!var) return Fail(var.error());
      var->first = next;
      var->end = next + var->weight;
      if (var->end > kExperimentBuckets)
        return Fail(Err("variants",
                        "weights sum to " + std::to_string(var->end) + ", over the 10000 buckets"));
      next = var->end;
      e.variants.push_back(std::move(*var));
    }
    if (!o["shadow"].get(v)) {
      if (v.get_array().get(list)) return Fail(Err("shadow", "must be an array"));
      i = 0;
      for (element sj : list) {
        auto sh = ParseShadow(sj, "shadow[" + std::to_string(i++) + "]", **requested);
        if (!sh) return Fail(sh.error());
        e.shadows.push_back(std::move(*sh));
      }
    }
    return e;
  }

  // variants[i] of `e` (its name checked against the variants before it); first and end
  // are the caller's.
  Result<ExperimentVariant> ParseVariant(element vj, const std::string& at, const Experiment& e,
                                         const Plan& requested) {
    object vo;
    if (vj.get_object().get(vo)) return Fail(Err(at, "must be an object"));
    for (auto [k, _] : vo)
      if (k != "name" && k != "plan" && k != "params" && k != "weight")
        return Fail(Err(at, "unknown field '" + std::string(k) + "'"));
    ExperimentVariant var;
    element v;
    std::string_view s;
    if (vo["name"].get(v) || v.get_string().get(s) || s.empty())
      return Fail(Err(at + ".name", "missing or not a non-empty string"));
    var.name = std::string(s);
    if (var.name == kControlVariant)
      return Fail(Err(at + ".name", "'control' is reserved (the requested plan itself)"));
    for (const auto& other : e.variants)
      if (other.name == var.name)
        return Fail(Err(at + ".name", "duplicate variant '" + var.name + "'"));
    if (vo["plan"].get(v)) return Fail(Err(at + ".plan", "missing"));
    auto plan = PlanNamed(v, at + ".plan");
    if (!plan) return Fail(plan.error());
    var.plan = *plan;
    if (auto st = SameUserIds(*var.plan, requested, at + ".plan"); !st) return Fail(st.error());
    if (!vo["params"].get(v)) {
      object po;
      if (v.get_object().get(po)) return Fail(Err(at + ".params", "must be an object"));
      for (auto [k, pv] : po) {
        auto val = json::Scalar(pv);
        if (!val)
          return Fail(Err(at + ".params." + std::string(k), "must be a number, string or bool"));
        var.params.emplace_back(std::string(k), std::move(*val));
      }
      if (auto bound = BindParams(*var.plan, var.params); !bound)
        return Fail(Err(at, bound.error().message));
    }
    if (vo["weight"].get(v) || !IsInt(v) || int64_t(v.get_int64()) < 0 ||
        int64_t(v.get_int64()) > kExperimentBuckets)
      return Fail(Err(at + ".weight", "missing or not an integer from 0 to 10000"));
    var.weight = static_cast<uint32_t>(int64_t(v.get_int64()));
    return var;
  }

  Result<ExperimentShadow> ParseShadow(element sj, const std::string& at, const Plan& requested) {
    object so;
    if (sj.get_object().get(so)) return Fail(Err(at, "must be an object"));
    for (auto [k, _] : so)
      if (k != "plan" && k != "percent" && k != "compare_top")
        return Fail(Err(at, "unknown field '" + std::string(k) + "'"));
    ExperimentShadow sh;
    element v;
    if (so["plan"].get(v)) return Fail(Err(at + ".plan", "missing"));
    auto plan = PlanNamed(v, at + ".plan");
    if (!plan) return Fail(plan.error());
    sh.plan = *plan;
    if (auto st = SameUserIds(*sh.plan, requested, at + ".plan"); !st) return Fail(st.error());
    if (so["percent"].get(v) || !IsNumber(v) || !(NumberOf(v) >= 0 && NumberOf(v) <= 100))
      return Fail(Err(at + ".percent", "missing or not a number from 0 to 100"));
    sh.percent = NumberOf(v);
    if (!so["compare_top"].get(v)) {
      if (!IsInt(v) || int64_t(v.get_int64()) < 1 || int64_t(v.get_int64()) > 1000)
        return Fail(Err(at + ".compare_top", "must be an integer from 1 to 1000"));
      sh.compare_top = static_cast<uint32_t>(int64_t(v.get_int64()));
    }
    return sh;
  }

  Status SameUserIds(const Plan& p, const Plan& requested, const std::string& field) {
    if (p.user_id_type == requested.user_id_type) return {};
    return Fail(Err(field, "plan '" + p.name + "' takes " +
                               std::string(ColumnTypeName(p.user_id_type)) + " user ids, plan '" +
                               requested.name + "' " +
                               std::string(ColumnTypeName(requested.user_id_type))));
  }

  std::string file_;
  const std::unordered_map<std::string, PlanPtr>& plans_;
  std::string where_;
};

}  // namespace

int Experiment::VariantOf(uint32_t bucket) const {
  for (size_t i = 0; i < variants.size(); ++i)
    if (bucket >= variants[i].first && bucket < variants[i].end) return static_cast<int>(i);
  return -1;
}

std::optional<int> Experiment::Find(std::string_view variant) const {
  if (variant == kControlVariant) return -1;
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i].name == variant) return static_cast<int>(i);
  return std::nullopt;
}

const Experiment* ExperimentSet::ForPlan(std::string_view plan) const {
  for (const Experiment& e : experiments)
    if (e.plan == plan) return &e;
  return nullptr;
}

const Experiment* ExperimentSet::Find(std::string_view name) const {
  for (const Experiment& e : experiments)
    if (e.name == name) return &e;
  return nullptr;
}

ExperimentSetPtr NoExperiments() {
  static const ExperimentSetPtr empty = std::make_shared<ExperimentSet>();
  return empty;
}

uint32_t ExperimentBucket(std::string_view salt, const UserId& user) {
  Sha256 h;
  h.Update(salt);
  h.Update(":");
  if (user.is_str) {
    h.Update(user.str);
  } else {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, user.num);
    h.Update(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
  }
  auto d = h.Final();
  uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x = (x << 8) | d[static_cast<size_t>(i)];
  return static_cast<uint32_t>(x % kExperimentBuckets);
}

Result<ExperimentSetPtr> ParseExperiments(std::string_view text, std::string_view file,
                                          const std::unordered_map<std::string, PlanPtr>& plans) {
  return Parser(file, plans).Parse(text);
}

}  // namespace rankd
