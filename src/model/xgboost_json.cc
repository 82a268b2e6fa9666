#include "model/xgboost_json.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <type_traits>

namespace rankd {
namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view kSupportedObjectives[] = {
    "reg:squarederror", "reg:pseudohubererror", "reg:absoluteerror", "reg:logistic",
    "binary:logistic",  "binary:logitraw",      "rank:pairwise",     "rank:ndcg",
    "rank:map",
};

// One read of one file: turns simdjson's errors and our checks into messages
// "FILE: PATH: WHAT".
class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  std::unexpected<Error> Bad(std::string_view path, std::string_view what) const {
    return Fail(Error::BadRequest(file_ + ": " + std::string(path) + ": " + std::string(what)));
  }
  std::unexpected<Error> Json(std::string_view path, simdjson::error_code e) const {
    return Bad(path, std::string("invalid JSON: ") + simdjson::error_message(e));
  }

  // Calls fn(key, value) for each field of the object `v`, in document order.
  template <class Fn>
  Status Fields(od::value v, std::string_view path, Fn&& fn) const {
    od::object object;
    if (auto e = v.get_object().get(object)) return Expected(path, e, "an object");
    return Fields(object, path, fn);
  }
  template <class Fn>
  Status Fields(od::object& object, std::string_view path, Fn&& fn) const {
    for (auto field_result : object) {
      od::field field;
      if (auto e = std::move(field_result).get(field)) return Json(path, e);
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return Json(path, e);
      if (Status s = fn(key, field.value()); !s) return s;
    }
    return {};
  }
  // Calls fn(index, value) for each element of the array `v`.
  template <class Fn>
  Status Elements(od::value v, std::string_view path, Fn&& fn) const {
    od::array array;
    if (auto e = v.get_array().get(array)) return Expected(path, e, "an array");
    size_t i = 0;
    for (auto element_result : array) {
      od::value element;
      if (auto e = std::move(element_result).get(element)) return Json(path, e);
      if (Status s = fn(i++, element); !s) return s;
    }
    return {};
  }

  Result<std::string> String(od::value v, std::string_view path) const {
    std::string_view s;
    if (auto e = v.get_string().get(s)) return Expected(path, e, "a string");
    return std::string(s);
  }
  Result<int64_t> Int(od::value v, std::string_view path) const {
    int64_t i;
    if (auto e = v.get_int64().get(i)) return Expected(path, e, "an integer");
    return i;
  }
  // The number's own text read as float32, as XGBoost reads its JSON: a detour through
  // double could round twice.
  Result<float> Float(od::value v, std::string_view path) const {
    std::string_view text = v.raw_json_token();
    double checked;  // simdjson validates the JSON number syntax
    if (auto e = v.get_double().get(checked)) return Expected(path, e, "a number");
    return FloatText(text, path);
  }
  // Appends the elements of an array of numbers (float32 or integers) to `out`.
  template <class T>
  Status Numbers(od::value v, std::string_view path, std::vector<T>& out) const {
    return Elements(v, path, [&](size_t, od::value e) -> Status {
      Result<T> x;
      if constexpr (std::is_same_v<T, float>)
        x = Float(e, path);
      else
        x = Int(e, path);
      if (!x) return Fail(x.error());
      out.push_back(*x);
      return {};
    });
  }
  // XGBoost writes its parameters as strings: "3E-1".
  Result<float> FloatString(od::value v, std::string_view path) const {
    Result<std::string> s = String(v, path);
    if (!s) return Fail(s.error());
    return FloatText(*s, path);
  }
  Result<uint64_t> UintString(od::value v, std::string_view path) const {
    Result<std::string> s = String(v, path);
    if (!s) return Fail(s.error());
    uint64_t u;
    auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), u);
    if (ec != std::errc{} || end != s->data() + s->size() || s->empty())
      return Bad(path, "'" + *s + "' is not a count");
    return u;
  }

 private:
  std::unexpected<Error> Expected(std::string_view path, simdjson::error_code e,
                                  std::string_view what) const {
    if (e == simdjson::INCORRECT_TYPE || e == simdjson::NUMBER_OUT_OF_RANGE)
      return Bad(path, "expected " + std::string(what));
    return Json(path, e);
  }
  Result<float> FloatText(std::string_view text, std::string_view path) const {
    while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' ||
                             text.back() == '\t'))
      text.remove_suffix(1);
    float f;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), f);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || !std::isfinite(f))
      return Bad(path, "'" + std::string(text) + "' is not a finite float32");
    return f;
  }

  const std::string& file_;
};

std::string TreePath(size_t tree) { return "tree " + std::to_string(tree); }

