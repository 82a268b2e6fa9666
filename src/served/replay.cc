#include "served/replay.h"

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/json_write.h"
#include "served/record.h"

namespace rankd {

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// A logged number (null: missing, NaN).
bool ReadNumber(element e, double& out) {
  if (e.is_null()) {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  return !e.get_double().get(out);  // integers too
}

bool SameBits(double a, double b) {
  if (!std::isfinite(a) && !std::isfinite(b) && std::isnan(a) == std::isnan(b))
    return std::isnan(a) || a == b;  // every NaN (null) is one; an infinity its sign
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

Status Replay::Add(std::string_view record) {
  thread_local simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(record.data(), record.size()).get(root))
    return Fail(Error::BadRequest(std::string("invalid JSON: ") + simdjson::error_message(err)));
  simdjson::dom::array items;
  if (root["items"].get_array().get(items))
    return Fail(Error::BadRequest("items: missing or not an array"));
  ++records_;
  std::vector<float> features;
  std::vector<const float*> ptrs;
  for (element item : items) {
    object models;
    if (item["models"].get_object().get(models)) continue;  // no model scored it
    for (auto [node, m] : models) {
      std::string_view name, sha, output;
      object inputs;
      element score_json;
      if (m["model"].get_string().get(name) || m["sha256"].get_string().get(sha) ||
          m["inputs"].get_object().get(inputs) || m["score"].get(score_json))
        return Fail(Error::BadRequest("items[].models." + std::string(node) +
                                      ": needs model, sha256, inputs and score"));
      if (m["output"].get_string().get(output)) output = "default";
      std::string_view dispatch;
      const bool logged_dispatch = !m["dispatch"].get_string().get(dispatch);
      ReplayModelStats& st = stats_[std::string(name)];
      auto it = models_.find(std::string(name));
      if (it == models_.end()) {
        ++st.missing;
        continue;
      }
      const Model& model = *it->second;
      const auto& names = model.features();
      features.assign(names.size(), std::numeric_limits<float>::quiet_NaN());
      for (size_t f = 0; f < names.size(); ++f) {
        element v;
        double x;
        if (!inputs[names[f]].get(v) && ReadNumber(v, x)) features[f] = static_cast<float>(x);
      }
      ptrs.resize(names.size());
      for (size_t f = 0; f < names.size(); ++f) ptrs[f] = &features[f];
      double logged = 0, now = 0;
      if (!ReadNumber(score_json, logged))
        return Fail(
            Error::BadRequest("items[].models." + std::string(node) + ".score: not a number"));
      model.Score(ptrs, 1, output == "margin" ? ModelOutput::kMargin : ModelOutput::kDefault, &now);
      ++st.checked;
      if (logged_dispatch && dispatch != model.dispatch()) ++st.dispatch_mismatch;
      bool same_model = sha == model.sha256();
      if (!same_model) ++st.sha256_mismatch;
      if (same_model && !SameBits(now, logged)) ++st.differ;
      if (std::isfinite(now) && std::isfinite(logged))
        st.max_abs_diff = std::max(st.max_abs_diff, std::fabs(now - logged));
    }
  }
  return {};
}

std::string Replay::Report() const {
  std::string out;
  for (const auto& [name, st] : stats_) {
    out += "{\"model\":";
    AppendJsonString(name, out);
    out += ",\"checked\":" + std::to_string(st.checked);
    out += ",\"sha256_mismatch\":" + std::to_string(st.sha256_mismatch);
    out += ",\"max_abs_diff\":";
    AppendJsonReal(st.max_abs_diff, out);
    out += ",\"differ\":" + std::to_string(st.differ);
    out += ",\"missing\":" + std::to_string(st.missing);
    out += ",\"dispatch_mismatch\":" + std::to_string(st.dispatch_mismatch);
    out += "}\n";
  }
  return out;
}

int Replay::ExitCode() const {
  uint64_t checked = 0;
  for (const auto& [name, st] : stats_) {
    if (st.differ) return 1;
    checked += st.checked;
  }
  return checked > 0 ? 0 : 1;
}

}  // namespace rankd
