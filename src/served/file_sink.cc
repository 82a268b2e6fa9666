#include "served/file_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"

namespace rankd {

FileSink::FileSink(const SinkConfig& config)
    : name_(config.name),
      path_(config.path),
      max_bytes_(config.max_bytes),
      keep_(config.keep),
      writer_([this] { Run(); }) {}

FileSink::~FileSink() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  writer_.join();
  if (fd_ >= 0) ::close(fd_);
}

void FileSink::Submit(std::string lines, Done done) {
  {
    std::lock_guard lk(mu_);
    if (!stopping_) {
      queue_.push_back({std::move(lines), std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done(false);
}

void FileSink::Run() {
  pthread_setname_np(pthread_self(), "served-log");
  for (;;) {
    Batch b;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything submitted is written
      b = std::move(queue_.front());
      queue_.pop_front();
    }
    bool ok = Write(b.lines);
    b.done(ok);
  }
}

bool FileSink::StillOurs() {
  struct stat open {
  }, at{};
  // lstat: a symlink put in the file's place is not our file (Open then refuses it).
  if (::fstat(fd_, &open) != 0 || ::lstat(path_.c_str(), &at) != 0) return false;
  return open.st_ino == at.st_ino && open.st_dev == at.st_dev;
}

bool FileSink::Open() {
  // 0640: records hold user ids and what they were served, for rankd's user and the log
  // shipper's group only. O_NOFOLLOW: a symlink planted at the path (by whoever can
  // write the folder) must not make rankd append to a file of its choosing.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd_ < 0) return false;
  struct stat st {};
  size_ = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return true;
}

void FileSink::Rotate() {
  ::close(fd_);
  fd_ = -1;
  if (keep_ == 0) {
    ::unlink(path_.c_str());
    return;
  }
  for (uint32_t i = keep_; i > 1; --i) {
    std::string from = path_ + "." + std::to_string(i - 1);
    std::string to = path_ + "." + std::to_string(i);
    ::rename(from.c_str(), to.c_str());  // a missing one is fine
  }
  ::rename(path_.c_str(), (path_ + ".1").c_str());
}

bool FileSink::Write(const std::string& lines) {
  auto fail = [&](const char* what) {
    std::string why = std::string(what) + " " + path_ + ": " + std::strerror(errno);
    if (why != last_error_) LogWarn("served log '" + name_ + "': " + why + " (records dropped)");
    last_error_ = std::move(why);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return false;
  };
  if (fd_ >= 0 && !StillOurs()) {  // moved or deleted under us: start a new file
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0 && !Open()) return fail("cannot open");
  if (size_ > 0 && size_ + lines.size() > max_bytes_) {
    Rotate();
    if (!Open()) return fail("cannot open");
  }
  std::string_view rest = lines;
  if (torn_) {
    if (::write(fd_, "\n", 1) != 1) return fail("cannot write");
    ++size_;
    torn_ = false;
  }
  while (!rest.empty()) {
    ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      torn_ = rest.size() != lines.size();
      return fail("cannot write");
    }
    size_ += static_cast<uint64_t>(n);
    rest.remove_prefix(static_cast<size_t>(n));
  }
  if (!last_error_.empty()) LogInfo("served log '" + name_ + "': writing " + path_ + " again");
  last_error_.clear();
  return true;
}

}  // namespace rankd
