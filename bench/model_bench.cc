// ops/bench model: rankd's tree evaluator against libxgboost's own predictor on the same
// binary:logistic models (bench/model_train.py) and rows. Ours is timed from row-set-like
// columns (i64 and f64 values with null flags) through their conversion to float32
// columns and Model::Score; the baseline is one XGBoosterPredictFromDense call (nthread
// 1) over a prebuilt float32 row-major matrix. Warm; median of 5 rounds, ours and the
// baseline alternating. Prints one JSON object per line; exits 1 if any prediction
// differs from XGBoost's by more than 1e-6 absolute or 1e-5 relative, or either is NaN.
//
// usage: model_bench MODEL_DIR   (with MODEL_DIR/model_TREES_DEPTH.model.json)
#include <xgboost/c_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"

using namespace rankd;

namespace {

constexpr size_t kFeatures = 20;  // f0..f9 i64, f10..f19 f64
constexpr int kRounds = 5;

// A row set's numeric columns: values and null flags.
struct Columns {
  std::vector<std::vector<int64_t>> ints;
  std::vector<std::vector<double>> doubles;
  std::vector<std::vector<uint8_t>> nulls;  // per feature
};

Columns MakeColumns(size_t n) {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int64_t> small(0, 99);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution missing(0.1);
  Columns c;
  c.ints.resize(10, std::vector<int64_t>(n));
  c.doubles.resize(10, std::vector<double>(n));
  c.nulls.resize(kFeatures, std::vector<uint8_t>(n));
  for (size_t r = 0; r < n; ++r) {
    for (size_t f = 0; f < 10; ++f) c.ints[f][r] = small(rng), c.doubles[f][r] = normal(rng);
    for (size_t f = 0; f < kFeatures; ++f) c.nulls[f][r] = missing(rng);
  }
  return c;
}

// The conversion the model op does: a null or a non-finite value becomes NaN (missing).
void ToFloatColumns(const Columns& c, size_t n, std::vector<std::vector<float>>& out) {
  constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();
  for (size_t f = 0; f < kFeatures; ++f) {
    float* dst = out[f].data();
    const uint8_t* null = c.nulls[f].data();
    if (f < 10) {
      const int64_t* src = c.ints[f].data();
      for (size_t r = 0; r < n; ++r) dst[r] = null[r] ? kMissing : static_cast<float>(src[r]);
    } else {
      const double* src = c.doubles[f - 10].data();
      for (size_t r = 0; r < n; ++r) {
        const float v = static_cast<float>(src[r]);
        dst[r] = null[r] || !std::isfinite(v) ? kMissing : v;
      }
    }
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of each, median of kRounds rounds; each round repeats a call for at
// least 20 ms, ours and the baseline alternating round by round.
std::pair<double, double> TimePair(const std::function<void()>& ours,
                                   const std::function<void()>& base) {
  for (int warm = 0; warm < 2; ++warm) ours(), base();
  std::vector<double> a, b;
  for (int r = 0; r < kRounds; ++r) {
    for (int which = 0; which < 2; ++which) {
      const auto& f = which == 0 ? ours : base;
      int calls = 0;
      auto t0 = std::chrono::steady_clock::now();
      double elapsed = 0;
      do {
        f();
        ++calls;
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } while (elapsed < 0.02);
      (which == 0 ? a : b).push_back(elapsed / calls);
    }
  }
  return {Median(a), Median(b)};
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "model_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(int rc, const char* what) {
  if (rc != 0) Die(std::string(what) + ": " + XGBGetLastError());
}

struct Case {
  const char* name;
  int trees, depth;
  size_t rows;
};

// Times one case; returns the largest difference to XGBoost over its rows.
double Run(const std::string& dir, const Case& c) {
  const std::string path =
      dir + "/model_" + std::to_string(c.trees) + "_" + std::to_string(c.depth) + ".model.json";
  Result<ModelPtr> model = LoadModelFile(path, {});
  if (!model) Die(model.error().message);
  if ((*model)->features().size() != kFeatures) Die(path + ": expected 20 features");
  BoosterHandle booster;
  Check(XGBoosterCreate(nullptr, 0, &booster), "XGBoosterCreate");
  Check(XGBoosterLoadModel(booster, path.c_str()), "XGBoosterLoadModel");
  Check(XGBoosterSetParam(booster, "nthread", "1"), "XGBoosterSetParam");

  const size_t n = c.rows;
  const Columns columns = MakeColumns(n);
  std::vector<std::vector<float>> floats(kFeatures, std::vector<float>(n));
  std::vector<const float*> pointers;
  for (auto& f : floats) pointers.push_back(f.data());
  std::vector<double> ours(n);
  // The baseline's input, built once outside the timing: row-major float32.
  ToFloatColumns(columns, n, floats);
  std::vector<float> matrix(n * kFeatures);
  for (size_t r = 0; r < n; ++r)
    for (size_t f = 0; f < kFeatures; ++f) matrix[r * kFeatures + f] = floats[f][r];
  char interface[256];
  std::snprintf(interface, sizeof interface,
                "{\"data\": [%zu, true], \"shape\": [%zu, %zu], \"typestr\": \"<f4\", "
                "\"version\": 3}",
                reinterpret_cast<size_t>(matrix.data()), n, kFeatures);
  const char* config =
      "{\"type\": 0, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": 0, "
      "\"strict_shape\": false, \"missing\": NaN, \"cache_id\": 0}";
  const float* theirs = nullptr;
  auto predict_xgboost = [&] {
    const bst_ulong* shape;
    bst_ulong dim;
    Check(XGBoosterPredictFromDense(booster, interface, config, nullptr, &shape, &dim, &theirs),
          "XGBoosterPredictFromDense");
  };
  auto predict_ours = [&] {
    ToFloatColumns(columns, n, floats);
    (*model)->Score(pointers, n, ModelOutput::kDefault, ours.data());
  };
  auto [t_ours, t_base] = TimePair(predict_ours, predict_xgboost);

  predict_ours();
  predict_xgboost();
  double worst = 0;
  for (size_t r = 0; r < n; ++r) {
    const double diff = std::abs(ours[r] - theirs[r]);
    worst = std::max(worst, diff);
    // Written so that a NaN on either side fails: every comparison with NaN is false, and
    // a binary:logistic prediction is never NaN.
    if (!(diff <= std::max(1e-6, 1e-5 * std::abs(theirs[r]))))
      Die(std::string(c.name) + ": row " + std::to_string(r) + ": rankd " +
          std::to_string(ours[r]) + ", xgboost " + std::to_string(theirs[r]) +
          ": outside the tolerance, the timings are invalid");
  }
  XGBoosterFree(booster);

  const double per = 1e9 / (static_cast<double>(c.trees) * static_cast<double>(n));
  std::printf(
      "{\"name\": \"%s\", \"value\": %.3g, \"unit\": \"ns\", \"baseline\": %.3g, "
      "\"ratio\": %.3f, \"trees\": %d, \"depth\": %d, \"rows\": %zu, \"features\": %zu, "
      "\"timing\": \"median of %d alternating rounds, warm; ours includes the conversion "
      "from i64/f64 columns with nulls\"}\n",
      c.name, t_ours * per, t_base * per, t_ours / t_base, c.trees, c.depth, n, kFeatures, kRounds);
  std::fflush(stdout);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) Die("usage: model_bench MODEL_DIR");
  const Case cases[] = {
      {"model_ns_per_tree_row", 500, 6, 1000},
      {"model_ns_per_tree_row_100_trees", 100, 6, 1000},
      {"model_ns_per_tree_row_1000_trees", 1000, 6, 1000},
      {"model_ns_per_tree_row_depth_4", 500, 4, 1000},
      {"model_ns_per_tree_row_depth_8", 500, 8, 1000},
      {"model_ns_per_tree_row_100_rows", 500, 6, 100},
      {"model_ns_per_tree_row_10000_rows", 500, 6, 10000},
  };
  double worst = 0;
  for (const Case& c : cases) worst = std::max(worst, Run(argv[1], c));
  std::printf(
      "{\"name\": \"model_max_abs_diff\", \"value\": %.3g, \"unit\": \"abs\", "
      "\"tolerance\": \"1e-6 absolute or 1e-5 relative, whichever is larger\"}\n",
      worst);
  return 0;
}
