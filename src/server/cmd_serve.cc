// `rankd serve`: the server. The main thread blocks the signals it handles before any
// thread starts (so every thread inherits the mask) and then waits for them with
// sigwait: SIGHUP reloads the plans, SIGTERM/SIGINT drain and exit 0.
#include <signal.h>

#include <cstdio>

#include "core/log.h"
#include "server/commands.h"
#include "server/server.h"

namespace rankd {

int CmdServe(const std::vector<std::string>& args) {
  auto parsed = ParseServeArgs(args);
  if (!parsed) {
    std::fprintf(stderr, "rankd serve: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(ServeUsage(), stdout);
    return 0;
  }
  if (parsed->version) {
    std::printf("rankd %s\n", RANKD_VERSION);
    return 0;
  }
  SetLogLevel(parsed->options.log_level);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the process

  Server server(std::move(parsed->options));
  if (auto st = server.Start(); !st) {
    LogError("start-up failed: " + st.error().message);
    return 1;
  }
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      LogInfo("SIGHUP: reloading plans");
      (void)server.Reload();  // logs its own outcome
      continue;
    }
    LogInfo(std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") + ": shutting down");
    server.Shutdown();
    return 0;
  }
}

}  // namespace rankd
