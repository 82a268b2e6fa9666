#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "redis/command.h"
#include "redis/resp_reader.h"

extern char** environ;

namespace rankd::testing {

namespace {

// Sends `wire` to 127.0.0.1:`port` on a new blocking connection and reads `replies`
// replies, each step within `timeout_ms`; unavailable when it cannot.
Result<RespReplies> Exchange(int port, std::string_view wire, size_t replies, int timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::unexpected(Error::Unavailable(std::strerror(errno)));
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // connect(2) too
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  auto fail = [fd](std::string what) {
    std::string why = what + ": " + std::strerror(errno);
    close(fd);
    return std::unexpected(Error::Unavailable(std::move(why)));
  };
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return fail("connect");
  for (size_t sent = 0; sent < wire.size();) {
    ssize_t n = send(fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return fail("io");
    sent += static_cast<size_t>(n);
  }
  RespReader reader;
  char buf[16384];
  while (reader.replies().size() < replies) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) errno = ECONNRESET;
    if (n <= 0) return fail("io");
    if (auto fed = reader.Feed(std::string_view(buf, static_cast<size_t>(n))); !fed) {
      close(fd);
      return std::unexpected(fed.error());
    }
  }
  close(fd);
  RespReplies out;
  for (size_t i = 0; i < replies; ++i) out.Append(reader.replies().raw(i));
  return out;
}

}  // namespace

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
    // Any reply (even NOAUTH) means the server is accepting commands.
    if (Exchange(port_, RedisCommand{"PING"}.wire(), 1, 200)) return true;
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

RespReplies RedisServer::Command(const std::vector<std::string>& args,
                                 const std::string& password) const {
  std::string wire;
  if (!password.empty()) wire += RedisCommand{"AUTH", password}.wire();
  RedisCommand cmd;
  for (const auto& a : args) cmd.Arg(a);
  wire += cmd.wire();
  const size_t replies = password.empty() ? 1 : 2;
  auto got = Exchange(port_, wire, replies, 5000);
  RespReplies out;
  if (got)
    out.Append(got->raw(replies - 1));
  else
    out.AppendError(got.error().message);
  return out;
}

}  // namespace rankd::testing
