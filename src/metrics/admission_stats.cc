#include "metrics/admission_stats.h"

namespace rankd {

std::string_view RefusalName(Refusal r) {
  switch (r) {
    case Refusal::kLimit: return "limit";
    case Refusal::kDeadline: return "deadline";
    case Refusal::kCount: break;
  }
  return "?";
}

}  // namespace rankd