// What the JSON says beyond the trees' arrays, checked once everything is read.
struct Raw {
  std::string booster;  // gradient_booster.name
  std::string objective;
  std::optional<float> base_score;
  std::optional<uint64_t> num_feature, num_class, num_target;
  std::optional<uint64_t> num_trees;
  std::vector<int64_t> tree_info;
  std::vector<float> weight_drop;
  std::vector<std::string> feature_names, feature_types;
  std::vector<TreeArrays> trees;
};

// One element of learner.gradient_booster.model.trees.
Status ReadTree(const Reader& in, od::value v, size_t t, TreeArrays& tree) {
  const std::string path = TreePath(t);
  std::optional<uint64_t> num_nodes;
  auto node_error = [&](size_t node, std::string_view field, std::string_view what) {
    return in.Bad(path + ": node " + std::to_string(node),
                  std::string(field) + ": " + std::string(what));
  };
  auto children = [&](od::value array, std::string_view field, std::vector<int32_t>& out) {
    return in.Elements(array, path + ": " + std::string(field),
                       [&](size_t i, od::value e) -> Status {
                         Result<int64_t> c = in.Int(e, path + ": " + std::string(field));
                         if (!c) return Fail(c.error());
                         if (*c < -1 || *c > std::numeric_limits<int32_t>::max())
                           return node_error(i, field, std::to_string(*c) + " is out of range");
                         out.push_back(static_cast<int32_t>(*c));
                         return {};
                       });
  };
  Status read = in.Fields(v, path, [&](std::string_view key, od::value f) -> Status {
    const std::string field = path + ": " + std::string(key);
    if (key == "left_children") return children(f, key, tree.left);
    if (key == "right_children") return children(f, key, tree.right);
    if (key == "split_indices")
      return in.Elements(f, field, [&](size_t i, od::value e) -> Status {
        Result<int64_t> s = in.Int(e, field);
        if (!s) return Fail(s.error());
        if (*s < 0 || *s > std::numeric_limits<int32_t>::max())
          return node_error(i, key, std::to_string(*s) + " is out of range");
        tree.split_index.push_back(static_cast<uint32_t>(*s));
        return {};
      });
    if (key == "split_conditions") return in.Numbers(f, field, tree.split_condition);
    if (key == "default_left")
      return in.Elements(f, field, [&](size_t, od::value e) -> Status {
        bool b;
        if (e.get_bool().get(b) == simdjson::SUCCESS) {
          tree.default_left.push_back(b);
          return {};
        }
        Result<int64_t> i = in.Int(e, field);
        if (!i) return Fail(i.error());
        tree.default_left.push_back(*i != 0);
        return {};
      });
    if (key == "split_type")
      return in.Elements(f, field, [&](size_t i, od::value e) -> Status {
        Result<int64_t> s = in.Int(e, field);
        if (!s) return Fail(s.error());
        if (*s != 0)
          return node_error(i, key, std::to_string(*s) + " (categorical) is not supported");
        return {};
      });
    if (key == "categories" || key == "categories_nodes")
      return in.Elements(f, field, [&](size_t, od::value) -> Status {
        return in.Bad(field, "categorical splits are not supported");
      });
    if (key == "tree_param")
      return in.Fields(f, field, [&](std::string_view k, od::value p) -> Status {
        const std::string param = field + "." + std::string(k);
        if (k == "num_nodes") {
          Result<uint64_t> n = in.UintString(p, param);
          if (!n) return Fail(n.error());
          num_nodes = *n;
        } else if (k == "size_leaf_vector") {
          Result<uint64_t> n = in.UintString(p, param);
          if (!n) return Fail(n.error());
          if (*n > 1)
            return in.Bad(param, std::to_string(*n) + " (vector leaves) is not supported");
        }
        return {};
      });
    return {};
  });
  if (!read) return read;
  if (!num_nodes) return in.Bad(path + ": tree_param.num_nodes", "missing");
  const std::pair<std::string_view, size_t> lengths[] = {
      {"left_children", tree.left.size()},        {"right_children", tree.right.size()},
      {"split_indices", tree.split_index.size()}, {"split_conditions", tree.split_condition.size()},
      {"default_left", tree.default_left.size()},
  };
  for (auto [name, size] : lengths)
    if (size != *num_nodes)
      return in.Bad(path + ": " + std::string(name), std::to_string(size) +
                                                         " entries, but tree_param.num_nodes is " +
                                                         std::to_string(*num_nodes));
  return {};
}

