// Reading an XGBoost 1.x JSON model (`Booster.save_model("x.model.json")`) into plain
// arrays, rejecting what rankd does not evaluate by the JSON field that asks for it. The
// trees' structure (children, depth, feature indices) is checked where they are
// compiled (forest.h); here only that each tree's arrays agree in length.
//
// Threads: any thread (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/forest.h"

namespace rankd {

struct XgboostModel {
  std::string objective;                   // learner.objective.name, one of the supported ones
  float base_score = 0.5f;                 // learner.learner_model_param.base_score, as saved
  uint32_t num_feature = 0;                // learner.learner_model_param.num_feature
  std::vector<std::string> feature_names;  // empty when the model has none
  std::vector<TreeArrays> trees;           // in boosting order, dart's weights applied
};

// Parses `bytes` as an XGBoost JSON model. Every rejection is Error::BadRequest
// "FILE: FIELD: WHAT", e.g. "m.model.json: learner.gradient_booster.name: 'gblinear' is
// not supported".
Result<XgboostModel> ParseXgboostJson(std::string_view bytes, const std::string& file);

}  // namespace rankd
