// RedisCommand: one command already encoded in RESP (the wire format), built argument
// by argument, in a buffer of its own: for the tracker, the pools' own commands, tests
// and tools (RedisCommands::Append copies one into a batch). The request path encodes
// a whole batch into one buffer instead (command_batch.h): no allocation per command.
//
// Threads: a plain value type; any thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace rankd {

class RedisCommand {
 public:
  RedisCommand() {
    buf_.reserve(64);  // most commands fit: one allocation
    buf_.assign(kHeaderRoom, ' ');
  }
  RedisCommand(std::initializer_list<std::string_view> args) : RedisCommand() {
    for (auto a : args) Arg(a);
  }

  RedisCommand& Arg(std::string_view a);
  RedisCommand& Arg(int64_t v);
  // Appends `prefix` and `suffix` as one argument (a key under an endpoint's prefix).
  RedisCommand& Key(std::string_view prefix, std::string_view suffix);
  RedisCommand& Key(std::string_view prefix, std::string_view kind, int64_t id);

  int argc() const { return argc_; }
  // The argument the first Key() call appended (what a cluster routes by), else
  // Argument(1). Constant time when Key() made it.
  std::string_view key() const {
    return key_len_ != 0 ? std::string_view(buf_).substr(key_at_, key_len_) : Argument(1);
  }
  // The RESP bytes of the whole command. Valid until the next Arg().
  std::string_view wire();

  // The i-th argument (decoded), e.g. Argument(1) is the key of most commands; "" when
  // out of range. Linear in the command size: for error messages only.
  std::string_view Argument(int i) const;
  // "LRANGE follow:1" — the command name and its first argument, for error messages.
  std::string Describe() const;

 private:
  // Room reserved at the front for the "*<argc>\r\n" header, written right-aligned by
  // wire(): an argc of up to 10 digits fits, so the body is never moved.
  static constexpr size_t kHeaderRoom = 14;

  // Records where the key that Key() is about to append starts, the first time.
  void MarkKey(size_t len) {
    if (key_len_ != 0) return;
    key_at_ = static_cast<uint32_t>(buf_.size());
    key_len_ = static_cast<uint32_t>(len);
  }

  std::string buf_;
  uint32_t key_at_ = 0;   // first Key()'s bytes in buf_
  uint32_t key_len_ = 0;  // 0: no Key() call
  int argc_ = 0;
  size_t header_start_ = kHeaderRoom;
};

}  // namespace rankd
