// ops/bench vectors (its `dot` part): ns per row of dot(viewer's vector, a vec column) at
// D = 64 over 1,000 rows, through the whole expression (CompileExpr's program: the column
// read in place, the clone the machine dispatches to, the result column), against a plain
// loop calling the same kernel (data/vector_math.h) on the same rows, in one process. Also
// states which instruction set that clone uses and the fraction of the core's peak: the
// kernel does per element one widening of each side, a multiply and an add in double, and
// the same four instructions at the clone's width, in independent chains from registers
// only, are timed alongside (PeakNsPerRow): the fastest a row of D elements can go with
// those instructions on this core.
// Prints one JSON object per line.
#include <simdjson.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "data/vector_math.h"
#include "plan/expr.h"
#include "time_pair.h"

using namespace rankd;

namespace {

constexpr size_t kRows = 1'000;
constexpr uint32_t kDim = 64;
constexpr int kRounds = 61;
constexpr int kItersPerRound = 50;

// Nanoseconds per row of ours and of the baseline (one call = kRows rows).
std::pair<double, double> NsPerRow(const std::function<void()>& ours,
                                   const std::function<void()>& base) {
  auto [a, b] = bench::TimePair(ours, base, {kRounds, kItersPerRound});
  return {1000 * a / kRows, 1000 * b / kRows};
}

// The widest vector instructions the expression's clone uses (expr_eval.cc
// RANKD_VECTOR_CLONES): doubles a register, and that clone's name.
struct Isa {
  const char* name;
  int lanes;
};
Isa Dispatched() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"x86-64-v4 (AVX-512)", 8};
  if (__builtin_cpu_supports("avx2")) return {"avx2", 4};
  return {"baseline (SSE2)", 2};
}

#pragma GCC diagnostic ignored "-Wpsabi"  // the vectors never cross a call boundary

// kChains independent chains of the kernel's step (widen two float vectors of `L` lanes
// to double, multiply, add), from registers only: 4 * kChains vector instructions an
// iteration, none waiting on another's result for long.
constexpr int kChains = 8;
typedef float F2 __attribute__((vector_size(8)));
typedef double D2 __attribute__((vector_size(16)));
typedef float F4 __attribute__((vector_size(16)));
typedef double D4 __attribute__((vector_size(32)));
typedef float F8 __attribute__((vector_size(32)));
typedef double D8 __attribute__((vector_size(64)));
template <class VF, class VD, int L>
[[gnu::always_inline]] inline double PeakLoop(size_t iters) {  // in its caller's target
  VF x, y;
  for (int k = 0; k < L; ++k) x[k] = 1.0f + float(k), y[k] = 0.5f;
  VD acc[kChains] = {};
  for (size_t i = 0; i < iters; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < kChains; ++j)
      acc[j] = acc[j] + __builtin_convertvector(x, VD) * __builtin_convertvector(y, VD);
    // x, y are not loop-invariant to the compiler (an 8-byte vector has no register
    // constraint: memory, a load a step, for SSE2's).
    if constexpr (L == 2)
      __asm__("" : "+m"(x), "+m"(y));
    else
      __asm__("" : "+x"(x), "+x"(y));
  }
  double s = 0;
  for (int j = 0; j < kChains; ++j)
    for (int k = 0; k < L; ++k) s += acc[j][k];
  return s;
}
double PeakSse2(size_t iters) { return PeakLoop<F2, D2, 2>(iters); }
__attribute__((target("avx2"))) double PeakAvx2(size_t iters) { return PeakLoop<F4, D4, 4>(iters); }
__attribute__((target("avx512f"))) double PeakAvx512(size_t iters) {
  return PeakLoop<F8, D8, 8>(iters);
}

}  // namespace

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Column emb;
  emb.type = ColumnType::kVec;
  emb.dim = kDim;
  emb.vec.resize(kRows * kDim);
  for (float& x : emb.vec) x = n(rng);
  std::vector<float> viewer(kDim);
  for (float& x : viewer) x = n(rng);
  RowSet rows;
  rows.SetColumn("emb", Share(std::move(emb)));
  const Column& col = *rows.column("emb");

  ColumnTypes types;
  types.cols.push_back({"emb", ColumnType::kVec, kDim});
  ParamValues values{Value(viewer)};
  FromResolver from = [](std::string_view, std::string_view) -> Result<FromSlot> {
    return FromSlot{0, ColumnType::kVec, kDim};
  };
  simdjson::dom::parser parser;
  const std::string text =
      R"({"op": "dot", "args": [{"from": "v", "key": "emb"}, {"key": "emb"}]})";
  auto expr = CompileExpr(parser.parse(text).value(), types, ParamDecls{}, "vectors_bench", from);
  if (!expr) {
    std::fprintf(stderr, "vectors_bench: %s\n", expr.error().message.c_str());
    return 1;
  }
  double sink = 0;
  std::vector<double> out(kRows);
  auto t = NsPerRow(
      [&] {
        std::optional<Column> c = (*expr)->Evaluate(rows, values);
        sink += c->f64[kRows - 1];
      },
      [&] {
        for (size_t r = 0; r < kRows; ++r)
          out[r] = vec::Dot(viewer.data(), col.vec.data() + r * kDim, kDim);
        sink += out[kRows - 1];
      });
  const Isa isa = Dispatched();
  // The peak loop, timed beside a call of ours: an iteration does kChains steps of `lanes`
  // elements, so a row of kDim elements takes kDim / (kChains * lanes) iterations.
  constexpr size_t kPeakIters = 20'000;
  auto peak = [&] {
    sink += isa.lanes == 8   ? PeakAvx512(kPeakIters)
            : isa.lanes == 4 ? PeakAvx2(kPeakIters)
                             : PeakSse2(kPeakIters);
  };
  auto [us_ours, us_peak] = bench::TimePair(
      [&] {
        std::optional<Column> c = (*expr)->Evaluate(rows, values);
        sink += c->f64[kRows - 1];
      },
      peak, {kRounds, kItersPerRound / 5});
  const double peak_ns_per_row =
      1000 * us_peak / kPeakIters * kDim / (kChains * static_cast<double>(isa.lanes));
  const double ours_ns_per_row = 1000 * us_ours / kRows;
  std::printf(
      "{\"name\": \"dot\", \"value\": %.3f, \"unit\": \"ns/row\", \"baseline\": %.3f, "
      "\"ratio\": %.3f, \"rows\": %zu, \"dim\": %u, \"isa\": \"%s\", "
      "\"vector_ops_per_row\": %.0f, \"peak_ns_per_row\": %.3f, \"peak_fraction\": %.3f, "
      "\"peak_note\": \"the same 4 instructions a step (2 widenings, a multiply, an add in double) "
      "at "
      "this width, %d independent chains from registers, timed alongside\", "
      "\"timing\": \"fastest of %d rounds x %d calls\", \"check\": %.3g}\n",
      t.first, t.second, t.first / t.second, kRows, kDim, isa.name, 4.0 * kDim / isa.lanes,
      peak_ns_per_row, peak_ns_per_row / ours_ns_per_row, kChains, kRounds, kItersPerRound, sink);
  return 0;
}
