// ops/bench model, the ONNX rows: rankd's neural scorer (Network::Score at the dispatch
// level this CPU runs) on batches of 1,000 rows of an MLP, and the same kernel's
// instructions (8-float multiplies and adds, no FMA, as DenseBlock issues them) in a
// register-only loop timed alongside: the peak those instructions reach on this core, so
// that the scorer's share of it can be stated. Ours and the peak loop alternate
// (bench/time_pair.h). bench/onnx_torch.py runs it beside torch's own forward.
//
// usage: onnx_bench MODEL.onnx ROWS.f32 SCORES.f32
//   ROWS.f32: float32 rows, row-major, one value per model feature; the first 1,000 rows
//   are timed; every row's score is written to SCORES.f32 (for the comparison).
// Prints one JSON object.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../tests/support/float_columns.h"
#include "model/model.h"
#include "time_pair.h"

using namespace rankd;

namespace {

#pragma GCC diagnostic ignored "-Wpsabi"  // V8 never crosses a call boundary
typedef float V8 __attribute__((vector_size(32)));

// 16 independent chains of a multiply and an add on 8 floats: 256 flops an iteration,
// from registers only.
template <class Loop>
float PeakLoop(size_t iters, Loop) {
  V8 acc[16], w = {1.0000001f, 1.0000001f, 1.0000001f, 1.0000001f,
                   1.0000001f, 1.0000001f, 1.0000001f, 1.0000001f};
  for (int j = 0; j < 16; ++j) acc[j] = w * float(j);
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      acc[j] = acc[j] * w;
      acc[j] = acc[j] + w;
    }
  }
  float s = 0;
  for (int j = 0; j < 16; ++j)
    for (int k = 0; k < 8; ++k) s += acc[j][k];  // every lane is used: none is dropped
  return s;
}
struct Baseline {};
struct Avx2 {};
float PeakBaseline(size_t iters) { return PeakLoop(iters, Baseline{}); }
__attribute__((target("avx2"))) float PeakAvx2(size_t iters) { return PeakLoop(iters, Avx2{}); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "onnx_bench: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) Die("usage: onnx_bench MODEL.onnx ROWS.f32 SCORES.f32");
  Result<ModelPtr> model = LoadModelFile(argv[1], {});
  if (!model) Die(model.error().message);
  const Network& net = (*model)->network();
  const size_t width = net.num_features();
  std::ifstream in(argv[2], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const FloatColumns rows = FloatColumns::FromRows(bytes, width);
  const size_t n = rows.rows();
  if (n < 1000) Die("ROWS.f32 holds fewer than 1,000 rows");
  std::vector<float> scores(n);
  const DispatchLevel level = ActiveDispatchLevel();
  net.Score(rows.features(), n, level, scores.data());
  std::ofstream(argv[3], std::ios::binary)
      .write(reinterpret_cast<const char*>(scores.data()), std::streamsize(n * sizeof(float)));

  // Flops of a row: 2 per weight of each dense layer (packed weights pad the outputs to
  // a multiple of 4; the padding is counted, as the kernel computes it).
  double flops_per_row = 0;
  for (const NetStep& s : net.steps())
    if (s.kind == NetStep::Kind::kDense) flops_per_row += 2.0 * s.w.size();
  constexpr size_t kBatch = 1000, kPeakIters = 20000;
  volatile float sink = 0;
  auto ours = [&] { net.Score(rows.features(), kBatch, level, scores.data()); };
  auto peak = [&] {
    sink = sink + (level == DispatchLevel::kAvx2 ? PeakAvx2(kPeakIters) : PeakBaseline(kPeakIters));
  };
  auto [us_ours, us_peak] = bench::TimePair(ours, peak, {7, 20});
  const double gflops = flops_per_row * kBatch / us_ours / 1e3;
  const double peak_gflops = 256.0 * kPeakIters / us_peak / 1e3;
  std::printf(
      "{\"name\": \"onnx_mlp\", \"model\": \"%s\", \"dispatch\": \"%s\", \"batch\": %zu, "
      "\"ns_per_row\": %.1f, \"gflops\": %.2f, \"peak_gflops\": %.2f, \"peak_fraction\": %.3f}\n",
      argv[1], std::string(DispatchLevelName(level)).c_str(), kBatch, us_ours * 1e3 / kBatch,
      gflops, peak_gflops, gflops / peak_gflops);
  return 0;
}
