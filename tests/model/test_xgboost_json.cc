// ParseModel and LoadModelFile on hand-written XGBoost JSON: what is read (features,
// objective, base_score in margin space, outputs, sha256), and each rejection naming the
// file and the field.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "model/model.h"

using namespace rankd;

namespace {

// A model with one stump on feature 1 (f1 < 0.5: -1, else 2; missing left) in XGBoost
// 1.7.4's layout; `learner_extra` and `booster` vary it.
std::string ModelJson(std::string objective = "binary:logistic", std::string base_score = "3E-1",
                      std::string learner_extra = "", std::string booster = "") {
  const std::string tree = R"({"base_weights":[0,0,0],"categories":[],"categories_nodes":[],
    "categories_segments":[],"categories_sizes":[],"default_left":[1,0,0],"id":0,
    "left_children":[1,-1,-1],"loss_changes":[0,0,0],"parents":[2147483647,0,0],
    "right_children":[2,-1,-1],"split_conditions":[5E-1,-1E0,2E0],"split_indices":[1,0,0],
    "split_type":[0,0,0],"sum_hessian":[1,1,1],
    "tree_param":{"num_deleted":"0","num_feature":"2","num_nodes":"3","size_leaf_vector":"0"}})";
  const std::string model = R"({"gbtree_model_param":{"num_parallel_tree":"1","num_trees":"1",
    "size_leaf_vector":"0"},"tree_info":[0],"trees":[)" +
                            tree + "]}";
  if (booster.empty()) booster = R"({"model":)" + model + R"(,"name":"gbtree"})";
  if (booster == "dart")
    booster = R"({"gbtree":{"model":)" + model +
              R"(,"name":"gbtree"},"name":"dart","weight_drop":[5E-1]})";
  return R"({"learner":{"attributes":{},)" + learner_extra +
         R"("feature_types":[],"gradient_booster":)" + booster +
         R"(,"learner_model_param":{"base_score":")" + base_score +
         R"(","boost_from_average":"1","num_class":"0","num_feature":"2","num_target":"1"},
    "objective":{"name":")" +
         objective + R"(","reg_loss_param":{"scale_pos_weight":"1"}}},
    "version":[1,7,4]})";
}

Result<ModelPtr> Parse(const std::string& json, ModelLimits limits = {}) {
  return ParseModel(json, "m", "plans/m.model.json", limits);
}

std::string ParseError(const std::string& json, ModelLimits limits = {}) {
  Result<ModelPtr> m = Parse(json, limits);
  REQUIRE(!m);
  CHECK(m.error().code == ErrorCode::kBadRequest);
  return m.error().message;
}

