// RequestStream: the socket-free parser, fed byte strings split anywhere.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "http/request_stream.h"

using namespace rankd::http;

namespace {

struct Fed {
  std::vector<Request> requests;
  std::optional<RejectKind> reject;
  int continues = 0;
};

// Feeds `bytes` in pieces of `piece` bytes, as a connection would (keeping the rest).
Fed FeedAll(const std::string& bytes, size_t piece) {
  static const HttpOptions opt;
  RequestIdGenerator ids(0, 99);
  RequestStream s(opt, ids);
  Fed out;
  std::string in;
  size_t off = 0;
  for (size_t at = 0; at < bytes.size() && !out.reject; at += piece) {
    in.append(bytes, at, piece);
    while (off < in.size()) {
      auto step = s.Feed(in.data() + off, in.size() - off);
      off += step.used;
      out.continues += step.send_continue;
      if (step.outcome == RequestStream::Outcome::kReject) {
        out.reject = s.reject().first;
        break;
      }
      if (step.outcome == RequestStream::Outcome::kRequest)
        out.requests.push_back(s.TakeRequest());
      else if (step.used == 0)
        break;
    }
  }
  return out;
}

const std::string kPipelined =
    "GET /a HTTP/1.1\r\nX-Request-Id: one\r\n\r\n"
    "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    "3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n"
    "POST /c HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nxy";

}  // namespace

TEST_CASE("pipelined requests come out one at a time, the same however the bytes are cut") {
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, kPipelined.size()}) {
    CAPTURE(piece);
    Fed f = FeedAll(kPipelined, piece);
    REQUIRE_FALSE(f.reject);
    REQUIRE(f.requests.size() == 3);
    CHECK(f.requests[0].target == "/a");
    CHECK(f.requests[0].request_id == "one");
    CHECK(f.requests[1].body == "abcde");
    CHECK(f.requests[2].body == "xy");
    CHECK_FALSE(f.requests[2].keep_alive);
    CHECK(f.continues == 1);
  }
}

TEST_CASE("HTTP/1.0 with Transfer-Encoding is refused (RFC 9112 6.1)") {
  Fed f = FeedAll("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 5);
  CHECK(f.requests.empty());
  REQUIRE(f.reject);
  CHECK(*f.reject == RejectKind::kTransferEncodingHttp10);
  // HTTP/1.1 with the same head is fine.
  CHECK(FeedAll("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 5)
            .requests.size() == 1);
}

TEST_CASE("framing and head refusals keep their reasons") {
  CHECK(*FeedAll("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 3).reject == RejectKind::kBareCr);
  CHECK(*FeedAll("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 3).reject == RejectKind::kFoldedHeader);
  CHECK(*FeedAll("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 9)
             .reject == RejectKind::kContentLengthAndTransferEncoding);
  CHECK(*FeedAll("GET / HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n", 4096).reject ==
        RejectKind::kHeadTooLarge);
}

TEST_CASE("a body's memory follows its bytes: nothing ahead of them, one block at most beyond") {
  HttpOptions opt;
  RequestIdGenerator ids(0, 99);
  RequestStream s(opt, ids);
  const size_t announced = opt.max_body_bytes;
  std::string head =
      "POST /rank HTTP/1.1\r\nContent-Length: " + std::to_string(announced) + "\r\n\r\n";
  auto step = s.Feed(head.data(), head.size());
  REQUIRE(step.outcome == RequestStream::Outcome::kMore);
  CHECK(s.body_bytes_held() == 0);  // a head announcing 1 MiB costs nothing yet
  CHECK(s.body_bytes_missing() == announced);
  std::string piece(5000, 'b');
  size_t fed = 0;
  while (fed + piece.size() < announced) {
    step = s.Feed(piece.data(), piece.size());
    REQUIRE(step.outcome == RequestStream::Outcome::kMore);
    fed += piece.size();
    CHECK(s.body_bytes_held() >= fed);
    CHECK(s.body_bytes_held() <= fed + BodyBuffer::kBlock);
    CHECK(s.body_bytes_missing() == announced - fed);
  }
  std::string rest(announced - fed, 'c');
  step = s.Feed(rest.data(), rest.size());
  REQUIRE(step.outcome == RequestStream::Outcome::kRequest);
  Request req = s.TakeRequest();
  CHECK(req.body.size() == announced);
  std::string_view body = req.body;
  CHECK(body.substr(0, 5000) == std::string(5000, 'b'));
  CHECK(body.substr(fed) == rest);
  CHECK(s.body_bytes_held() == 0);
}

TEST_CASE("BodyBuffer: bytes across block boundaries come back whole, and Take empties it") {
  BodyBuffer b;
  std::string want;
  for (size_t i = 0; want.size() < 5 * BodyBuffer::kBlock + 123; ++i) {
    std::string piece(1 + (i * 7919) % 30000, static_cast<char>('a' + i % 26));
    b.Append(piece);
    want += piece;
    CHECK(b.size() == want.size());
    CHECK(b.held() <= want.size() + BodyBuffer::kBlock);
  }
  rankd::PoolString got = b.Take();
  CHECK(std::string_view(got) == want);
  CHECK(b.size() == 0);
  CHECK(b.held() == 0);
  b.Append("small");
  CHECK(std::string_view(b.Take()) == "small");
}
