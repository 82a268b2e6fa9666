#include "api/console_files.h"

#include <algorithm>

namespace rankd {

const EmbeddedFile* FindEmbeddedFile(std::span<const EmbeddedFile> files, std::string_view name) {
  if (name.empty()) name = "index.html";
  auto it = std::lower_bound(files.begin(), files.end(), name,
                             [](const EmbeddedFile& f, std::string_view n) { return f.path < n; });
  return it != files.end() && it->path == name ? &*it : nullptr;
}

}  // namespace rankd
