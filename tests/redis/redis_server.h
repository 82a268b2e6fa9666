// RedisServer: a real redis-server child process for tests, on a free loopback port,
// with no persistence and DEBUG enabled; stopped (SIGTERM) when destroyed. Kill() and
// Start() simulate a crash and a recovery on the same port.
//
// Threads: the test's own thread; not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "redis/resp_replies.h"

namespace rankd::testing {

// A loopback TCP port that was free a moment ago (bind to port 0, read it, close).
int FreeLoopbackPort();

class RedisServer {
 public:
  // Does not start the server; `extra_args` are appended to redis-server's arguments
  // (e.g. {"--requirepass", "s3cret"}). port 0 picks a free one.
  explicit RedisServer(std::vector<std::string> extra_args = {}, int port = 0);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts redis-server and waits (up to 10 s) until it answers PING. Returns false,
  // with a message on stderr, if it does not.
  bool Start();
  void Stop();  // SIGTERM, wait
  void Kill();  // SIGKILL, wait: a crash
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // "NAME=redis://127.0.0.1:PORT", for ParseRedisFlag.
  std::string flag(const std::string& name = "redis_default") const { return name + "=" + url(); }

  // Runs one command on a fresh blocking connection (fixtures and checks), with AUTH
  // `password` first when given; its reply is [0], read in place like rankd reads one
  // (resp_replies.h). A connection failure is returned as an error reply.
  RespReplies Command(const std::vector<std::string>& args, const std::string& password = "") const;

 private:
  std::vector<std::string> extra_;
  int port_;
  pid_t pid_ = -1;
  std::string dir_;
};

}  // namespace rankd::testing
