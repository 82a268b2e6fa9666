// Response serialisation: one block with the mandatory headers.
#include <doctest/doctest.h>

#include <string>

#include "http/response_writer.h"

using namespace rankd::http;

TEST_CASE("a response carries length, request id and connection headers") {
  std::string out = "previous";
  HeaderField extra[] = {{"Retry-After", "1"}};
  AppendResponse(out, Response{200, "{\"a\":1}", "application/json", extra},
                 ResponseMeta{"id-1", false, false, {}});
  CHECK(out ==
        "previousHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n"
        "X-Request-Id: id-1\r\nConnection: keep-alive\r\nRetry-After: 1\r\n\r\n{\"a\":1}");
}

TEST_CASE("HEAD keeps the length but not the body; close is announced") {
  std::string out;
  AppendResponse(out, Response{404, "nope", "text/plain", {}}, ResponseMeta{"x", true, true, {}});
  CHECK(out ==
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n"
        "X-Request-Id: x\r\nConnection: close\r\n\r\n");
}

TEST_CASE("headers that would split the response are dropped") {
  std::string out;
  HeaderField extra[] = {{"X-Bad", "a\r\nSet-Cookie: x"}, {"X-Good", "b"}};
  AppendResponse(out, Response{200, "", "application/json", extra},
                 ResponseMeta{"i", false, false, {}});
  CHECK(out.find("Set-Cookie") == std::string::npos);
  CHECK(out.find("X-Good: b\r\n") != std::string::npos);
}
