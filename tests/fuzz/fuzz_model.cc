// Fuzz target `model`: model JSON -> ParseModel (small limits) -> whatever loads must
// score: one Score of a few rows (finite, NaN and +-inf values) in both outputs.
// Corpus: tests/fuzz/corpus/model (small XGBoost models); dictionary model.dict.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string_view>
#include <vector>

#include "../support/float_columns.h"
#include "model/model.h"

using namespace rankd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ModelLimits limits;
  limits.max_bytes = 1 << 16;
  limits.max_depth = 16;
  limits.max_features = 64;
  Result<ModelPtr> model = ParseModel(text, "fuzz", "fuzz.model.json", limits);
  if (!model) return 0;
  const Model& m = **model;
  if (m.features().size() > limits.max_features) __builtin_trap();
  constexpr size_t kRows = 11;
  constexpr float kValues[] = {0.0f,
                               -1.5f,
                               1.5f,
                               1e30f,
                               -1e-30f,
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               0.5f,
                               3.0f,
                               -0.0f};
  static_assert(std::size(kValues) == kRows);
  const FloatColumns rows = FloatColumns::Cycling(m.features().size(), kValues);
  double out[kRows];
  for (ModelOutput output : {ModelOutput::kDefault, ModelOutput::kMargin}) {
    m.Score(rows.features(), kRows, output, out);
    if (output == ModelOutput::kDefault &&
        (m.objective() == "binary:logistic" || m.objective() == "reg:logistic"))
      for (double p : out)
        if (p < 0 || p > 1) __builtin_trap();  // NaN is possible: inf - inf leaves
  }
  return 0;
}
