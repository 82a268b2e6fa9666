#include "plan/plan.h"

namespace rankd {

int Plan::node_index(std::string_view id) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].id == id) return static_cast<int>(i);
  return -1;
}

}  // namespace rankd
