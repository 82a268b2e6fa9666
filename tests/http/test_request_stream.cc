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
  // A head announcing 1 MiB costs its header list only.
  const size_t head_held = s.bytes_held();
  CHECK(head_held <= 1024);
  std::string piece(5000, 'b');
  size_t fed = 0;
  while (fed + piece.size() < announced) {
    step = s.Feed(piece.data(), piece.size());
    REQUIRE(step.outcome == RequestStream::Outcome::kMore);
    fed += piece.size();
    CHECK(s.bytes_held() - head_held >= fed);
    CHECK(s.bytes_held() - head_held <= fed + BodyBuffer::kBlock);
  }
  std::string rest(announced - fed, 'c');
  step = s.Feed(rest.data(), rest.size());
  REQUIRE(step.outcome == RequestStream::Outcome::kRequest);
  Request req = s.TakeRequest();
  CHECK(req.body.size() == announced);
  std::string_view body = req.body;
  CHECK(body.substr(0, 5000) == std::string(5000, 'b'));
  CHECK(body.substr(fed) == rest);
  CHECK(s.bytes_held() == 0);
}

std::string Headers(size_t n, std::string_view line) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += line;
  return out;
}

TEST_CASE("at most max_headers header lines, trailers included: 431 on the next one") {
  std::string head100 = "GET / HTTP/1.1\r\n" + Headers(100, "a:\r\n");
  Fed ok = FeedAll(head100 + "\r\n", 7);
  CHECK(!ok.reject);
  CHECK(ok.requests.size() == 1);
  Fed over = FeedAll(head100 + "b:\r\n\r\n", 7);
  REQUIRE(over.reject);
  CHECK(*over.reject == RejectKind::kTooManyHeaders);
  // A head of 4,000 empty headers stops at the 101st.
  CHECK(*FeedAll("GET / HTTP/1.1\r\n" + Headers(4000, "a:\r\n"), 4096).reject ==
        RejectKind::kTooManyHeaders);
  // 60 in the head and 41 in the trailers are 101 lines.
  std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n" +
                        Headers(59, "a:\r\n") + "\r\n1\r\nx\r\n0\r\n";
  CHECK(!FeedAll(chunked + Headers(40, "t: 1\r\n") + "\r\n", 5).reject);
  CHECK(*FeedAll(chunked + Headers(41, "t: 1\r\n") + "\r\n", 5).reject ==
        RejectKind::kTooManyHeaders);
}

TEST_CASE("a head's memory is charged while it arrives, and bounded by its lines") {
  HttpOptions opt;
  RequestIdGenerator ids(0, 99);
  RequestStream s(opt, ids);
  std::string line = "X-Long-Header-Name: " + std::string(130, 'v') + "\r\n";  // 152 bytes
  std::string head = "GET / HTTP/1.1\r\n" + Headers(100, line);
  REQUIRE(s.Feed(head.data(), head.size()).outcome == RequestStream::Outcome::kMore);
  // Each header's name and value strings (64 + 192 bytes in the pool's granules) and
  // its place in the list.
  CHECK(s.bytes_held() >= 100 * (64 + 192));
  CHECK(s.bytes_held() <= 100 * (64 + 192 + 2 * sizeof(RequestHeader)) + 64);
  std::string end = "\r\n";
  REQUIRE(s.Feed(end.data(), end.size()).outcome == RequestStream::Outcome::kRequest);
  CHECK(s.TakeRequest().headers.size() == 100);
  CHECK(s.bytes_held() == 0);
}

TEST_CASE("Host and Origin are found while parsing; a second Host is refused") {
  Fed o = FeedAll(
      "GET / HTTP/1.1\r\nHOST: a.example:8080\r\nOrigin: http://b\r\n"
      "origin: http://c\r\n\r\n",
      3);
  REQUIRE(o.requests.size() == 1);
  CHECK(o.requests[0].host() == "a.example:8080");
  CHECK(o.requests[0].origin() == "http://b");
  CHECK(o.requests[0].origin_count == 2);
  Fed none = FeedAll("GET / HTTP/1.1\r\n\r\n", 3);
  REQUIRE(none.requests.size() == 1);
  CHECK(none.requests[0].host().empty());
  CHECK(none.requests[0].origin().empty());
  CHECK(*FeedAll("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 3).reject ==
        RejectKind::kDuplicateHost);
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
