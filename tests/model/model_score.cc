// model_score MODEL ROWS [MAX_BYTES MAX_DEPTH]: a test tool. Loads MODEL with
// LoadModelFile and scores ROWS (float32, row-major, one value per model feature per
// row), printing "DEFAULT MARGIN" per row with 9 significant digits; on a load error
// prints its message to stderr and exits 1.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../support/float_columns.h"
#include "model/model.h"

using namespace rankd;

int main(int argc, char** argv) {
  if (argc != 3 && argc != 5) {
    std::fprintf(stderr, "usage: model_score MODEL ROWS [MAX_BYTES MAX_DEPTH]\n");
    return 2;
  }
  ModelLimits limits;
  if (argc == 5) limits.max_bytes = std::stoull(argv[3]), limits.max_depth = std::stoul(argv[4]);
  Result<ModelPtr> model = LoadModelFile(argv[1], limits);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const FloatColumns rows = FloatColumns::FromRows(bytes, (*model)->features().size());
  const size_t n = rows.rows();
  std::vector<double> prediction(n), margin(n);
  (*model)->Score(rows.features(), n, ModelOutput::kDefault, prediction.data());
  (*model)->Score(rows.features(), n, ModelOutput::kMargin, margin.data());
  for (size_t r = 0; r < n; ++r) std::printf("%.9g %.9g\n", prediction[r], margin[r]);
  return 0;
}
