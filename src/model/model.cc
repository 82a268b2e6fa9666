#include "model/model.h"

#include <cmath>
#include <fstream>
#include <vector>

#include "core/sha256.h"
#include "model/onnx_graph.h"
#include "model/xgboost_json.h"

namespace rankd {
namespace {

constexpr std::string_view kSuffix = ".model.json";
constexpr std::string_view kOnnxSuffix = ".onnx";

bool IsLogistic(std::string_view objective) {
  return objective == "binary:logistic" || objective == "reg:logistic";
}

// The logistic as XGBoost 1.7 computes it, in float32.
float Sigmoid(float margin) { return 1.0f / (1.0f + std::exp(-margin)); }

}  // namespace

Model::Model(std::string name, std::string file, std::string sha256, std::string objective,
             std::vector<std::string> features, Forest forest, float base_margin, bool logistic)
    : name_(std::move(name)),
      file_(std::move(file)),
      sha256_(std::move(sha256)),
      objective_(std::move(objective)),
      features_(std::move(features)),
      forest_(std::move(forest)),
      base_margin_(base_margin),
      logistic_(logistic) {}

Model::Model(std::string name, std::string file, std::string sha256, Network network)
    : name_(std::move(name)),
      file_(std::move(file)),
      sha256_(std::move(sha256)),
      objective_("onnx"),
      is_network_(true),
      network_(std::move(network)) {
  for (const NetInput& in : network_.inputs()) {
    if (in.index) {
      features_.push_back(in.name);
      continue;
    }
    for (uint32_t j = 0; j < in.width; ++j)
      features_.push_back(in.name + "[" + std::to_string(j) + "]");
  }
}

void Model::Score(std::span<const float* const> features, size_t n, ModelOutput output,
                  double* out) const {
  if (is_network_) {
    std::vector<float> scores(n);
    network_.Score(features, n, ActiveDispatchLevel(), scores.data());
    for (size_t r = 0; r < n; ++r) out[r] = scores[r];
    return;
  }
  // Summed in float32 as XGBoost sums them, widened at the end.
  std::vector<float> margins(n);
  forest_.Margins(features, n, base_margin_, margins.data());
  const bool logistic = logistic_ && output == ModelOutput::kDefault;
  for (size_t r = 0; r < n; ++r) out[r] = logistic ? Sigmoid(margins[r]) : margins[r];
}

Result<ModelPtr> ParseModel(std::string_view bytes, std::string name, std::string file,
                            const ModelLimits& limits) {
  if (bytes.size() > limits.max_bytes)
    return Fail(Error::BadRequest(file + ": " + std::to_string(bytes.size()) +
                                  " bytes, over the limit of " + std::to_string(limits.max_bytes) +
                                  " (--max-model-bytes)"));
  if (file.ends_with(kOnnxSuffix)) {
    Result<OnnxGraph> graph = ReadOnnx(bytes, file);
    if (!graph) return Fail(graph.error());
    Result<Network> network = CompileOnnx(*graph, file);
    if (!network) return Fail(network.error());
    return std::make_shared<const Model>(std::move(name), std::move(file), Sha256Hex(bytes),
                                         std::move(*network));
  }
  Result<XgboostModel> xgb = ParseXgboostJson(bytes, file);
  if (!xgb) return Fail(xgb.error());
  if (xgb->num_feature > limits.max_features)
    return Fail(Error::BadRequest(
        file + ": learner.learner_model_param.num_feature: " + std::to_string(xgb->num_feature) +
        " features, over the limit of " + std::to_string(limits.max_features)));
  // base_score is saved as the objective's prediction; the sum starts from its margin.
  float base_margin = xgb->base_score;
  const bool logistic = IsLogistic(xgb->objective);
  if (logistic) {
    if (!(base_margin > 0.0f && base_margin < 1.0f))
      return Fail(Error::BadRequest(
          file + ": learner.learner_model_param.base_score: " + std::to_string(base_margin) +
          " is outside (0, 1), as a logistic objective needs"));
    base_margin = -std::log(1.0f / base_margin - 1.0f);
  }
  Result<Forest> forest = Forest::Compile(xgb->trees, xgb->num_feature, limits.max_depth, file);
  if (!forest) return Fail(forest.error());
  std::vector<std::string> features = std::move(xgb->feature_names);
  if (features.empty())
    for (uint32_t f = 0; f < xgb->num_feature; ++f) features.push_back("f" + std::to_string(f));
  return std::make_shared<const Model>(std::move(name), std::move(file), Sha256Hex(bytes),
                                       std::move(xgb->objective), std::move(features),
                                       std::move(*forest), base_margin, logistic);
}

Result<ModelPtr> LoadModelFile(const std::string& path, const ModelLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Error::BadRequest(path + ": cannot be read"));
  // Reads in chunks up to one chunk past the limit, never more: whatever the file is
  // (a pipe, a file still growing), a larger one is rejected without being read whole.
  std::string bytes;
  constexpr size_t kChunk = size_t{1} << 16;
  while (in && bytes.size() <= limits.max_bytes) {
    const size_t at = bytes.size();
    bytes.resize(at + kChunk);
    in.read(bytes.data() + at, static_cast<std::streamsize>(kChunk));
    bytes.resize(at + static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return Fail(Error::BadRequest(path + ": cannot be read"));
  std::string base = path.substr(path.find_last_of('/') + 1);
  std::string name = base;
  for (std::string_view suffix : {kSuffix, kOnnxSuffix})
    if (base.ends_with(suffix)) name = base.substr(0, base.size() - suffix.size());
  return ParseModel(bytes, std::move(name), path, limits);
}

}  // namespace rankd
