// rankd: dispatches `rankd <command> [flags]` to the subcommand of that name.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* help;
};

// Add one line per subcommand.
constexpr Command kCommands[] = {
    {"serve", &rankd::CmdServe, "[flags]  (the default command; see rankd serve --help)"},
    {"run", &rankd::CmdRun,
     "--plan NAME [--plans DIR] [--deadline-ms N] [--node-timeout-ms N] [--explain] "
     "[--enable-test-ops] [--redis NAME=URL]...  (request JSON on stdin)"},
    {"bench", &rankd::CmdBench,
     "--plan NAME [-n N] [-c C] [--plans DIR] [--user-id U] [--deadline-ms N] [--node-timeout-ms N]"
     " [--redis NAME=URL]... [--redis-conns K] [--enable-test-ops]"},
    {"check-plans", &rankd::CmdCheckPlans,
     "[--plans DIR] [--served-log NAME=URL]... [--enable-test-ops]"},
    {"replay", &rankd::CmdReplay,
     "--log FILE|redis-stream://ENDPOINT?stream=S [--redis NAME=URL]... [--plans DIR]"
     " [--enable-test-ops]"},
    {"seed", &rankd::CmdSeed,
     "[--redis URL] [--users N] [--follows F] [--media M] [--recs R] [--seen S] [--seed X] "
     "[--flush]"},
    {"ops", &rankd::CmdOps, "--json | --markdown  (the op catalogue)"},
};

int Usage() {
  std::fprintf(stderr, "usage: rankd <command> [flags]\n");
  for (const auto& c : kCommands) std::fprintf(stderr, "  rankd %s %s\n", c.name, c.help);
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
