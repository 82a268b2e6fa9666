// Handler: what a Listener calls with each complete request.
// Thread: called on the listener's loop thread.
#pragma once

#include <functional>

#include "http/message.h"
#include "http/responder.h"

namespace rankd::http {

// Called once per request, on the loop thread. The handler owns the Request and must
// answer through the Responder exactly once, now or later (from the loop thread).
// Pipelined requests on one connection wait until the previous one is answered.
using Handler = std::function<void(Request, Responder)>;

}  // namespace rankd::http
