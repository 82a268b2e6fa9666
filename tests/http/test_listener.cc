// Listener start-up over real sockets: shards share a port through SO_REUSEPORT, the
// port check sees them, and a port held by a plain socket is refused with a message.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>

#include "api/errors.h"
#include "core/loop_runtime.h"
#include "http/listener.h"

using namespace rankd;
using namespace rankd::http;

namespace {

// A shard's loop for these tests; listeners need no CPU workers, the runtime has one.
struct TestLoop : LoopRuntime {
  explicit TestLoop(std::string name) : LoopRuntime(std::move(name), /*cpu_threads=*/1) { Start(); }
};

HttpOptions Loopback(int port) {
  HttpOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  return o;
}

void Ignore(Request, Responder r) { r.Send(Response{}); }

// Listener::Drain finishes later, in a callback: wait for that, not just for the call.
void DrainAndWait(LoopRuntime& rt, std::shared_ptr<Listener> l) {
  std::promise<void> done;
  rt.OnLoop([&] { l->Drain([&] { done.set_value(); }); });
  done.get_future().wait();
}

}  // namespace

TEST_CASE("two shards listen on one port; the port check then reports it taken") {
  TestLoop a("shard0"), b("shard1");
  auto la = a.OnLoop([&] { return Listener::Start(a.loop(), Loopback(0), Ignore, RenderError); });
  REQUIRE(la.has_value());
  int port = (*la)->port();
  CHECK(port > 0);
  auto lb =
      b.OnLoop([&] { return Listener::Start(b.loop(), Loopback(port), Ignore, RenderError); });
  REQUIRE(lb.has_value());
  CHECK((*lb)->port() == port);

  auto check = CheckPortFree("127.0.0.1", port);
  REQUIRE_FALSE(check.has_value());
  CHECK(check.error().message.find("already in use") != std::string::npos);

  DrainAndWait(a, *la);
  DrainAndWait(b, *lb);
  CHECK(CheckPortFree("127.0.0.1", port).has_value());
}

TEST_CASE("a port held by a socket without SO_REUSEPORT is refused with a clear error") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(fd, 8) == 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);

  TestLoop loop("shard0");
  auto l = loop.OnLoop(
      [&] { return Listener::Start(loop.loop(), Loopback(port), Ignore, RenderError); });
  REQUIRE_FALSE(l.has_value());
  CHECK(l.error().message.find(std::to_string(port)) != std::string::npos);
  CHECK_FALSE(CheckPortFree("127.0.0.1", port).has_value());
  ::close(fd);
  loop.Stop();  // the failed listener's handle is closed by then
}

TEST_CASE("a loop stopped with a listener still open closes it cleanly") {
  TestLoop loop("shard0");
  auto l =
      loop.OnLoop([&] { return Listener::Start(loop.loop(), Loopback(0), Ignore, RenderError); });
  REQUIRE(l.has_value());
  l->reset();  // the owner lets go; the listener keeps itself alive until closed
  loop.Stop();
}
