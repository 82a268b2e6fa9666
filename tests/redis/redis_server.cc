#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

extern char** environ;

namespace rankd::testing {

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

RedisServer::RedisServer(std::vector<std::string> extra_args, int port)
    : extra_(std::move(extra_args)), port_(port != 0 ? port : FreeLoopbackPort()) {
  char tmpl[] = "/tmp/rankd-redis-test-XXXXXX";
  if (char* d = mkdtemp(tmpl)) dir_ = d;
}

RedisServer::~RedisServer() {
  Stop();
  if (!dir_.empty()) rmdir(dir_.c_str());
}

bool RedisServer::Start() {
  if (pid_ > 0) return true;
  std::vector<std::string> args = {"redis-server",
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--enable-debug-command",
                                   "yes",
                                   "--daemonize",
                                   "no",
                                   "--dir",
                                   dir_.empty() ? "/tmp" : dir_,
                                   "--logfile",
                                   ""};
  args.insert(args.end(), extra_.begin(), extra_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, "redis-server", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    std::fprintf(stderr, "RedisServer: cannot spawn redis-server: %d\n", rc);
    return false;
  }
  pid_ = pid;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      std::fprintf(stderr, "RedisServer: redis-server on port %d exited at start\n", port_);
      pid_ = -1;
      return false;
    }
    timeval tv{0, 200000};
    if (redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv)) {
      bool up = false;
      if (!c->err) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
        // Any reply (even NOAUTH) means the server is accepting commands.
        up = r != nullptr;
        if (r) freeReplyObject(r);
      }
      redisFree(c);
      if (up) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "RedisServer: redis-server on port %d did not answer\n", port_);
  Kill();
  return false;
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

RedisReply RedisServer::Command(const std::vector<std::string>& args,
                                const std::string& password) const {
  timeval tv{5, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (c == nullptr || c->err) {
    RedisReply e = RedisReply::Error(std::string("connect: ") + (c ? c->errstr : "oom"));
    if (c) redisFree(c);
    return e;
  }
  if (!password.empty()) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password.c_str()));
    if (r) freeReplyObject(r);
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  RedisReply out =
      r ? RedisReply::FromHiredis(r) : RedisReply::Error(std::string("io: ") + c->errstr);
  if (r) freeReplyObject(r);
  redisFree(c);
  return out;
}

}  // namespace rankd::testing
