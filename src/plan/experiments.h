// Experiments (docs/experiments.md): `experiments.json` of a plans folder, loaded with
// its plans (all or nothing). An experiment splits the requests for one plan name into
// sticky buckets — bucket = the first 8 bytes, big-endian, of SHA-256(salt ":" user_id)
// mod 10000 — served by variant plans (contiguous bucket ranges in the order listed) or
// by the plan itself ("control"), and may run shadow plans beside the primary answer.
//
// Threads: parsed on any thread; an ExperimentSet is immutable once loaded (shared by
// snapshot like the plans it points at), read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "data/value.h"
#include "plan/bind.h"
#include "plan/plan.h"

namespace rankd {

inline constexpr uint32_t kExperimentBuckets = 10000;
inline constexpr std::string_view kControlVariant = "control";

struct ExperimentVariant {
  std::string name;
  PlanPtr plan;
  GivenParams params;  // overrides, checked against plan's declarations at load
  uint32_t weight = 0;
  uint32_t first = 0, end = 0;  // its buckets: [first, end)
};

struct ExperimentShadow {
  PlanPtr plan;
  double percent = 0;         // 0..100 of the experiment's requests
  uint32_t compare_top = 10;  // k of the overlap at k
};

struct Experiment {
  std::string name;
  std::string plan;  // the plan name clients ask for
  std::string salt;
  std::vector<ExperimentVariant> variants;
  std::vector<ExperimentShadow> shadows;
  std::optional<int64_t> start_ms, end_ms;

  bool Active(int64_t now_ms) const {
    return (!start_ms || *start_ms <= now_ms) && (!end_ms || now_ms < *end_ms);
  }
  // The variant that holds `bucket`, or -1 for control.
  int VariantOf(uint32_t bucket) const;
  // The variant named `name` (-1 for "control"), or nullopt when there is none.
  std::optional<int> Find(std::string_view variant) const;
};

struct ExperimentSet {
  std::vector<Experiment> experiments;
  std::string json;  // the file's text (empty without one), for GET /experiments
  // The experiment on requested plan `plan`, or null.
  const Experiment* ForPlan(std::string_view plan) const;
  const Experiment* Find(std::string_view name) const;
};
using ExperimentSetPtr = std::shared_ptr<const ExperimentSet>;

// An empty set (a folder without experiments.json).
ExperimentSetPtr NoExperiments();

// SHA-256(salt ":" user_id)'s first 8 bytes, big-endian, mod 10000; user_id as decimal
// text, or the string id as given.
uint32_t ExperimentBucket(std::string_view salt, const UserId& user);

// Parses experiments.json against the folder's loaded plans. Every rejection is
// bad_request naming the file, the experiment and the field.
Result<ExperimentSetPtr> ParseExperiments(std::string_view text, std::string_view file,
                                          const std::unordered_map<std::string, PlanPtr>& plans);

}  // namespace rankd
