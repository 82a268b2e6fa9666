// RedisCommands: a batch's commands encoded once, in RESP (the wire format), into one
// buffer, argument by argument: key prefixes, ids and counts are formatted in place.
//
// Why: a feed request sends hundreds of commands. One std::string per command (and a
// callback per command) was a malloc and a free per command; here a batch is
// one buffer the connection writes as it is, and each command's place in it (its start
// and its key's bytes, for cluster routing) is a few integers.
//
//   RedisCommands cmds;
//   cmds.Add(4).Arg("LRANGE").Key(prefix, "follow:", id).Arg(int64_t{0}).Arg(n - 1);
//
// Add(argc) starts a command and writes its "*argc" header at once, so every command's
// argument count is known up front; exactly argc Arg / Key calls must follow (checked
// in debug builds).
//
// Buffers are recycled through a per-thread free list (core/free_list.h): a steady state
// of batches does not allocate for its commands.
//
// Threads: a plain value type; one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/block_pool.h"
#include "core/free_list.h"
#include "core/key_template.h"
#include "redis/command.h"

namespace rankd {

class RedisCommands {
 public:
  // Starts the next command, of `argc` arguments.
  RedisCommands& Add(int argc);
  RedisCommands& Arg(std::string_view a);
  RedisCommands& Arg(int64_t v);
  // One argument per value, in order (SMISMEMBER's ids): one buffer extension for all.
  RedisCommands& Args(std::span<const int64_t> values);
  // `prefix` + `suffix` as one argument: a key under an endpoint's prefix. The first
  // Key() of a command is its key (what a cluster routes by).
  RedisCommands& Key(std::string_view prefix, std::string_view suffix);
  RedisCommands& Key(std::string_view prefix, std::string_view kind, int64_t id);
  // A key of a template: prefix + t.before + id + t.after (an i64 id as decimal text).
  RedisCommands& Key(std::string_view prefix, KeyTemplate t, int64_t id);
  RedisCommands& Key(std::string_view prefix, KeyTemplate t, std::string_view id);
  // One argument per string (SMISMEMBER's str ids).
  RedisCommands& Args(std::span<const std::string_view> values);

  // The same command for many keys (HMGET <key> f1 f2 f3 for each item of a batch): the
  // bytes around the key are encoded once, into a Shape, and each Keyed() writes one
  // command in one step. `after`: the arguments that follow the key.
  struct Shape {
    PoolString head;  // "*<argc>" and the command's name
    PoolString tail;  // the arguments after the key
  };
  static Shape MakeShape(std::string_view name, std::span<const std::string> after);
  // One command of `shape` for the key prefix + kind + id (its key, as Key()).
  RedisCommands& Keyed(const Shape& shape, std::string_view prefix, std::string_view kind,
                       int64_t id);
  // The same for the key prefix + t.before + id + t.after.
  RedisCommands& Keyed(const Shape& shape, std::string_view prefix, KeyTemplate t, int64_t id);
  RedisCommands& Keyed(const Shape& shape, std::string_view prefix, KeyTemplate t,
                       std::string_view id);

  // A command built on its own (tests, tools, fixed commands): its bytes copied.
  RedisCommands& Append(RedisCommand& command);
  // Command i of `other`, its bytes copied (a cluster node's share of a batch).
  RedisCommands& Append(const RedisCommands& other, size_t i);
  static RedisCommands From(std::vector<RedisCommand>& commands);

  void Reserve(size_t commands, size_t bytes) {
    cmds_->reserve(commands);
    buf_->reserve(bytes);
  }

  size_t size() const { return cmds_->size(); }
  bool empty() const { return cmds_->empty(); }
  // Every command's bytes, in order: what the connection writes.
  std::string_view wire() const { return *buf_; }
  // Command i's bytes.
  std::string_view wire(size_t i) const {
    return std::string_view(*buf_).substr((*cmds_)[i].start, End(i) - (*cmds_)[i].start);
  }
  // Command i's key: its first Key(), else its argument 1. Constant time for Key().
  std::string_view key(size_t i) const {
    const Cmd& c = (*cmds_)[i];
    return c.key_len != 0 ? std::string_view(*buf_).substr(c.key_at, c.key_len) : Argument(i, 1);
  }
  // Argument k of command i (0: the command's name); "" when out of range. Linear in
  // the command's size.
  std::string_view Argument(size_t i, int k) const;
  // "LRANGE follow:1": command i's name and first argument, for error messages.
  std::string Describe(size_t i) const;

 private:
  struct Cmd {
    size_t start;       // of its "*argc" header in buf_
    size_t key_at = 0;  // its first Key()'s bytes in buf_
    uint32_t key_len = 0;
    int32_t args_left = 0;  // Arg / Key calls still due (debug check)
  };
  size_t End(size_t i) const {
    return i + 1 < cmds_->size() ? (*cmds_)[i + 1].start : buf_->size();
  }
  // Appends at most `max` bytes, written by write(char* at) -> end.
  template <class Write>
  void Extend(size_t max, Write write);
  // One key argument: the concatenation a + b + c.
  RedisCommands& JoinedKey(std::string_view a, std::string_view b, std::string_view c,
                           std::string_view d = {});
  RedisCommands& KeyedText(const Shape& shape, std::string_view prefix, KeyTemplate t,
                           std::string_view id);
  void Counted(int n = 1);  // n arguments of the current command written

  // The buffers come from this thread's free list (core/free_list.h) and go back to it; a
  // string's own small buffer is not worth keeping, nor a block over these caps.
  Recycled<std::string, 1u << 20, 64> buf_;
  Recycled<std::vector<Cmd>, 16u << 10> cmds_;
};

}  // namespace rankd