std::vector<double> Score(const Model& m, std::vector<float> f0, std::vector<float> f1,
                          ModelOutput output) {
  const float* columns[] = {f0.data(), f1.data()};
  std::vector<double> out(f0.size());
  m.Score(columns, f0.size(), output, out.data());
  return out;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_SUITE("model") {
  TEST_CASE("a binary:logistic stump: features f0.., base margin logit(0.3), both outputs") {
    const std::string json = ModelJson();
    Result<ModelPtr> m = Parse(json);
    REQUIRE(m);
    CHECK((*m)->name() == "m");
    CHECK((*m)->file() == "plans/m.model.json");
    CHECK((*m)->features() == std::vector<std::string>{"f0", "f1"});
    CHECK((*m)->objective() == "binary:logistic");
    CHECK((*m)->num_trees() == 1);
    CHECK((*m)->sha256() == Sha256Hex(json));
    const float base = -std::log(1.0f / 0.3f - 1.0f);
    auto margins = Score(**m, {0, 0, 0}, {0.25f, 0.5f, NAN}, ModelOutput::kMargin);
    CHECK(margins == std::vector<double>{base - 1.0f, base + 2.0f, base - 1.0f});
    auto p = Score(**m, {0}, {1}, ModelOutput::kDefault);
    CHECK(p[0] == static_cast<float>(1.0f / (1.0f + std::exp(-(base + 2.0f)))));
  }

  TEST_CASE("margin objectives take base_score as the margin; feature names are kept") {
    Result<ModelPtr> m =
        Parse(ModelJson("binary:logitraw", "3E-1", R"("feature_names":["a","b"],)"));
    REQUIRE(m);
    CHECK((*m)->features() == std::vector<std::string>{"a", "b"});
    CHECK(Score(**m, {0}, {1}, ModelOutput::kDefault) == std::vector<double>{0.3f + 2.0f});
    CHECK(Score(**m, {0}, {1}, ModelOutput::kMargin) == std::vector<double>{0.3f + 2.0f});
  }

  TEST_CASE("dart multiplies each tree's leaves by its weight_drop") {
    Result<ModelPtr> m = Parse(ModelJson("reg:squarederror", "0E0", "", "dart"));
    REQUIRE(m);
    CHECK(Score(**m, {0, 0}, {1, 0}, ModelOutput::kDefault) == std::vector<double>{1.0, -0.5});
  }

  TEST_CASE("rejections name the file and the field") {
    CHECK(ParseError(Replace(ModelJson(), "[1,7,4]", "[2,0,0]")) ==
          "plans/m.model.json: version: 2.x: models saved by XGBoost 2 or later are not supported "
          "(save with XGBoost 1.x)");
    CHECK(ParseError(ModelJson("multi:softprob")) ==
          "plans/m.model.json: learner.objective.name: 'multi:softprob' is not supported");
    CHECK(ParseError(Replace(ModelJson(), R"("num_class":"0")", R"("num_class":"3")")) ==
          "plans/m.model.json: learner.learner_model_param.num_class: 3 (multi-class) is not "
          "supported");
    CHECK(ParseError(Replace(ModelJson(), R"("num_target":"1")", R"("num_target":"2")")) ==
          "plans/m.model.json: learner.learner_model_param.num_target: 2 (multiple targets) is not "
          "supported");
    CHECK(ParseError(Replace(ModelJson(), R"("name":"gbtree"})", R"("name":"gblinear"})")) ==
          "plans/m.model.json: learner.gradient_booster.name: 'gblinear' is not supported");
    CHECK(ParseError(Replace(ModelJson(), R"("split_type":[0,0,0])", R"("split_type":[1,0,0])")) ==
          "plans/m.model.json: tree 0: node 0: split_type: 1 (categorical) is not supported");
    CHECK(ParseError(Replace(ModelJson(), R"("categories":[])", R"("categories":[3])")) ==
          "plans/m.model.json: tree 0: categories: categorical splits are not supported");
    CHECK(
        ParseError(Replace(ModelJson(), R"("feature_types":[])", R"("feature_types":["q","c"])")) ==
        "plans/m.model.json: learner.feature_types[1]: 'c' (categorical) is not supported");
    CHECK(ParseError(
              Replace(ModelJson(), R"("left_children":[1,-1,-1])", R"("left_children":[1,-1])")) ==
          "plans/m.model.json: tree 0: left_children: 2 entries, but tree_param.num_nodes is 3");
    CHECK(ParseError(Replace(ModelJson(), R"("left_children":[1,-1,-1])",
                             R"("left_children":[-7,-1,-1])")) ==
          "plans/m.model.json: tree 0: node 0: left_children: -7 is out of range");
    CHECK(ParseError(
              Replace(ModelJson(), R"("split_indices":[1,0,0])", R"("split_indices":[2,0,0])")) ==
          "plans/m.model.json: tree 0: node 0: split_indices: feature 2 is out of range (the model "
          "has 2 features)");
    CHECK(ParseError(Replace(ModelJson(), R"("split_conditions":[5E-1,)",
                             R"("split_conditions":[1e39,)")) ==
          "plans/m.model.json: tree 0: split_conditions: '1e39' is not a finite float32");
    CHECK(ParseError(Replace(ModelJson(), R"("base_score":"3E-1")", R"("base_score":"1E0")"))
              .starts_with("plans/m.model.json: learner.learner_model_param.base_score: 1.000000 "
                           "is outside (0, 1)"));
    CHECK(ParseError(Replace(ModelJson(), R"("num_trees":"1")", R"("num_trees":"2")")) ==
          "plans/m.model.json: learner.gradient_booster.model.gbtree_model_param.num_trees: 2, but "
          "there are 1 trees");
    CHECK(ParseError(Replace(ModelJson(), R"("tree_info":[0])", R"("tree_info":[1])")) ==
          "plans/m.model.json: learner.gradient_booster.model.tree_info[0]: output group 1 is not "
          "supported");
    CHECK(ParseError(ModelJson("binary:logistic", "3E-1", R"("feature_names":["a","a"],)")) ==
          "plans/m.model.json: learner.feature_names: 'a' appears twice");
    CHECK(ParseError(ModelJson() + "x").starts_with("plans/m.model.json: "));
  }

  TEST_CASE("truncated or malformed files are load errors that name the file and where") {
    const std::string json = ModelJson();
    for (size_t cut : {size_t{0}, size_t{1}, size_t{40}, json.size() / 2, json.size() - 1}) {
      std::string message = ParseError(json.substr(0, cut));
      CHECK(message.starts_with("plans/m.model.json: "));
    }
    CHECK(ParseError(R"({"learner":{},"version":[1,7,4]})") ==
          "plans/m.model.json: learner.gradient_booster.name: missing");
    CHECK(ParseError("[]").starts_with("plans/m.model.json: "));
  }

  TEST_CASE("limits: bytes, depth and features") {
    const std::string json = ModelJson();
    ModelLimits small;
    small.max_bytes = 100;
    CHECK(ParseError(json, small) == "plans/m.model.json: " + std::to_string(json.size()) +
                                         " bytes, over the limit of 100 (--max-model-bytes)");
    ModelLimits shallow;
    shallow.max_depth = 0;
    CHECK(ParseError(json, shallow) ==
          "plans/m.model.json: tree 0: node 0: the tree is deeper than the limit of 0 levels");
    ModelLimits narrow;
    narrow.max_features = 1;
    CHECK(ParseError(json, narrow) ==
          "plans/m.model.json: learner.learner_model_param.num_feature: 2 features, over the "
          "limit of 1");
  }

  TEST_CASE("LoadModelFile: the name from the file name; reads no more than the limit") {
    const std::string path = "/tmp/rankd_test_ctr.model.json";
    std::ofstream(path) << ModelJson();
    Result<ModelPtr> m = LoadModelFile(path, {});
    REQUIRE(m);
    CHECK((*m)->name() == "rankd_test_ctr");
    CHECK((*m)->file() == path);
    ModelLimits small;
    small.max_bytes = 10;
    Result<ModelPtr> big = LoadModelFile(path, small);
    REQUIRE(!big);
    CHECK(big.error().message.find("over the limit of 10 (--max-model-bytes)") !=
          std::string::npos);
    std::remove(path.c_str());
    Result<ModelPtr> missing = LoadModelFile(path, {});
    REQUIRE(!missing);
    CHECK(missing.error().message == path + ": cannot be read");
  }
}
