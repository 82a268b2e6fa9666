// Replay of a served log (`rankd replay`, docs/served-log.md): every logged model input
// is scored again with the models of a plans folder, and the scores are compared with
// the logged ones bit for bit. A model whose sha256 equals the logged one must reproduce
// every score exactly; a changed model (another sha256) is reported, not failed.
//
// Threads: one Replay on one thread (the models are shared, read-only).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/error.h"
#include "plan/plan.h"

namespace rankd {

struct ReplayModelStats {
  uint64_t checked = 0;          // logged model scores scored again
  uint64_t sha256_mismatch = 0;  // of those, logged with another version of the model
  uint64_t differ = 0;           // same sha256, and the score differs in some bit
  uint64_t missing = 0;          // logged with a model the folder does not have
  // Of those checked, an ONNX model's scores logged at another dispatch level than this
  // process runs (docs/models.md: the levels give the same bits, so `differ` still holds).
  uint64_t dispatch_mismatch = 0;
  double max_abs_diff = 0;  // over every checked score
};

class Replay {
 public:
  explicit Replay(const ModelSet& models) : models_(models) {}

  // One record (a JSON object). Errors name what is malformed; the record is skipped.
  Status Add(std::string_view record);

  // By model name, every model a record named.
  const std::map<std::string, ReplayModelStats>& stats() const { return stats_; }
  uint64_t records() const { return records_; }
  // A JSON line per model: {"model","checked","sha256_mismatch","max_abs_diff","differ",
  // "missing"}.
  std::string Report() const;
  // 0 when some score was checked and none logged with the folder's sha256 differs; else 1.
  int ExitCode() const;

 private:
  const ModelSet& models_;
  std::map<std::string, ReplayModelStats> stats_;
  uint64_t records_ = 0;
};

}  // namespace rankd
