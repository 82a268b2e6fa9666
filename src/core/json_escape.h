// The one JSON string writer of rankd: every JSON answer (the HTTP layer's errors, the
// /rank body, the server's other routes, the access log) escapes strings here, so a
// string reads the same wherever it appears.
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <string>
#include <string_view>

namespace rankd {

// Appends `s` as a JSON string, quotes included. Quotes, backslashes and control
// characters are escaped; bytes that are not valid UTF-8 (stray continuation bytes,
// overlong forms, surrogates, code points past U+10FFFF, cut sequences) become U+FFFD
// one byte at a time, so the output is always valid UTF-8 whatever the input.
void AppendJsonString(std::string_view s, std::string& out);

}  // namespace rankd
