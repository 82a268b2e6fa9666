// The served-log record of one request (docs/served-log.md, "The record"): one JSON
// object with the request's identity, its viewer row, and per item its id, position,
// score, logged columns and, per `model` node, the exact float32 inputs the model
// scored and its score, so a replay reproduces every score bit for bit.
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sched/scheduler.h"

namespace rankd {

struct RecordHeader {
  std::string_view served_id;   // 32 lowercase hex digits
  int64_t ts_ms = 0;            // Unix ms when the request was fully read
  std::string_view request_id;  // the request's X-Request-Id
  std::string_view experiment;  // empty: none applied (null in the record)
  std::string_view variant;
  bool forced = false;      // the variant was forced by X-Rankd-Variant
  bool shadow = false;      // a shadow run: never served, every item "served": false
  bool forced_log = false;  // recorded because the request asked ("log": true)
};

// Appends the record of `r`, a run with RunRequest::keep_for_log (r.kept holds the
// outputs of r.plan->log.kept). No trailing newline.
void AppendServedRecord(const RunResult& r, const RecordHeader& h, std::string& out);

}  // namespace rankd
