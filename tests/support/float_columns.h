// FloatColumns: float rows laid out as Model::Score and Network::Score take them, one array
// a feature, for the programs that score a model outside a plan: the test tool
// model_score, bench/onnx_bench and the model fuzz targets.
//
// Threads: any; an object is one thread's.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace rankd {

class FloatColumns {
 public:
  // From `bytes`: rows of `width` float32 values each, row after row (a trailing partial
  // row is left out; width 0: no rows).
  static FloatColumns FromRows(std::string_view bytes, size_t width) {
    const size_t n = width == 0 ? 0 : bytes.size() / sizeof(float) / width;
    FloatColumns c(width, n);
    for (size_t r = 0; r < n; ++r)
      for (size_t f = 0; f < width; ++f)
        std::memcpy(&c.columns_[f][r], bytes.data() + (r * width + f) * sizeof(float),
                    sizeof(float));
    return c;
  }

  // values.size() rows of `width` features cycling through `values`, each feature's column
  // 3 places on from the one before: edge values meet each other in a row.
  static FloatColumns Cycling(size_t width, std::span<const float> values) {
    FloatColumns c(width, values.size());
    for (size_t f = 0; f < width; ++f)
      for (size_t r = 0; r < values.size(); ++r)
        c.columns_[f][r] = values[(r + f * 3) % values.size()];
    return c;
  }

  FloatColumns(FloatColumns&&) = default;  // a vector's move keeps its data where it was
  FloatColumns(const FloatColumns&) = delete;
  FloatColumns& operator=(const FloatColumns&) = delete;

  std::span<const float* const> features() const { return pointers_; }
  size_t rows() const { return rows_; }

 private:
  FloatColumns(size_t width, size_t rows) : columns_(width, std::vector<float>(rows)), rows_(rows) {
    for (const std::vector<float>& column : columns_) pointers_.push_back(column.data());
  }

  std::vector<std::vector<float>> columns_;
  std::vector<const float*> pointers_;
  size_t rows_;
};

}  // namespace rankd
