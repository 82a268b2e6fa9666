#include <charconv>
#include <cstdio>

#include "server/commands.h"

namespace rankd {

std::optional<std::string> CliArgs::Value(std::string_view name, std::string_view alias) {
  for (size_t i = 0; i + 1 < args_.size(); ++i) {
    if (args_[i] == name || (!alias.empty() && args_[i] == alias)) {
      used_[i] = used_[i + 1] = true;
      return args_[i + 1];
    }
  }
  return std::nullopt;
}

bool CliArgs::Switch(std::string_view name) {
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i] == name) return used_[i] = true;
  return false;
}

bool CliArgs::Int(std::string_view name, int64_t& out, std::string_view alias) {
  auto v = Value(name, alias);
  if (!v) return true;
  auto r = std::from_chars(v->data(), v->data() + v->size(), out);
  if (r.ec != std::errc() || r.ptr != v->data() + v->size()) {
    std::fprintf(stderr, "rankd: %.*s: '%s' is not an integer\n", static_cast<int>(name.size()),
                 name.data(), v->c_str());
    return false;
  }
  return true;
}

bool CliArgs::AllUsed(std::string_view command) {
  for (size_t i = 0; i < args_.size(); ++i) {
    if (!used_[i]) {
      std::fprintf(stderr, "rankd %.*s: unknown argument '%s'\n", static_cast<int>(command.size()),
                   command.data(), args_[i].c_str());
      return false;
    }
  }
  return true;
}

}  // namespace rankd
