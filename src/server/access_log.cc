#include "server/access_log.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace rankd {

namespace {

// The writer polls: a 2 ms sleep when every ring is empty costs nothing measurable and
// needs no wake-up from the loops (a futex or eventfd write per line would).
constexpr auto kIdleSleep = std::chrono::milliseconds(2);

// Writes both pieces in full (retrying partial writes); gives up on an error: there is
// nowhere to report a failing log, and the ring must keep moving.
void WriteAll(int fd, SpscRing::Pieces p) {
  iovec iov[2] = {{const_cast<char*>(p.first.data()), p.first.size()},
                  {const_cast<char*>(p.second.data()), p.second.size()}};
  int n = 2, i = 0;
  while (i < n) {
    ssize_t w = ::writev(fd, iov + i, n - i);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    auto left = static_cast<size_t>(w);
    while (i < n && left >= iov[i].iov_len) left -= iov[i++].iov_len;
    if (i < n) {
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
      iov[i].iov_len -= left;
    }
  }
}

}  // namespace

AccessLog::AccessLog(int shards, int fd, size_t ring_bytes) : fd_(fd) {
  for (int i = 0; i < shards; ++i) rings_.push_back(std::make_unique<SpscRing>(ring_bytes));
  writer_ = std::thread([this] { WriterMain(); });
}

AccessLog::~AccessLog() {
  stop_.store(true, std::memory_order_release);
  writer_.join();
}

bool AccessLog::DrainOnce() {
  bool any = false;
  for (auto& r : rings_) {
    SpscRing::Pieces p = r->Readable();
    if (p.size() == 0) continue;
    any = true;
    WriteAll(fd_, p);
    r->Release(p.size());
  }
  return any;
}

void AccessLog::WriterMain() {
  while (!stop_.load(std::memory_order_acquire))
    if (!DrainOnce()) std::this_thread::sleep_for(kIdleSleep);
  // The shards have stopped before the destructor runs: what is left is final.
  while (DrainOnce()) {
  }
}

}  // namespace rankd
