// JSON text of the values of data/: a column's cell and a user id, written with core's
// number and string writers (core/json_write.h).
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <cstdint>
#include <string>

#include "core/json_write.h"
#include "data/row_set.h"

namespace rankd {

// A user_id as the request gave it: a JSON string or an integer.
void AppendJsonUserId(const UserId& id, std::string& out);
// Physical row `row` of `c`: null, a number (AppendJsonDouble), true/false, a string, or a
// vector's array of numbers (AppendJsonFloat each: the shortest text of each float32).
void AppendJsonCell(const Column& c, uint32_t row, std::string& out);

}  // namespace rankd
