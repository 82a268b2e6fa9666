// The `http` fuzz target: request bytes, cut into pieces at points the input chooses,
// through the HTTP layer's parser exactly as a connection feeds it (src/http
// RequestStream: head scan, llhttp, framing and size limits, one request at a time,
// pipelined), with each request answered and each refusal turned into its error
// response (response_writer), then end of stream. Checks the invariants a connection
// relies on and traps on a violation.
//
// Input layout: byte 0 holds the number of piece lengths (low 3 bits); that many bytes
// follow, each a piece length minus one, used in turn until the bytes run out (no
// lengths: one piece). The rest is what the client sent.
//
// Built by ops/fuzz with libFuzzer; tests/http builds it with fuzz_replay.cc into a
// normal program that runs the seed corpus (tests/fuzz/corpus/http) in every build.
// Thread: libFuzzer's (one input at a time).
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/errors.h"
#include "http/request_id.h"
#include "http/request_stream.h"
#include "http/response_writer.h"

namespace {

using rankd::ErrorBody;
using rankd::http::AppendContinue;
using rankd::http::AppendResponse;
using rankd::http::HttpOptions;
using rankd::http::IsValidRequestId;
using rankd::http::Request;
using rankd::http::RequestIdGenerator;
using rankd::http::RequestStream;
using rankd::http::Response;
using rankd::http::ResponseMeta;

// Small limits, so that short inputs reach the limit paths too.
HttpOptions FuzzOptions() {
  HttpOptions o;
  o.max_head_bytes = 1024;
  o.max_body_bytes = 4096;
  return o;
}

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// One connection's worth of input. Returns false once the stream refused the bytes.
class FakeConnection {
 public:
  FakeConnection() : stream_(options_, ids_) {}

  bool Receive(const char* data, size_t n) {
    // As Connection does: keep only the unparsed rest, append what arrived.
    in_.erase(0, off_);
    off_ = 0;
    in_.append(data, n);
    int idle_steps = 0;
    while (off_ < in_.size()) {
      RequestStream::Step step = stream_.Feed(in_.data() + off_, in_.size() - off_);
      off_ += step.used;
      Check(off_ <= in_.size());
      if (step.send_continue) AppendContinue(out_);
      if (step.outcome == RequestStream::Outcome::kReject) {
        const auto& [kind, err] = stream_.reject();
        int status = rankd::ErrorStatus(err.code);
        Check(status == 400 || status == 413 || status == 431);
        (void)kind;
        std::string body = ErrorBody(err);
        AppendResponse(out_, Response{status, body, "application/json", {}},
                       ResponseMeta{"fuzz", true, false, {}});
        return false;
      }
      if (step.outcome == RequestStream::Outcome::kRequest) {
        idle_steps = 0;
        Answer(stream_.TakeRequest());
        continue;
      }
      // A step that neither consumed bytes nor finished anything would spin a
      // connection's parse loop for ever.
      if (step.used == 0)
        Check(++idle_steps < 2);
      else
        idle_steps = 0;
    }
    return true;
  }

  void End() {
    if (stream_.FinishCutShort()) {
      std::string body = ErrorBody(rankd::Error::BadRequest("request cut short by end of stream"));
      AppendResponse(out_, Response{400, body, "application/json", {}},
                     ResponseMeta{"fuzz", true, false, {}});
    }
  }

 private:
  void Answer(Request req) {
    Check(!req.method.empty());
    Check(req.body.size() <= options_.max_body_bytes);
    Check(IsValidRequestId(req.request_id));
    size_t head = req.target.size();
    for (const auto& h : req.headers) head += h.name.size() + h.value.size();
    Check(head <= options_.max_head_bytes);
    (void)req.path();
    (void)req.query();
    (void)req.content_type();
    Response r{200, req.body, "application/octet-stream", {}};
    AppendResponse(out_, r,
                   ResponseMeta{req.request_id, !req.keep_alive, req.method == "HEAD", {}});
    // Answered and sent: output does not pile up across a long input.
    if (out_.size() > (1 << 16)) out_.clear();
  }

  HttpOptions options_ = FuzzOptions();
  RequestIdGenerator ids_{0, 1};
  RequestStream stream_;
  std::string in_;
  size_t off_ = 0;
  std::string out_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t nlen = data[0] & 7;
  if (size < 1 + nlen) return 0;
  const uint8_t* lens = data + 1;
  const char* p = reinterpret_cast<const char*>(data + 1 + nlen);
  size_t left = size - 1 - nlen;
  FakeConnection conn;
  for (size_t i = 0; left > 0; ++i) {
    size_t piece = nlen == 0 ? left : std::min<size_t>(left, size_t{lens[i % nlen]} + 1);
    if (!conn.Receive(p, piece)) return 0;  // refused: the connection closes
    p += piece;
    left -= piece;
  }
  conn.End();
  return 0;
}
