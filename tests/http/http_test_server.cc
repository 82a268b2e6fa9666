// http_test_server: one EventLoop and one http::Listener with test handlers, for the
// socket tests in test_http_sockets.py. Prints "listening PORT" when ready; SIGTERM or
// SIGINT drains (prints "drained", exits 0), with a hard close after --drain-timeout-ms.
//
//   /echo          200 with the request body (and its Content-Type)
//   /info          what the layer parsed: method, path, keep_alive, request_id, ...
//   /sleep?ms=N    answers after N ms, from a timer (out-of-order completion)
//   /big?kb=N      N KiB body (backpressure)
//   /stats         the listener's counters, and how many /sleep requests wait
//   /drop          drops its Responder unanswered (the layer answers 500)
//   /spin?us=N     busy for N µs on the loop thread, then 200 (a CPU-heavy handler)
#include <signal.h>

#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "api/errors.h"
#include "core/event_loop.h"
#include "core/json_escape.h"
#include "core/main_signals.h"
#include "http/listener.h"
#include "http/response_writer.h"

using namespace rankd;
using namespace rankd::http;

namespace {

uint64_t QueryNumber(std::string_view query, std::string_view key, uint64_t fallback) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    std::string_view part = query.substr(pos, amp == std::string_view::npos ? amp : amp - pos);
    if (part.size() > key.size() && part.starts_with(key) && part[key.size()] == '=') {
      uint64_t v = fallback;
      auto digits = part.substr(key.size() + 1);
      std::from_chars(digits.data(), digits.data() + digits.size(), v);
      return v;
    }
    if (amp == std::string_view::npos) break;
    pos = amp + 1;
  }
  return fallback;
}

struct Sleeper {
  Responder responder;
  uint64_t ms = 0;
  uv_timer_t* timer = nullptr;
};

struct TestServer {
  EventLoop loop{"http-test"};
  std::shared_ptr<Listener> listener;
  std::list<Sleeper> sleepers;  // loop thread only
  uint64_t big_served = 0;

  void Handle(Request req, Responder res) {
    std::string_view path = req.path();
    if (path == "/echo") {
      std::string_view ct = req.content_type();
      res.Send(Response{200, req.body, ct.empty() ? "application/octet-stream" : ct, {}});
    } else if (path == "/info") {
      std::string body = "{\"method\":";
      AppendJsonString(req.method, body);
      body += ",\"path\":";
      AppendJsonString(path, body);
      body += ",\"query\":";
      AppendJsonString(req.query(), body);
      body += ",\"request_id\":";
      AppendJsonString(req.request_id, body);
      body += ",\"content_type\":";
      AppendJsonString(req.content_type(), body);
      body += ",\"connection\":";
      AppendJsonString(req.header("connection"), body);
      body += ",\"keep_alive\":";
      body += req.keep_alive ? "true" : "false";
      body += ",\"http\":\"" + std::to_string(req.http_major) + "." +
              std::to_string(req.http_minor) +
              "\",\"body_len\":" + std::to_string(req.body.size()) +
              ",\"headers\":" + std::to_string(req.headers.size()) + "}";
      res.Send(Response{200, body, "application/json", {}});
    } else if (path == "/sleep") {
      auto& s = sleepers.emplace_back();
      s.responder = std::move(res);
      s.ms = QueryNumber(req.query(), "ms", 100);
      s.timer = loop.AcquireTimer();
      auto it = std::prev(sleepers.end());
      // The list node's address is stable; the timer's data points at the iterator's node.
      s.timer->data = new std::pair<TestServer*, std::list<Sleeper>::iterator>(this, it);
      uv_timer_start(s.timer, &TestServer::OnSleepDone, s.ms, 0);
    } else if (path == "/big") {
      ++big_served;
      std::string body(QueryNumber(req.query(), "kb", 1024) * 1024, 'x');
      res.Send(Response{200, body, "application/octet-stream", {}});
    } else if (path == "/stats") {
      const HttpCounters& c = listener->counters();
      std::string body = "{\"requests\":" + std::to_string(c.requests) +
                         ",\"responses\":" + std::to_string(c.responses) +
                         ",\"open\":" + std::to_string(c.connections_open) +
                         ",\"accepted\":" + std::to_string(c.connections_accepted) +
                         ",\"accept_paused\":" + std::to_string(c.accept_paused) +
                         ",\"idle_timeouts\":" + std::to_string(c.idle_timeouts) +
                         ",\"parked_reads\":" + std::to_string(c.parked_reads) +
                         ",\"bytes_read\":" + std::to_string(c.bytes_read) +
                         ",\"bytes_written\":" + std::to_string(c.bytes_written) +
                         ",\"big_served\":" + std::to_string(big_served) +
                         ",\"sleeping\":" + std::to_string(sleepers.size()) + ",\"rejects\":{";
      for (size_t k = 0; k < static_cast<size_t>(RejectKind::kCount); ++k) {
        if (k) body += ",";
        body += "\"" + std::string(RejectKindName(static_cast<RejectKind>(k))) +
                "\":" + std::to_string(c.rejects[k]);
      }
      body += "}}";
      res.Send(Response{200, body, "application/json", {}});
    } else if (path == "/spin") {
      uint64_t until = uv_hrtime() + QueryNumber(req.query(), "us", 100) * 1000;
      while (uv_hrtime() < until) {
      }
      res.Send(Response{200, "spun", "text/plain", {}});
    } else if (path == "/drop") {
      // Responder destroyed unanswered.
    } else {
      res.SendError(Error::NotFound("no route for " + std::string(path)));
    }
  }

