// `rankd serve`: the server. The main thread blocks the signals it handles before any
// thread starts (so every thread inherits the mask) and then waits for them: SIGHUP
// reloads the plans (and re-reads --auth-token-file), SIGTERM/SIGINT fail readiness,
// serve on for --drain-delay-ms, then drain and exit 0. With --watch-plans-ms the wait times out
// every N ms to compare the plans folder's fingerprint with the one of the last load, and reloads
// when it differs. Before anything starts it raises its open-file limit to the hard limit.
// The signals also reach the wait when they land on a thread a library started before main
// (core/main_signals.h).
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "cli/commands.h"
#include "cli/serve_flags.h"
#include "core/deadline.h"
#include "core/log.h"
#include "core/main_signals.h"
#include "plan/loader.h"
#include "server/server.h"

namespace rankd {

namespace {

// The drain delay: /readyz already fails, so balancers take this replica out while it
// still serves. A second SIGTERM/SIGINT ends the wait early (an operator who wants the
// process gone now). SIGHUP and plan file changes are no longer acted on: the process is
// on its way out.
void WaitDrainDelay(uint64_t ms) {
  if (ms == 0) return;
  LogInfo("drain delay: /readyz fails; serving " + std::to_string(ms) +
          " ms more before closing (a second SIGTERM/SIGINT skips the rest)");
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  const TimePoint until = Clock::now() + std::chrono::milliseconds(ms);
  for (TimePoint now = Clock::now(); now < until; now = Clock::now()) {
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
    timespec wait{static_cast<time_t>(left / 1'000'000'000),
                  static_cast<long>(left % 1'000'000'000)};
    int sig = sigtimedwait(&stop, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT) {
      LogInfo(std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") +
              " again: skipping the rest of the drain delay");
      return;
    }
    // Otherwise the time is up (EAGAIN) or the wait was interrupted (EINTR): the loop checks.
  }
}

// Every connection is a file descriptor: --max-connections per shard, the Redis
// connections and the log files need more than the usual soft limit of 1024. The hard
// limit is what the operator allows (systemd's LimitNOFILE=, the container runtime,
// `ulimit -Hn`): take all of it, and say so when even that is short of the flags.
void RaiseOpenFileLimit(const ServeOptions& o) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  uint64_t want = static_cast<uint64_t>(o.http.max_connections) * static_cast<uint64_t>(o.shards);
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < want)
    LogInfo("open files are limited to " + std::to_string(r.rlim_cur) +
            " (RLIMIT_NOFILE), under --max-connections x --shards = " + std::to_string(want) +
            ": accepting fails with EMFILE first; raise LimitNOFILE= or ulimit -n");
}

}  // namespace

int CmdServe(const std::vector<std::string>& args) {
  auto parsed = ParseServeArgs(args);
  if (!parsed) {
    std::fprintf(stderr, "rankd serve: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(ServeUsage().c_str(), stdout);
    return 0;
  }
  if (parsed->version) {
    std::printf("rankd %s\n", RANKD_VERSION);
    return 0;
  }
  SetLogLevel(parsed->options.log_level);
  RaiseOpenFileLimit(parsed->options);

  sigset_t set = TakeSignalsOnMainThread({SIGHUP, SIGTERM, SIGINT});
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the process

  const uint64_t watch_ms = parsed->options.watch_plans_ms;
  const std::string plans_dir = parsed->options.plans;
  // Taken before each load: a change during the load shows at the next check.
  std::string loaded_fingerprint = watch_ms ? PlanDirFingerprint(plans_dir) : std::string();
  Server server(std::move(parsed->options));
  if (auto st = server.Start(); !st) {
    LogError("start-up failed: " + st.error().message);
    return 1;
  }
  timespec every{static_cast<time_t>(watch_ms / 1000),
                 static_cast<long>(watch_ms % 1000) * 1000000};
  for (;;) {
    int sig = watch_ms ? sigtimedwait(&set, nullptr, &every) : sigwaitinfo(&set, nullptr);
    if (sig < 0) {
      if (errno != EAGAIN) continue;  // EINTR
      std::string now = PlanDirFingerprint(plans_dir);
      if (now == loaded_fingerprint) continue;
      loaded_fingerprint = std::move(now);
      LogInfo("plans changed in " + plans_dir + ": reloading");
      (void)server.Reload();  // logs its own outcome; a rejected set waits for the next change
      continue;
    }
    if (sig == SIGHUP) {
      LogInfo(server.options().auth_token_file.empty()
                  ? "SIGHUP: reloading plans"
                  : "SIGHUP: reloading plans and --auth-token-file");
      if (watch_ms) loaded_fingerprint = PlanDirFingerprint(plans_dir);
      (void)server.Reload();            // logs its own outcome
      (void)server.ReloadAuthTokens();  // the same; independent of the plans' outcome
      continue;
    }
    LogInfo(std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") + ": shutting down");
    server.StopBeingReady();
    WaitDrainDelay(server.options().drain_delay_ms);
    server.Shutdown();
    return 0;
  }
}

const char kServeSynopsis[] = "[flags]  (the default command; see rankd serve --help)";

}  // namespace rankd
