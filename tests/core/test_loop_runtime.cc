// LoopRuntime: run-on-the-loop-and-wait, the work gate, the stop order, and the
// loop-thread checks that guard loop-only entry points.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/awaitables.h"
#include "core/loop_runtime.h"
#include "core/work_gate.h"

using namespace rankd;

namespace {

Coro<void> HoldWhileSleeping(EventLoop& loop, uint64_t ms,
                             std::shared_ptr<std::atomic<bool>> done) {
  WorkGate::Hold hold = loop.HoldWork();
  co_await SleepMs(loop, ms);
  *done = true;
}

}  // namespace

TEST_CASE("OnLoop runs on the loop thread and returns values, references and exceptions") {
  LoopRuntime rt("rt", 1);
  CHECK_THROWS_AS(rt.OnLoop([] { return 1; }), LoopNotRunning);  // not started
  rt.Start();
  CHECK(rt.OnLoop([&] { return rt.loop().InLoopThread(); }));
  CHECK(rt.OnLoop([] { return std::string("x"); }) == "x");
  int value = 0;
  int& ref = rt.OnLoop([&]() -> int& { return value; });
  CHECK(&ref == &value);
  rt.OnLoop([&] { value = 7; });
  CHECK(value == 7);
  CHECK_THROWS_AS(rt.OnLoop([]() -> int { throw std::logic_error("boom"); }), std::logic_error);
  rt.Stop();
  CHECK_THROWS_AS(rt.OnLoop([] { return 1; }), LoopNotRunning);
}

TEST_CASE("a Hold counts while it lives, moves without counting twice") {
  WorkGate gate;
  {
    WorkGate::Hold a(gate);
    CHECK(gate.holders() == 1);
    WorkGate::Hold b = std::move(a);
    CHECK(gate.holders() == 1);
    WorkGate::Hold c(gate);
    CHECK(gate.holders() == 2);
    c = std::move(b);
    CHECK(gate.holders() == 1);
  }
  CHECK(gate.holders() == 0);
}

TEST_CASE("Stop runs the closers newest first, then waits for the work gate's holders") {
  LoopRuntime rt("rt", 1);
  rt.Start();
  std::vector<int> order;
  auto slept = std::make_shared<std::atomic<bool>>(false);
  rt.OnLoop([&] {
    rt.AtStop([&] { order.push_back(1); });
    rt.AtStop([&] { order.push_back(2); });
    Spawn(HoldWhileSleeping(rt.loop(), 30, slept));
    CHECK(rt.loop().runners() == 1);
  });
  rt.Stop();
  CHECK(order == std::vector<int>{2, 1});
  CHECK(slept->load());
  rt.Stop();  // idempotent
}

TEST_CASE("Stop waits for CPU jobs before it stops the loop they post to") {
  LoopRuntime rt("rt", 2);
  rt.Start();
  auto result = std::make_shared<std::atomic<int>>(0);
  rt.OnLoop([&] {
    Spawn([](LoopRuntime& r, std::shared_ptr<std::atomic<int>> out) -> Coro<void> {
      WorkGate::Hold hold = r.loop().HoldWork();
      *out = co_await OffloadCpu(r.loop(), r.cpu(), [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return 5;
      });
    }(rt, result));
  });
  rt.Stop();
  CHECK(result->load() == 5);
}

#ifndef NDEBUG
TEST_CASE("a loop-only entry point called from another thread aborts, naming itself") {
  LoopRuntime rt("checked", 1);
  rt.Start();
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the child: the loop thread did not survive fork, so this is "another"
    // The default action, not the test runner's crash handler (which, under TSan, ends
    // the child with an exit code instead of the signal).
    std::signal(SIGABRT, SIG_DFL);
    ::dup2(fds[1], STDERR_FILENO);
    rt.loop().timers();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    err.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK(err.find("timers") != std::string::npos);
  CHECK(err.find("'checked'") != std::string::npos);
}
#endif