  static void OnSleepDone(uv_timer_t* t) {
    auto* data = static_cast<std::pair<TestServer*, std::list<Sleeper>::iterator>*>(t->data);
    TestServer* self = data->first;
    auto it = data->second;
    delete data;
    self->loop.ReleaseTimer(t);
    std::string body = "{\"slept_ms\":" + std::to_string(it->ms) + "}";
    // A no-op when the client went away meanwhile.
    it->responder.Send(Response{200, body, "application/json", {}});
    self->sleepers.erase(it);
  }

  void DropSleepers() {  // loop thread, at shutdown: timers are closed by the loop
    for (auto& s : sleepers) {
      delete static_cast<std::pair<TestServer*, std::list<Sleeper>::iterator>*>(s.timer->data);
      s.timer->data = nullptr;
      loop.ReleaseTimer(s.timer);
    }
    sleepers.clear();
  }
};

bool ArgValue(int argc, char** argv, const char* name, uint64_t* out) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) {
      *out = std::strtoull(argv[i + 1], nullptr, 10);
      return true;
    }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  HttpOptions opt;
  opt.host = "127.0.0.1";
  uint64_t v = 0;
  if (!ArgValue(argc, argv, "--port", &v)) {
    std::fprintf(stderr,
                 "usage: %s --port N [--max-connections N] [--read-timeout-ms N] "
                 "[--idle-timeout-ms N] [--max-body-bytes N] [--linger-ms N] "
                 "[--max-pending-output N] [--drain-timeout-ms N] "
                 "[--turn-budget-us N]\n",
                 argv[0]);
    return 2;
  }
  opt.port = static_cast<int>(v);
  if (ArgValue(argc, argv, "--max-connections", &v)) opt.max_connections = v;
  if (ArgValue(argc, argv, "--read-timeout-ms", &v)) opt.read_timeout_ms = v;
  if (ArgValue(argc, argv, "--idle-timeout-ms", &v)) opt.idle_timeout_ms = v;
  if (ArgValue(argc, argv, "--max-body-bytes", &v)) opt.max_body_bytes = v;
  if (ArgValue(argc, argv, "--linger-ms", &v)) opt.linger_ms = v;
  if (ArgValue(argc, argv, "--max-pending-output", &v)) opt.max_pending_output = v;
  uint64_t turn_budget_us = EventLoop::kDefaultTurnBudgetUs;
  ArgValue(argc, argv, "--turn-budget-us", &turn_budget_us);
  uint64_t drain_timeout_ms = 5000;
  ArgValue(argc, argv, "--drain-timeout-ms", &drain_timeout_ms);

  if (auto free = CheckPortFree(opt.host, opt.port); !free) {
    std::fprintf(stderr, "%s\n", free.error().message.c_str());
    return 1;
  }

  // Signals are taken by sigwait on this thread; the loop thread inherits the mask.
  sigset_t set = TakeSignalsOnMainThread({SIGTERM, SIGINT});

  auto server = std::make_unique<TestServer>();
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;  // 1 ok, -1 failed
  bool drained = false;

  server->loop.Start();
  server->loop.Post([&] {
    TestServer* s = server.get();
    s->loop.set_turn_budget_us(turn_budget_us);
    s->loop.AddShutdownHook([s] { s->DropSleepers(); });
    auto l = Listener::Start(
        s->loop, opt,
        [s](Request req, Responder res) { s->Handle(std::move(req), std::move(res)); },
        RenderError);
    std::lock_guard lk(mu);
    if (!l) {
      std::fprintf(stderr, "%s\n", l.error().message.c_str());
      started = -1;
    } else {
      s->listener = *l;
      std::printf("listening %d\n", s->listener->port());
      std::fflush(stdout);
      started = 1;
    }
    cv.notify_all();
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return started != 0; });
  }
  if (started < 0) return 1;

  int sig = 0;
  sigwait(&set, &sig);
  server->loop.Post([&] {
    TestServer* s = server.get();
    uv_timer_t* hard = s->loop.AcquireTimer();
    hard->data = s;
    s->listener->Drain([&, s, hard] {
      s->loop.ReleaseTimer(hard);
      std::lock_guard lk(mu);
      drained = true;
      cv.notify_all();
    });
    // The drain timeout: whatever is still open is closed hard (drained fires then).
    uv_timer_start(
        hard, [](uv_timer_t* t) { static_cast<TestServer*>(t->data)->listener->CloseNow(); },
        drain_timeout_ms, 0);
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return drained; });
  }
  std::printf("drained\n");
  std::fflush(stdout);
  server->loop.Stop();
  return 0;
}
