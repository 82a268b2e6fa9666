// The micro benchmarks' timer (ops/bench vm, pages, vectors): ours and a baseline called
// in alternating rounds, each side's fastest round reported. On a shared, loaded machine
// (2 cpus, several builds) preemption lands on whole rounds of either side and even
// medians swing 3x; the fastest round is the work itself, and alternating makes
// frequency changes hit both sides alike.
//
// Threads: the calling thread only.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

namespace rankd::bench {

struct Rounds {
  int rounds;       // rounds of each side
  int iters;        // calls a round
  int warm_up = 3;  // calls of each side before timing
};

// Microseconds per call of ours and of base: each side's fastest round.
inline std::pair<double, double> TimePair(const std::function<void()>& ours,
                                          const std::function<void()>& base, Rounds r) {
  std::vector<double> a, b;
  for (int warm = 0; warm < r.warm_up; ++warm) ours(), base();
  for (int round = 0; round < r.rounds; ++round) {
    for (int which = 0; which < 2; ++which) {
      const auto& f = which == 0 ? ours : base;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < r.iters; ++i) f();
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          r.iters;
      (which == 0 ? a : b).push_back(us);
    }
  }
  return {*std::min_element(a.begin(), a.end()), *std::min_element(b.begin(), b.end())};
}

}  // namespace rankd::bench
