// HeadScanner: bare CR and folded lines are caught wherever the read boundaries fall.
#include <doctest/doctest.h>

#include <string>

#include "http/head_scan.h"

using rankd::http::HeadScanner;
using rankd::http::HeadScanResult;

namespace {

// Feeds `head` in pieces of `step` bytes; returns the first non-Ok result.
HeadScanResult ScanInSteps(const std::string& head, size_t step) {
  HeadScanner s;
  for (size_t i = 0; i < head.size(); i += step) {
    HeadScanResult r = s.Scan(std::string_view(head).substr(i, step));
    if (r != HeadScanResult::kOk) return r;
  }
  return HeadScanResult::kOk;
}

void CheckAllSplits(const std::string& head, HeadScanResult want) {
  for (size_t step = 1; step <= head.size(); ++step) {
    CAPTURE(step);
    CHECK(ScanInSteps(head, step) == want);
  }
}

}  // namespace

TEST_CASE("a well-formed head passes in any split") {
  CheckAllSplits("GET / HTTP/1.1\r\nHost: a\r\nX-A: b c\r\n\r\n", HeadScanResult::kOk);
}

TEST_CASE("leading empty lines and bare LF line ends are not errors") {
  CheckAllSplits("\r\n\r\nGET / HTTP/1.1\nHost: a\n\n", HeadScanResult::kOk);
}

TEST_CASE("a bare CR inside a header value is caught") {
  CheckAllSplits("GET / HTTP/1.1\r\nX-A: b\rX-B: c\r\n\r\n", HeadScanResult::kBareCr);
}

TEST_CASE("a bare CR at the end of the request line is caught") {
  CheckAllSplits("GET / HTTP/1.1\rHost: a\r\n\r\n", HeadScanResult::kBareCr);
}

TEST_CASE("CR CR LF is a bare CR") {
  CheckAllSplits("GET / HTTP/1.1\r\r\n\r\n", HeadScanResult::kBareCr);
}

TEST_CASE("a CR at the end of the data waits for the next byte") {
  HeadScanner s;
  CHECK(s.Scan("GET / HTTP/1.1\r") == HeadScanResult::kOk);
  CHECK(s.Scan("X") == HeadScanResult::kBareCr);
  s.Reset();
  CHECK(s.Scan("GET / HTTP/1.1\r") == HeadScanResult::kOk);
  CHECK(s.Scan("\n") == HeadScanResult::kOk);
}

TEST_CASE("folded header lines (SP or HT at a line start) are caught") {
  CheckAllSplits("GET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n", HeadScanResult::kFoldedLine);
  CheckAllSplits("GET / HTTP/1.1\r\nX-A: b\r\n\tc\r\n\r\n", HeadScanResult::kFoldedLine);
  CheckAllSplits("GET / HTTP/1.1\n Host: a\n\n", HeadScanResult::kFoldedLine);
}

TEST_CASE("spaces inside a line are fine") {
  CheckAllSplits("GET /a%20b HTTP/1.1\r\nX-A:   b  \t c\r\n\r\n", HeadScanResult::kOk);
}

TEST_CASE("Reset starts a new head at a line start") {
  HeadScanner s;
  CHECK(s.Scan("X-A: b") == HeadScanResult::kOk);
  s.Reset();
  CHECK(s.Scan(" folded") == HeadScanResult::kFoldedLine);
}
