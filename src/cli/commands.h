// The `rankd` subcommands, one per file (cmd_<name>.cc), dispatched by main.cc.
// Each takes the arguments after its name and returns the process exit code; its file
// also holds its synopsis (k<Name>Synopsis: its flags, for `rankd --help`).
//
// Threads: the main thread.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_flags.h"
#include "cli/redis_flags.h"
#include "plan/loader.h"
#include "redis/endpoint.h"

namespace rankd {

int CmdRun(const std::vector<std::string>& args);         // cmd_run.cc
int CmdBench(const std::vector<std::string>& args);       // cmd_bench.cc
int CmdCheckPlans(const std::vector<std::string>& args);  // cmd_check_plans.cc
int CmdSeed(const std::vector<std::string>& args);        // cmd_seed.cc (Redis demo data)
int CmdReplay(const std::vector<std::string>& args);      // cmd_replay.cc (served logs)
int CmdServe(const std::vector<std::string>& args);       // cmd_serve.cc (the default)
int CmdOps(const std::vector<std::string>& args);         // cmd_ops.cc (the op catalogue)
int CmdCounters(const std::vector<std::string>& args);    // cmd_counters.cc (one id's counters)

// Their one-line synopses for `rankd --help`, in their files.
extern const char kRunSynopsis[];
extern const char kBenchSynopsis[];
extern const char kCheckPlansSynopsis[];
extern const char kSeedSynopsis[];
extern const char kReplaySynopsis[];
extern const char kServeSynopsis[];
extern const char kOpsSynopsis[];
extern const char kCountersSynopsis[];

// Reads a subcommand's flags (cli_flags.h); on an error prints "rankd: <message>", or
// "rankd <command>: unknown argument '<arg>'", on stderr and returns false (cli_args.cc).
bool ParseCommandFlags(std::string_view command, const std::vector<std::string>& args,
                       std::span<const Flag> flags);
// The endpoints of a subcommand's Redis flags (cli/redis_flags.h); on an error prints
// "rankd <command>: <message>" on stderr and returns nullopt, for the command to exit 2.
std::optional<std::vector<RedisEndpoint>> ResolveCommandRedis(std::string_view command,
                                                              const RedisFlags& flags);
// The bounds of an integer flag a subcommand checks itself, or not at all.
inline constexpr int64_t kAnyInt = std::numeric_limits<int64_t>::max();

// The plans folder of a one-shot subcommand (run, bench, check-plans, replay): the flags
// --plans DIR, --max-model-bytes N and --enable-test-ops (serve's rows, serve_flags.cc,
// mean the same for the server), and the folder they name, loaded (cli_args.cc).
struct PlanDirFlags {
  std::string dir = "plans";
  ModelLimits model_limits;
  bool test_ops = false;
  // Appends the three rows to a command's table.
  void AddRows(std::vector<Flag>& flags);
  // The folder, loaded with the ops these flags allow.
  Result<PlanSet> Load() const;
};

}  // namespace rankd