// gradient_booster.model of gbtree (or gradient_booster.gbtree.model of dart).
Status ReadGbtreeModel(const Reader& in, od::value v, const std::string& path, Raw& raw) {
  return in.Fields(v, path, [&](std::string_view key, od::value f) -> Status {
    const std::string field = path + "." + std::string(key);
    if (key == "trees")
      return in.Elements(f, field, [&](size_t t, od::value e) -> Status {
        raw.trees.emplace_back();
        return ReadTree(in, e, t, raw.trees.back());
      });
    if (key == "tree_info") return in.Numbers(f, field, raw.tree_info);
    if (key == "gbtree_model_param")
      return in.Fields(f, field, [&](std::string_view k, od::value p) -> Status {
        if (k != "num_trees") return {};
        Result<uint64_t> n = in.UintString(p, field + ".num_trees");
        if (!n) return Fail(n.error());
        raw.num_trees = *n;
        return {};
      });
    return {};
  });
}

Status ReadBooster(const Reader& in, od::value v, Raw& raw) {
  const std::string path = "learner.gradient_booster";
  return in.Fields(v, path, [&](std::string_view key, od::value f) -> Status {
    if (key == "name") {
      Result<std::string> name = in.String(f, path + ".name");
      if (!name) return Fail(name.error());
      raw.booster = *name;
      return {};
    }
    if (key == "model") return ReadGbtreeModel(in, f, path + ".model", raw);
    if (key == "gbtree")  // dart: the gbtree it wraps
      return in.Fields(f, path + ".gbtree", [&](std::string_view k, od::value m) -> Status {
        if (k != "model") return {};
        return ReadGbtreeModel(in, m, path + ".gbtree.model", raw);
      });
    if (key == "weight_drop") return in.Numbers(f, path + ".weight_drop", raw.weight_drop);
    return {};
  });
}

Status ReadStrings(const Reader& in, od::value v, const std::string& path,
                   std::vector<std::string>& out) {
  return in.Elements(v, path, [&](size_t, od::value e) -> Status {
    Result<std::string> s = in.String(e, path);
    if (!s) return Fail(s.error());
    out.push_back(std::move(*s));
    return {};
  });
}

Status ReadLearner(const Reader& in, od::value v, Raw& raw) {
  return in.Fields(v, "learner", [&](std::string_view key, od::value f) -> Status {
    if (key == "gradient_booster") return ReadBooster(in, f, raw);
    if (key == "feature_names")
      return ReadStrings(in, f, "learner.feature_names", raw.feature_names);
    if (key == "feature_types")
      return ReadStrings(in, f, "learner.feature_types", raw.feature_types);
    if (key == "objective")
      return in.Fields(f, "learner.objective", [&](std::string_view k, od::value o) -> Status {
        if (k != "name") return {};
        Result<std::string> name = in.String(o, "learner.objective.name");
        if (!name) return Fail(name.error());
        raw.objective = *name;
        return {};
      });
    if (key == "learner_model_param")
      return in.Fields(f, "learner.learner_model_param",
                       [&](std::string_view k, od::value p) -> Status {
                         const std::string param = "learner.learner_model_param." + std::string(k);
                         std::optional<uint64_t>* count = k == "num_feature"  ? &raw.num_feature
                                                          : k == "num_class"  ? &raw.num_class
                                                          : k == "num_target" ? &raw.num_target
                                                                              : nullptr;
                         if (count) {
                           Result<uint64_t> n = in.UintString(p, param);
                           if (!n) return Fail(n.error());
                           *count = *n;
                         } else if (k == "base_score") {
                           Result<float> b = in.FloatString(p, param);
                           if (!b) return Fail(b.error());
                           raw.base_score = *b;
                         }
                         return {};
                       });
    return {};
  });
}

// The JSON's "version": [major, minor, patch]; XGBoost 2 changed the schema.
Status CheckVersion(const Reader& in, od::document& doc) {
  od::value version;
  if (auto e = doc.find_field_unordered("version").get(version)) {
    if (e == simdjson::NO_SUCH_FIELD) return in.Bad("version", "missing");
    return in.Json("(document)", e);  // the search for it crossed the whole document
  }
  std::vector<int64_t> parts;
  if (Status read = in.Numbers(version, "version", parts); !read) return read;
  if (parts.empty()) return in.Bad("version", "empty");
  if (parts[0] >= 2)
    return in.Bad("version", std::to_string(parts[0]) +
                                 ".x: models saved by XGBoost 2 or later are not supported "
                                 "(save with XGBoost 1.x)");
  return {};
}

