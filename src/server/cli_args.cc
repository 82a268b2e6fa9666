#include <cstdio>

#include "server/commands.h"

namespace rankd {

bool ParseCommandFlags(std::string_view command, const std::vector<std::string>& args,
                       std::span<const Flag> flags) {
  auto st = ParseFlags(args, flags);
  if (st) return true;
  if (st.error().code == ErrorCode::kNotFound)
    std::fprintf(stderr, "rankd %.*s: unknown argument '%s'\n", static_cast<int>(command.size()),
                 command.data(), st.error().message.c_str());
  else
    std::fprintf(stderr, "rankd: %s\n", st.error().message.c_str());
  return false;
}

std::optional<std::vector<RedisEndpoint>> ResolveCommandRedis(std::string_view command,
                                                              const RedisFlags& flags) {
  auto endpoints = ResolveRedisFlags(flags);
  if (endpoints) return std::move(*endpoints);
  std::fprintf(stderr, "rankd %.*s: %s\n", static_cast<int>(command.size()), command.data(),
               endpoints.error().message.c_str());
  return std::nullopt;
}

}  // namespace rankd
