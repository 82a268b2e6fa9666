// libFuzzer's coverage feedback for code built by GCC (clang cannot compile this code
// base: docs/fuzzing.md). GCC's -fsanitize-coverage=trace-pc calls
// __sanitizer_cov_trace_pc() at every basic block, which libFuzzer 14's own definition
// refuses at run time (it expects clang's trace-pc-guard or inline counters). This one
// hashes the caller's address into an array of 8-bit counters that it registers as an
// "inline 8-bit counters" module, which libFuzzer reads after each input: each counter stands for
// roughly one basic block (collisions merge a few), so libFuzzer's cov/ft numbers count
// blocks reached. Linked before the engine archive with -Wl,--allow-multiple-definition
// so that this definition wins. trace-cmp callbacks are libFuzzer's own.
//
// The functions here must not be instrumented themselves (trace_pc would recurse).
#include <cstddef>
#include <cstdint>

extern "C" {
void __sanitizer_cov_8bit_counters_init(uint8_t* start, uint8_t* stop);
void __sanitizer_cov_pcs_init(const uintptr_t* pcs_beg, const uintptr_t* pcs_end);
}

namespace {

constexpr unsigned kBits = 17;  // 128 Ki counters: few collisions for rankd's ~30k blocks
constexpr size_t kCounters = size_t{1} << kBits;

alignas(64) uint8_t counters[kCounters];
// libFuzzer wants a PC table beside the counters: (pc, flags) per counter. The real
// addresses are not known up front, so each entry is its counter's index (flags 0:
// not a function entry); only the counters drive the search.
uintptr_t pc_table[2 * kCounters];

__attribute__((constructor, no_sanitize_coverage)) void RegisterCounters() {
  for (size_t i = 0; i < kCounters; ++i) pc_table[2 * i] = i + 1;
  __sanitizer_cov_8bit_counters_init(counters, counters + kCounters);
  __sanitizer_cov_pcs_init(pc_table, pc_table + 2 * kCounters);
}

}  // namespace

extern "C" __attribute__((no_sanitize_coverage, no_sanitize_address)) void
__sanitizer_cov_trace_pc() {
  auto pc = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  // Fibonacci hashing: the top kBits bits of pc * 2^64/phi spread nearby addresses.
  size_t i = static_cast<size_t>((pc * 0x9E3779B97F4A7C15ull) >> (64 - kBits));
  ++counters[i];
}

// GCC's trace-cmp also reports float and double comparisons, which libFuzzer has no
// callback for (clang does not emit them): nothing to learn from, so they do nothing.
extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpf(float, float) {}
extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpd(double, double) {}
