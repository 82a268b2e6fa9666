// Model: a gradient-boosted tree ensemble saved by XGBoost 1.x as JSON
// (`Booster.save_model("NAME.model.json")`), or a neural network exported as ONNX
// (`NAME.onnx`), checked and compiled at load into a layout built for scoring blocks of
// rows, then immutable. docs/models.md has the contract: supported boosters, objectives
// and ONNX operators, base_score, missing values, what is rejected.
//
// Threads: loading runs on any thread (no shared state); a loaded Model is immutable and
// shared as ModelPtr: Score may run on any number of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/forest.h"
#include "model/network.h"

namespace rankd {

struct ModelLimits {
  // A file larger than this is a load error (`--max-model-bytes`).
  size_t max_bytes = size_t{256} << 20;
  // A tree deeper than this (root = depth 0) is a load error: it bounds the work per
  // row and the evaluator's path length.
  uint32_t max_depth = 64;
  // A model with more features (num_feature) than this is a load error: it bounds the
  // feature names made up for a model without names, and the columns a caller passes.
  uint32_t max_features = 65536;
};

// What Score returns per row: the objective's prediction (the logistic of the margin for
// binary:logistic and reg:logistic, else the margin), or always the raw margin.
enum class ModelOutput : uint8_t { kDefault, kMargin };

class Model {
 public:
  // A tree model. `base_margin`: base_score in margin space; `logistic`: the default
  // output is the logistic of the margin.
  Model(std::string name, std::string file, std::string sha256, std::string objective,
        std::vector<std::string> features, Forest forest, float base_margin, bool logistic);
  // A neural model: its features are its inputs' values in input order, named "x[0]",
  // "x[1]", ... for a float input x and "ids" for an int64 input ids.
  Model(std::string name, std::string file, std::string sha256, Network network);

  // A neural model (ONNX) rather than trees.
  bool is_network() const { return is_network_; }
  // REQUIRES: is_network().
  const Network& network() const { return network_; }
  // The instruction-set level a neural model's scores come from (dense_kernel.h); every
  // Score call of this process uses it. Empty for trees (they have one code path).
  std::string_view dispatch() const {
    return is_network_ ? DispatchLevelName(ActiveDispatchLevel()) : std::string_view();
  }

  const std::string& name() const { return name_; }      // "ctr" for ctr.model.json
  const std::string& file() const { return file_; }      // as given to the loader
  const std::string& sha256() const { return sha256_; }  // lower-case hex, of the file's bytes
  // The model's feature_names, or f0..f{n-1} when it has none; Score takes them in
  // this order.
  const std::vector<std::string>& features() const { return features_; }
  const std::string& objective() const { return objective_; }
  size_t num_trees() const { return forest_.num_trees(); }

  // Scores rows [0, n): features[f][r] is feature f of row r, already float32 (NaN and
  // +-inf are missing; callers turn null into NaN). out[r] gets the prediction, equal to
  // XGBoost 1.7.4's for the same float32 inputs. A neural model's row with a missing
  // input or a bad table index gets NaN (no value), and `output` must be kDefault.
  // REQUIRES: features.size() == features().size(), each pointing at n floats.
  void Score(std::span<const float* const> features, size_t n, ModelOutput output,
             double* out) const;

 private:
  std::string name_, file_, sha256_, objective_;
  std::vector<std::string> features_;
  Forest forest_;
  float base_margin_ = 0;
  bool logistic_ = false;
  bool is_network_ = false;
  Network network_;
};

using ModelPtr = std::shared_ptr<const Model>;

// Parses, checks and compiles the bytes of a model file: ONNX when `file` ends in
// ".onnx", else XGBoost JSON. `file` names it in messages: every rejection is
// Error::BadRequest naming the file and the field, tree or node, e.g.
// "plans/ctr.model.json: learner.objective.name: 'multi:softprob' is not supported".
Result<ModelPtr> ParseModel(std::string_view bytes, std::string name, std::string file,
                            const ModelLimits& limits);
// Reads `path` (at most limits.max_bytes) and parses it; the name is the file name
// without ".model.json" or ".onnx".
Result<ModelPtr> LoadModelFile(const std::string& path, const ModelLimits& limits);

}  // namespace rankd
