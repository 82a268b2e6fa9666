// The HTTP layer's thread rules check themselves: a loop-only entry point called from
// another thread aborts, naming itself. Each case runs in a forked child. The checks
// are compiled out with NDEBUG, so there the cases only show that nothing aborts.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <memory>

#include "api/errors.h"
#include "core/event_loop.h"
#include "http/listener.h"
#include "http/responder.h"

using namespace rankd;
using namespace rankd::http;

namespace {

// Runs fn in a child process; true when the child was killed by SIGABRT.
template <class F>
bool AbortsInChild(F fn) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The abort is expected: the child dies of it, without the test runner's crash
    // report, and its message stays out of the test log.
    std::signal(SIGABRT, SIG_DFL);
    ::close(STDERR_FILENO);
    fn();
    std::_Exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

#ifdef NDEBUG
constexpr bool kChecksOn = false;
#else
constexpr bool kChecksOn = true;
#endif

}  // namespace

TEST_CASE("answering a request off its loop thread aborts") {
  EventLoop loop("shard0");  // never started: this thread is not its loop thread
  CHECK(AbortsInChild([&] {
          Responder r(std::weak_ptr<Connection>(), 1, loop);
          r.Send(Response{});
        }) == kChecksOn);
  // An answered Responder may be destroyed anywhere.
  CHECK_FALSE(AbortsInChild([] { Responder r; }));
}

TEST_CASE("starting a listener off its loop thread aborts") {
  EventLoop loop("shard0");
  HttpOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  CHECK(AbortsInChild([&] {
          (void)Listener::Start(
              loop, o, [](Request, Responder r) { r.Send(Response{}); }, RenderError);
        }) == kChecksOn);
}
