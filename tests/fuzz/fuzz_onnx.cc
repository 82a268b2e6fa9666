// Fuzz target `onnx`: bytes of an .onnx file -> ParseModel (small limits: the protobuf
// reader, the graph compiler, the fusion pass) -> whatever loads must score: one Score
// of a few rows (finite values, NaN, +-inf, table row numbers in and out of range) at
// both dispatch levels, with the same bits from each.
// Corpus: tests/fuzz/corpus/onnx (small MLPs exported by torch, and hand-built graphs).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string_view>
#include <vector>

#include "../support/float_columns.h"
#include "model/model.h"

using namespace rankd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ModelLimits limits;
  limits.max_bytes = 1 << 16;
  Result<ModelPtr> model = ParseModel(bytes, "fuzz", "fuzz.onnx", limits);
  if (!model) return 0;
  const Network& net = (*model)->network();
  if (net.num_features() != (*model)->features().size()) __builtin_trap();
  constexpr size_t kRows = 13;
  constexpr float kValues[] = {0.0f,
                               -1.5f,
                               1.5f,
                               1e30f,
                               -1e-30f,
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(),
                               2.0f,
                               0.5f,
                               3.0f,
                               -0.0f,
                               1.0f,
                               7.0f};
  static_assert(std::size(kValues) == kRows);
  const FloatColumns rows = FloatColumns::Cycling(net.num_features(), kValues);
  float base[kRows], avx2[kRows];
  net.Score(rows.features(), kRows, DispatchLevel::kBaseline, base);
  net.Score(rows.features(), kRows, DispatchLevel::kAvx2, avx2);
  if (std::memcmp(base, avx2, sizeof base) != 0) __builtin_trap();
  return 0;
}
