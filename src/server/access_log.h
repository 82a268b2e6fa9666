// AccessLog: the --access-log lines of every shard, written to stdout by one writer
// thread, so that a shard loop never blocks in write(). Each shard pushes into its own
// SpscRing (no lock shared by shards); a line that does not fit is dropped and counted
// by the shard (rankd_access_log_dropped_total) rather than stalling the loop.
//
// Threads: constructed and destroyed on the main thread (the destructor writes what is
// left, then joins the writer); ring(i) is the producer side of shard i's loop thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/spsc_ring.h"

namespace rankd {

class AccessLog {
 public:
  // One ring of `ring_bytes` (a power of two) per shard, drained into `fd`.
  AccessLog(int shards, int fd, size_t ring_bytes = size_t{1} << 20);
  ~AccessLog();  // drains every ring, then stops the writer
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  SpscRing& ring(int shard) { return *rings_[static_cast<size_t>(shard)]; }

 private:
  void WriterMain();
  bool DrainOnce();  // writes what every ring holds; false if all were empty

  int fd_;
  std::vector<std::unique_ptr<SpscRing>> rings_;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

}  // namespace rankd
