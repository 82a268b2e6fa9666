// Listener start-up over real sockets: shards share a port through SO_REUSEPORT, the
// port check sees them, and a port held by a plain socket is refused with a message.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>

#include "core/event_loop.h"
#include "http/listener.h"

using namespace rankd;
using namespace rankd::http;

namespace {

// Runs fn on the loop thread and waits for its result.
template <class F>
auto OnLoop(EventLoop& loop, F fn) {
  std::promise<decltype(fn())> p;
  auto f = p.get_future();
  REQUIRE(loop.Post([&] { p.set_value(fn()); }));
  return f.get();
}

HttpOptions Loopback(int port) {
  HttpOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  return o;
}

void Ignore(Request, Responder r) { r.Send(Response{}); }

void DrainAndWait(EventLoop& loop, std::shared_ptr<Listener> l) {
  std::promise<void> done;
  REQUIRE(loop.Post([&] { l->Drain([&] { done.set_value(); }); }));
  done.get_future().wait();
}

}  // namespace

TEST_CASE("two shards listen on one port; the port check then reports it taken") {
  EventLoop a("shard0"), b("shard1");
  a.Start();
  b.Start();
  auto la = OnLoop(a, [&] { return Listener::Start(a, Loopback(0), Ignore); });
  REQUIRE(la.has_value());
  int port = (*la)->port();
  CHECK(port > 0);
  auto lb = OnLoop(b, [&] { return Listener::Start(b, Loopback(port), Ignore); });
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

  EventLoop loop("shard0");
  loop.Start();
  auto l = OnLoop(loop, [&] { return Listener::Start(loop, Loopback(port), Ignore); });
  REQUIRE_FALSE(l.has_value());
  CHECK(l.error().message.find(std::to_string(port)) != std::string::npos);
  CHECK_FALSE(CheckPortFree("127.0.0.1", port).has_value());
  ::close(fd);
  loop.Stop();  // the failed listener's handle is closed by then
}

TEST_CASE("a loop stopped with a listener still open closes it cleanly") {
  EventLoop loop("shard0");
  loop.Start();
  auto l = OnLoop(loop, [&] { return Listener::Start(loop, Loopback(0), Ignore); });
  REQUIRE(l.has_value());
  l->reset();  // the owner lets go; the listener keeps itself alive until closed
  loop.Stop();
}
