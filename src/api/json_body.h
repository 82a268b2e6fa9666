// The JSON body of a POST route (/rank, /events): parsed with the thread's simdjson
// parser, an object, no key twice anywhere in it (parsers disagree on which one wins, so
// a body that reads one way here and another in a proxy or a log is refused).
//
// Threads: any thread; the object is valid until the thread's next call.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "core/error.h"

namespace rankd {

// Errors are bad_request: "invalid JSON: ...", "the body must be a JSON object",
// "duplicate key '...' in the body".
Result<simdjson::dom::object> ParseJsonObjectBody(std::string_view body);

// A JSON value for a message, cut to 64 bytes.
std::string ShortJson(simdjson::dom::element v);

}  // namespace rankd
