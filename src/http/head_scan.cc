#include "http/head_scan.h"

#include <cstring>

namespace rankd::http {

HeadScanResult HeadScanner::Scan(std::string_view bytes) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  while (p < end) {
    if (after_cr_) {
      // The byte after a CR decides: only LF makes it a line end.
      if (*p != '\n') return HeadScanResult::kBareCr;
      after_cr_ = false;
      at_line_start_ = true;
      ++p;
      continue;
    }
    if (at_line_start_ && (*p == ' ' || *p == '\t')) return HeadScanResult::kFoldedLine;
    // Jump to the next CR or LF: head lines are mostly plain bytes, and memchr-style
    // scanning keeps this pre-pass cheap next to llhttp's own work.
    const char* q = p;
    while (q < end && *q != '\r' && *q != '\n') ++q;
    if (q == end) {
      at_line_start_ = false;
      return HeadScanResult::kOk;
    }
    if (*q == '\r') {
      after_cr_ = true;
    } else {
      at_line_start_ = true;  // a bare LF ends a line for llhttp too; it cannot smuggle
    }
    p = q + 1;
  }
  return HeadScanResult::kOk;
}

}  // namespace rankd::http
