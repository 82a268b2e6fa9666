// ops/bench pages, the ops' part: diversify and cap called as a plan calls them (the
// registered task, a row set in, a row set out) over 1,000 rows with 50 i64 keys drawn
// from a Zipf distribution (key k with weight 1/k: a few authors own most rows) and
// uniform f64 scores. Each is timed against a task doing a comparable pass over the same
// rows: diversify against the sort it ends with (sort by score, desc), cap against dedupe
// by the same key (one hash per row). Prints one JSON object per line, in microseconds
// per call; the target is at most 20 us each (docs/benchmarks.md, "Feed pages").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tasks/task.h"
#include "time_pair.h"

using namespace rankd;

namespace {

constexpr size_t kRows = 1000;
constexpr int kKeys = 50;
// Many short rounds, ours and baseline alternating; each side reports its fastest round
// (as bench/vm_bench.cc: on a shared 2-cpu machine preemption lands on whole rounds).
constexpr int kRounds = 101;
constexpr int kItersPerRound = 20;

// Microseconds per call of ours and of the baseline (bench/time_pair.h).
std::pair<double, double> TimePair(const std::function<void()>& ours,
                                   const std::function<void()>& base) {
  return bench::TimePair(ours, base, {kRounds, kItersPerRound, 10});
}

// A registered task with the given parameters (defaults for the rest), called directly.
struct Op {
  const TaskSpec* spec;
  TaskArgs args;
  TaskContext ctx;
  ParamValues params;
  Op(std::string_view op, std::initializer_list<std::pair<std::string, Value>> given)
      : spec(TaskRegistry::Default().Find(op)), args(&spec->params) {
    for (size_t i = 0; i < args.size(); ++i) args.at(i) = args.spec(i).default_value;
    for (const auto& [name, v] : given) args.at(args.Index(name)) = v;
    ctx.args = &args;
    ctx.params = &params;
  }
  size_t Run(const RowSet& in) {
    auto out = spec->run_cpu(ctx, {in});
    if (!out) {
      std::fprintf(stderr, "pages_bench: %s: %s\n", spec->op.c_str(), out.error().message.c_str());
      std::exit(1);
    }
    return out->size();
  }
};

RowSet MakeRows() {
  std::mt19937_64 rng(33);
  std::vector<double> weights;
  for (int k = 1; k <= kKeys; ++k) weights.push_back(1.0 / k);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<int64_t> ids(kRows), authors(kRows);
  std::vector<double> scores(kRows);
  for (size_t i = 0; i < kRows; ++i) {
    ids[i] = static_cast<int64_t>(i + 1);
    authors[i] = 1000 + zipf(rng);
    scores[i] = unit(rng);
  }
  RowSet rs;
  rs.SetColumn("id", Share(Column::I64(ids)));
  rs.SetColumn("author", Share(Column::I64(authors)));
  rs.SetColumn("score", Share(Column::F64(scores)));
  return rs;
}

void Emit(const char* name, std::pair<double, double> t, const char* baseline, const char* extra) {
  std::printf(
      "{\"name\": \"%s\", \"value\": %.4g, \"unit\": \"us\", \"target\": 20, \"baseline\": %.4g, "
      "\"ratio\": %.3f, \"baseline_command\": \"%s on the same rows, same process\", \"rows\": "
      "%zu, \"keys\": %d, \"keys_distribution\": \"zipf s=1\", \"timing\": \"fastest of %d "
      "rounds x %d calls\"%s}\n",
      name, t.first, t.second, t.first / t.second, baseline, kRows, kKeys, kRounds, kItersPerRound,
      extra);
}

}  // namespace

int main() {
  RowSet rs = MakeRows();
  volatile size_t sink = 0;

  Op diversify("diversify", {{"key", std::string("author")}, {"score", std::string("score")}});
  Op sort("sort", {{"key", std::string("score")}, {"order", std::string("desc")}});
  if (diversify.Run(rs) != kRows) return 1;
  auto d = TimePair([&] { sink = sink + diversify.Run(rs); }, [&] { sink = sink + sort.Run(rs); });
  Emit("diversify", d, "the sort task (score, desc)", ", \"decay\": 0.5, \"floor\": 0.25");

  Op cap("cap", {{"key", std::string("author")},
                 {"max", int64_t{2}},
                 {"window", int64_t{10}},
                 {"defer", true}});
  Op dedupe("dedupe", {{"key", std::string("author")}});
  if (cap.Run(rs) != kRows) return 1;
  auto c = TimePair([&] { sink = sink + cap.Run(rs); }, [&] { sink = sink + dedupe.Run(rs); });
  Emit("cap", c, "the dedupe task (by author)", ", \"max\": 2, \"window\": 10, \"defer\": true");
  return 0;
}
