#include "http/responder.h"

#include <string>
#include <utility>

#include "core/event_loop.h"
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

std::shared_ptr<Connection> Responder::Take() {
  if (done_) return nullptr;
  loop_->AssertInLoopThread();
  done_ = true;
  return std::exchange(conn_, {}).lock();
}

void Responder::Send(const Response& r) {
  if (auto c = Take()) c->Respond(seq_, r);
}

void Responder::AddHeader(std::string_view name, std::string_view value) {
  if (done_) return;
  loop_->AssertInLoopThread();
  if (auto c = conn_.lock()) c->AddAnswerHeader(seq_, name, value);
}

void Responder::SendError(const Error& e, std::span<const HeaderField> extra_headers) {
  if (auto c = Take()) c->RespondError(seq_, e, extra_headers);
}

}  // namespace rankd::http
