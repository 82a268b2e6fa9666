#include <cstdio>

#include "cli/commands.h"
#include "tasks/task.h"

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

void PlanDirFlags::AddRows(std::vector<Flag>& flags) {
  flags.push_back(TextFlag("--plans", "DIR", {}, dir));
  flags.push_back(
      IntFlag("--max-model-bytes", "N", {}, model_limits.max_bytes, 1, int64_t{1} << 40));
  flags.push_back(SwitchFlag("--enable-test-ops", {}, test_ops));
}

Result<PlanSet> PlanDirFlags::Load() const {
  return LoadPlanDir(dir, test_ops ? TaskRegistry::WithTestOps() : TaskRegistry::Default(),
                     model_limits);
}

}  // namespace rankd
