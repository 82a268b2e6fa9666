// The `rankd` subcommands, one per file (cmd_<name>.cc), dispatched by main.cc.
// Each takes the arguments after its name and returns the process exit code.
//
// Threads: the main thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rankd {

int CmdRun(const std::vector<std::string>& args);          // cmd_run.cc
int CmdBench(const std::vector<std::string>& args);        // cmd_bench.cc
int CmdCheckPlans(const std::vector<std::string>& args);   // cmd_check_plans.cc
int CmdSeed(const std::vector<std::string>& args);         // cmd_seed.cc (Redis demo data)
int CmdServe(const std::vector<std::string>& args);        // cmd_serve.cc (the default)

// Minimal flag reading for the subcommands: `--name value`, `-n value`, `--switch`.
class CliArgs {
 public:
  explicit CliArgs(const std::vector<std::string>& args) : args_(args), used_(args.size()) {}
  // The value after `name` (or an alias), if present.
  std::optional<std::string> Value(std::string_view name, std::string_view alias = {});
  bool Switch(std::string_view name);
  // Parses an integer flag into `out`; false (with a message on stderr) if malformed.
  bool Int(std::string_view name, int64_t& out, std::string_view alias = {});
  // Stderr-reports the first argument no Value/Switch call consumed; false if any.
  bool AllUsed(std::string_view command);

 private:
  const std::vector<std::string>& args_;
  std::vector<bool> used_;
};

}  // namespace rankd
