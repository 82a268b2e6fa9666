#include "http/responder.h"

#include <string>

#include "core/event_loop.h"
#include "http/api_errors.h"
#include "http/connection.h"
#include "http/response_writer.h"

namespace rankd::http {

Responder& Responder::operator=(Responder&& o) noexcept {
  if (this != &o) {
    if (!done_) SendError(Error::Internal("handler replaced a request's responder unanswered"));
    conn_ = std::move(o.conn_);
    loop_ = o.loop_;
    seq_ = o.seq_;
    done_ = o.done_;
    o.done_ = true;
  }
  return *this;
}

Responder::~Responder() {
  if (!done_) SendError(Error::Internal("handler dropped the request without answering"));
}

void Responder::Send(const Response& r) {
  if (done_) return;
  loop_->AssertInLoopThread();
  done_ = true;
  if (auto c = conn_.lock()) c->Respond(seq_, r);
  conn_.reset();
}

void Responder::SendError(const Error& e, std::span<const HeaderField> extra_headers) {
  if (done_) return;
  std::string body = ErrorBody(e);
  Send(Response{ErrorStatus(e.code), body, "application/json", extra_headers});
}

}  // namespace rankd::http
