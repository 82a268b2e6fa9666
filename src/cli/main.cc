// rankd: dispatches `rankd <command> [flags]` to the subcommand of that name.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* usage;  // its line in `rankd --help`
};

// Add one line per subcommand.
constexpr Command kCommands[] = {
    {"serve", &rankd::CmdServe, rankd::kServeSynopsis},
    {"run", &rankd::CmdRun, rankd::kRunSynopsis},
    {"bench", &rankd::CmdBench, rankd::kBenchSynopsis},
    {"check-plans", &rankd::CmdCheckPlans, rankd::kCheckPlansSynopsis},
    {"replay", &rankd::CmdReplay, rankd::kReplaySynopsis},
    {"seed", &rankd::CmdSeed, rankd::kSeedSynopsis},
    {"counters", &rankd::CmdCounters, rankd::kCountersSynopsis},
    {"ops", &rankd::CmdOps, rankd::kOpsSynopsis},
};

int Usage() {
  std::fprintf(stderr, "usage: rankd <command> [flags]\n");
  for (const auto& c : kCommands) std::fprintf(stderr, "  rankd %s %s\n", c.name, c.usage);
  std::fprintf(stderr,
               "Every command that takes --redis also takes --redis-password-file NAME=PATH,\n"
               "--redis-tls-ca FILE, --redis-tls-cert FILE and --redis-tls-key FILE (see rankd "
               "serve --help).\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // `rankd` alone, or `rankd --flags`, serves.
  if (argc < 2 || argv[1][0] == '-') {
    std::string first = argc >= 2 ? argv[1] : "";
    if (first == "--help" || first == "-h") return Usage(), 0;
    return rankd::CmdServe(std::vector<std::string>(argv + 1, argv + argc));
  }
  std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : kCommands)
    if (name == c.name) return c.run(args);
  std::fprintf(stderr, "rankd: unknown command '%s'\n", name.c_str());
  return Usage();
}
