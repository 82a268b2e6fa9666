// Handler: what a Listener calls with each complete request; ErrorRenderer: what it
// calls to answer an error.
// Thread: called on the listener's loop thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "http/message.h"
#include "http/responder.h"

namespace rankd::http {

// Called once per request, on the loop thread. The handler owns the Request and must
// answer through the Responder exactly once, now or later (from the loop thread).
// Pipelined requests on one connection wait until the previous one is answered.
using Handler = std::function<void(Request, Responder)>;

// The answer to an error: the ones this layer gives itself (a malformed request, a read
// timeout, a size limit, a Responder dropped unanswered) and Responder::SendError. This
// layer knows no error format: the listener's owner supplies it (rankd's is
// RenderError, api/errors.h).
struct ErrorResponse {
  int status = 500;
  std::string body;
  std::string_view content_type;  // a literal: it outlives the response
};
using ErrorRenderer = ErrorResponse (*)(const Error& e);

}  // namespace rankd::http
