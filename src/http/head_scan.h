// HeadScanner: checks raw request-head bytes (request line, header lines, trailers)
// for the two things llhttp 8.1.0 accepts but we must not: a bare CR (CR not followed
// by LF, CVE-2023-30589 request smuggling) and obsolete folded header lines (a line
// that starts with SP or HT). Runs BEFORE the bytes reach llhttp; keeps its state
// across calls because a line may arrive in several reads.
// Pure value type: any thread (each connection owns one).
#pragma once

#include <cstdint>
#include <string_view>

namespace rankd::http {

enum class HeadScanResult : uint8_t { kOk, kBareCr, kFoldedLine };

class HeadScanner {
 public:
  // Back to the start of a head (or of a trailer section): at a line start.
  void Reset() { *this = HeadScanner{}; }

  // Scans the next bytes of the head. Once it returns an error the head is rejected;
  // the scanner is not meant to be fed again before Reset.
  HeadScanResult Scan(std::string_view bytes);

 private:
  bool at_line_start_ = true;
  bool after_cr_ = false;  // the previous byte (maybe from the previous call) was CR
};

}  // namespace rankd::http
