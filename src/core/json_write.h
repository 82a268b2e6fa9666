// rankd's JSON number writers, beside its one string writer (core/json_escape.h): every
// answer, record and log line writes its numbers here, so a number reads the same
// wherever it appears. Cells of a column and user ids: data/json_cell.h.
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/json_escape.h"

namespace rankd {

// The shortest decimal that reads back to `d` (std::to_chars); null when not finite.
// What /rank answers use.
void AppendJsonDouble(double d, std::string& out);
void AppendJsonInt(int64_t v, std::string& out);
// A vector of float32 as a JSON array: each element the shortest decimal that reads back
// to that float32 (0.1f is 0.1, not 0.10000000149011612), null when not finite.
void AppendJsonFloats(std::span<const float> v, std::string& out);

// A number every JSON reader takes as the same double: the shortest decimal that reads
// back to `d`, in exponent form from 1e15 up (so that no reader takes it for an integer
// beyond 64 bits); null when not finite. What served-log records use.
void AppendJsonReal(double d, std::string& out);
// AppendJsonReal's text at `p` (room for 32 bytes); returns its end.
char* WriteJsonReal(char* p, double d);

}  // namespace rankd