// Everything read; now what rankd evaluates, in the order that names the deepest reason.
Result<XgboostModel> Check(const Reader& in, Raw& raw) {
  if (raw.booster.empty()) return in.Bad("learner.gradient_booster.name", "missing");
  if (raw.booster != "gbtree" && raw.booster != "dart")
    return in.Bad("learner.gradient_booster.name", "'" + raw.booster + "' is not supported");
  if (raw.num_class.value_or(0) > 1)
    return in.Bad("learner.learner_model_param.num_class",
                  std::to_string(*raw.num_class) + " (multi-class) is not supported");
  if (raw.num_target.value_or(1) > 1)
    return in.Bad("learner.learner_model_param.num_target",
                  std::to_string(*raw.num_target) + " (multiple targets) is not supported");
  if (raw.objective.empty()) return in.Bad("learner.objective.name", "missing");
  if (std::ranges::find(kSupportedObjectives, raw.objective) == std::end(kSupportedObjectives))
    return in.Bad("learner.objective.name", "'" + raw.objective + "' is not supported");
  for (size_t i = 0; i < raw.feature_types.size(); ++i)
    if (raw.feature_types[i] == "c")
      return in.Bad("learner.feature_types[" + std::to_string(i) + "]",
                    "'c' (categorical) is not supported");
  if (!raw.num_feature) return in.Bad("learner.learner_model_param.num_feature", "missing");
  if (*raw.num_feature > std::numeric_limits<int32_t>::max())
    return in.Bad("learner.learner_model_param.num_feature", "too large");
  if (!raw.base_score) return in.Bad("learner.learner_model_param.base_score", "missing");
  if (!raw.feature_names.empty()) {
    if (raw.feature_names.size() != *raw.num_feature)
      return in.Bad("learner.feature_names", std::to_string(raw.feature_names.size()) +
                                                 " names for " + std::to_string(*raw.num_feature) +
                                                 " features (num_feature)");
    std::set<std::string_view> seen;
    for (const std::string& name : raw.feature_names)
      if (!seen.insert(name).second)
        return in.Bad("learner.feature_names", "'" + name + "' appears twice");
  }
  const std::string trees = raw.booster == "dart" ? "learner.gradient_booster.gbtree.model"
                                                  : "learner.gradient_booster.model";
  if (!raw.num_trees) return in.Bad(trees + ".gbtree_model_param.num_trees", "missing");
  if (*raw.num_trees != raw.trees.size())
    return in.Bad(trees + ".gbtree_model_param.num_trees",
                  std::to_string(*raw.num_trees) + ", but there are " +
                      std::to_string(raw.trees.size()) + " trees");
  if (raw.tree_info.size() != raw.trees.size())
    return in.Bad(trees + ".tree_info", std::to_string(raw.tree_info.size()) + " entries for " +
                                            std::to_string(raw.trees.size()) + " trees");
  for (size_t t = 0; t < raw.tree_info.size(); ++t)
    if (raw.tree_info[t] != 0)
      return in.Bad(trees + ".tree_info[" + std::to_string(t) + "]",
                    "output group " + std::to_string(raw.tree_info[t]) + " is not supported");
  if (raw.booster == "dart") {
    if (raw.weight_drop.size() != raw.trees.size())
      return in.Bad("learner.gradient_booster.weight_drop",
                    std::to_string(raw.weight_drop.size()) + " weights for " +
                        std::to_string(raw.trees.size()) + " trees");
    for (size_t t = 0; t < raw.trees.size(); ++t) raw.trees[t].weight = raw.weight_drop[t];
  }
  XgboostModel model;
  model.objective = std::move(raw.objective);
  model.base_score = *raw.base_score;
  model.num_feature = static_cast<uint32_t>(*raw.num_feature);
  model.feature_names = std::move(raw.feature_names);
  model.trees = std::move(raw.trees);
  return model;
}

}  // namespace

Result<XgboostModel> ParseXgboostJson(std::string_view bytes, const std::string& file) {
  const Reader in(file);
  simdjson::padded_string padded(bytes);
  od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(padded).get(doc)) return in.Json("(document)", e);
  if (Status s = CheckVersion(in, doc); !s) return Fail(s.error());
  doc.rewind();
  od::object root;
  if (auto e = doc.get_object().get(root)) return in.Json("(document)", e);
  Raw raw;
  bool has_learner = false;
  Status read = in.Fields(root, "(document)", [&](std::string_view key, od::value v) -> Status {
    if (key != "learner") return {};
    has_learner = true;
    return ReadLearner(in, v, raw);
  });
  if (!read) return Fail(read.error());
  // Past the last token the document has no current location.
  if (doc.current_location().error() == simdjson::SUCCESS)
    return in.Bad("(document)", "trailing content after the model");
  if (!has_learner) return in.Bad("learner", "missing");
  return Check(in, raw);
}

}  // namespace rankd
