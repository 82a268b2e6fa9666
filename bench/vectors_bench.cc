// ops/bench vectors (its `dot` part): ns per row of dot(viewer's vector, a vec column) at
// D = 64 over 1,000 rows, through the whole expression (CompileExpr's program: the column
// read in place, the clone the machine dispatches to, the result column), against a plain
// loop calling the same kernel (data/vector_math.h) on the same rows, in one process. Also
// states which instruction set that clone uses and the fraction of the core's peak: the
// kernel does per element one widening of each side, a multiply and an add in double, so
// the peak is (4 * D / lanes) vector operations a row at `issue` of them a cycle.
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
  // Per row: 2 widenings, a multiply and an add per `lanes` elements; 2 vector ops a cycle
  // is the issue rate of those ports on current x86 cores (stated, not measured).
  const double ops_per_row = 4.0 * kDim / isa.lanes;
  std::printf(
      "{\"name\": \"dot\", \"value\": %.3f, \"unit\": \"ns/row\", \"baseline\": %.3f, "
      "\"ratio\": %.3f, \"rows\": %zu, \"dim\": %u, \"isa\": \"%s\", "
      "\"vector_ops_per_row\": %.0f, \"peak_note\": \"peak = vector_ops_per_row / 2 per cycle\", "
      "\"timing\": \"fastest of %d rounds x %d calls\", \"check\": %.3g}\n",
      t.first, t.second, t.first / t.second, kRows, kDim, isa.name, ops_per_row, kRounds,
      kItersPerRound, sink);
  return 0;
}
