#include "plan/bind.h"

#include <charconv>
#include <cmath>

#include "core/client_text.h"

namespace rankd {

namespace {

std::string DoubleToString(double d) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

std::string BoundsText(const std::optional<double>& lo, const std::optional<double>& hi) {
  std::string s = lo ? DoubleToString(*lo) : "";
  s += "..";
  if (hi) s += DoubleToString(*hi);
  return s;
}

}  // namespace

std::string ValueToString(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return DoubleToString(*d);
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
  if (auto* l = std::get_if<std::vector<std::string>>(&v)) {
    std::string out = "[";
    for (size_t i = 0; i < l->size(); ++i) out += (i ? ", \"" : "\"") + (*l)[i] + "\"";
    return out + "]";
  }
  return "null";
}

std::optional<Value> Coerce(const Value& v, ParamKind kind) {
  // Built in place: moving a Value into an optional trips GCC 12's
  // -Wmaybe-uninitialized under the sanitizers.
  std::optional<Value> out;
  const auto* i = std::get_if<int64_t>(&v);
  switch (kind) {
    case ParamKind::kI64:
      if (i) out.emplace(std::in_place_type<int64_t>, *i);
      break;
    case ParamKind::kF64:
      if (auto* d = std::get_if<double>(&v)) out.emplace(std::in_place_type<double>, *d);
      if (i) out.emplace(std::in_place_type<double>, static_cast<double>(*i));
      break;
    case ParamKind::kBool:
      if (auto* b = std::get_if<bool>(&v)) out.emplace(std::in_place_type<bool>, *b);
      break;
    case ParamKind::kStr:
      if (auto* s = std::get_if<std::string>(&v)) out.emplace(std::in_place_type<std::string>, *s);
      break;
    default: break;  // lists, column names and table ids are literals only
  }
  return out;
}

std::string CheckArg(const TaskParamSpec& spec, const Value& v) {
  auto range = [&] {
    return (spec.min ? std::to_string(*spec.min) : "") + ".." +
           (spec.max ? std::to_string(*spec.max) : "");
  };
  if (auto* i = std::get_if<int64_t>(&v)) {
    if ((spec.min && *i < *spec.min) || (spec.max && *i > *spec.max))
      return std::to_string(*i) + " is out of bounds " + range();
  }
  if (auto* d = std::get_if<double>(&v)) {
    // Written so that NaN fails too.
    if ((spec.min_f64 && !(*d >= *spec.min_f64)) || (spec.max_f64 && !(*d <= *spec.max_f64)))
      return ValueToString(v) + " is out of bounds " + BoundsText(spec.min_f64, spec.max_f64);
  }
  if (auto* s = std::get_if<std::string>(&v)) {
    if (spec.kind == ParamKind::kColumn && s->empty()) return "a column name must not be empty";
    if (!spec.allowed.empty()) {
      bool ok = false;
      for (const auto& a : spec.allowed) ok = ok || a == *s;
      // A request's param can be this value (a {"param"} reference): quote it bounded.
      if (!ok) return "\"" + ClientText(*s) + "\" is not one of " + ValueToString(spec.allowed);
    }
  }
  if (auto* l = std::get_if<std::vector<std::string>>(&v); l && spec.kind == ParamKind::kStrList) {
    if (spec.min && static_cast<int64_t>(l->size()) < *spec.min)
      return "needs at least " + std::to_string(*spec.min) + " element(s)";
    for (size_t i = 0; i < l->size(); ++i) {
      bool ok = spec.allowed.empty();
      for (const auto& a : spec.allowed) ok = ok || a == (*l)[i];
      if (!ok)
        return "\"" + ClientText((*l)[i]) + "\" is not one of " + ValueToString(spec.allowed);
      for (size_t j = 0; j < i; ++j)
        if ((*l)[j] == (*l)[i]) return "\"" + ClientText((*l)[i]) + "\" is listed twice";
    }
  }
  return {};
}

Result<ParamValues> BindParams(const Plan& plan, const GivenParams& given) {
  ParamValues values;
  values.reserve(plan.params.decls.size() + plan.from_values.size());
  for (const auto& d : plan.params.decls) values.push_back(d.default_value);
  for (const auto& [name, v] : given) {
    int idx = plan.params.index_of(name);
    if (idx < 0)
      return Fail(Error::InvalidParam("params." + ClientText(name, 64) + ": plan '" + plan.name +
                                      "' declares no such param"));
    const ParamDecl& d = plan.params.decls[static_cast<size_t>(idx)];
    auto coerced = Coerce(v, ParamKindOf(d.type));
    if (!coerced)
      return Fail(Error::InvalidParam("params." + name + ": expected " +
                                      std::string(ColumnTypeName(d.type)) + ", got " +
                                      ClientText(ValueToString(v), 64)));
    double num = 0;
    bool is_num = false;
    if (auto* i = std::get_if<int64_t>(&*coerced)) num = static_cast<double>(*i), is_num = true;
    if (auto* f = std::get_if<double>(&*coerced)) {
      if (!std::isfinite(*f))
        return Fail(Error::InvalidParam("params." + name + ": must be finite"));
      num = *f, is_num = true;
    }
    if (is_num && ((d.min && num < *d.min) || (d.max && num > *d.max)))
      return Fail(Error::InvalidParam("params." + name + ": " + ValueToString(*coerced) +
                                      " is out of bounds " + BoundsText(d.min, d.max)));
    values[static_cast<size_t>(idx)] = std::move(*coerced);
  }
  values.resize(values.size() + plan.from_values.size());
  return values;
}

Result<TaskArgs> ResolveArgs(const Plan& plan, const PlanNode& node, const ParamValues& values) {
  TaskArgs args = node.args;
  for (const ParamRef& r : node.refs) {
    const TaskParamSpec& spec = args.spec(r.arg);
    const ParamDecl& d = plan.params.decls[r.decl];
    // The loader checked the declared type against the parameter's kind.
    auto arg = Coerce(values[r.decl], spec.kind);
    if (!arg)
      return Fail(Error::Internal("node '" + node.id + "': params." + spec.name + ": param '" +
                                  d.name + "' has the wrong type"));
    std::string bad = CheckArg(spec, *arg);
    if (!bad.empty())
      return Fail(Error::InvalidParam("params." + d.name + ": " + bad + " for node '" + node.id +
                                      "' param '" + spec.name + "'"));
    args.at(r.arg) = std::move(*arg);
  }
  return args;
}

}  // namespace rankd
