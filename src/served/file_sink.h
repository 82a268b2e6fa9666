// FileSink: a file:// served-log sink — JSON lines appended to one file by one writer
// thread, rotated by size: when a batch would take the file past max_bytes, the file
// becomes path.1 (path.1 becomes path.2, ... path.keep is deleted) and a new one starts.
// Shards hand it whole batches of lines, so lines never interleave. A failed write (a
// full disk, a removed folder) fails its batch; the next batch opens the file again, and
// one that was moved or deleted under it (an outside logrotate) is noticed by inode and
// reopened. A line left torn by a failed write is ended before the next batch.
//
// Threads: Submit from any thread (the shard loops); `done` runs on the writer thread.
// Constructed and destroyed on the main thread; the destructor writes what was submitted
// before it, then joins the writer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "served/sink_config.h"

namespace rankd {

class FileSink {
 public:
  explicit FileSink(const SinkConfig& config);
  ~FileSink();
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // `written` is false when the batch could not be written (its lines are lost).
  using Done = std::function<void(bool written)>;
  // Queues `lines` (whole lines, each ending in '\n'); `done` is called once it has been
  // written or has failed. After the destructor began: `done(false)` at once.
  void Submit(std::string lines, Done done);

 private:
  void Run();
  bool Write(const std::string& lines);  // writer thread
  bool Open();                           // writer thread
  void Rotate();                         // writer thread
  bool StillOurs();                      // the open file is still at path_

  struct Batch {
    std::string lines;
    Done done;
  };
  const std::string name_;
  const std::string path_;
  const uint64_t max_bytes_;
  const uint32_t keep_;
  std::mutex mu_;  // guards queue_ and stopping_
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stopping_ = false;
  // Writer thread only.
  int fd_ = -1;
  uint64_t size_ = 0;  // bytes in the open file
  bool torn_ = false;  // a failed write may have left a partial line
  std::string last_error_;
  std::thread writer_;  // last: starts once everything above is set
};

}  // namespace rankd
