#include "redis/command_batch.h"

#include <cassert>
#include <charconv>
#include <cstring>
#include <utility>

#include "core/free_list.h"
#include "core/parse_int.h"

namespace rankd {

namespace {

// "<type><n>\r\n" at p; returns its end. kMaxHeader bytes at most.
constexpr size_t kMaxHeader = 24;
char* PutHeader(char* p, char type, size_t n) {
  *p++ = type;
  if (n < 10) {
    *p++ = static_cast<char>('0' + n);  // most argument lengths and counts
  } else {
    p = std::to_chars(p, p + 20, n).ptr;
  }
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

char* Put(char* p, std::string_view s) {
  if (!s.empty()) std::memcpy(p, s.data(), s.size());  // an empty view's data() may be null
  return p + s.size();
}

char* PutCrlf(char* p) {
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

// One bulk argument "$<len>\r\n<bytes>\r\n" at p; returns its end. kMaxHeader +
// s.size() + 2 bytes at most.
char* PutBulk(char* p, std::string_view s) { return PutCrlf(Put(PutHeader(p, '$', s.size()), s)); }

// v's decimal digits, written into `buf`.
std::string_view Digits(int64_t v, char (&buf)[20]) {
  return {buf, static_cast<size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf)};
}

// One integer argument "$<len>\r\n<digits>\r\n" at p; returns its end. The digits are
// copied as a fixed 20 bytes (inline moves, not a libc call per argument: SMISMEMBER
// formats hundreds), so p needs kMaxBulkInt bytes of room, not just what it writes.
constexpr size_t kMaxBulkInt = 5 + 20 + 2;
char* PutBulkInt(char* p, int64_t v) {
  char buf[20];
  const std::string_view digits = Digits(v, buf);
  p = PutHeader(p, '$', digits.size());
  std::memcpy(p, buf, sizeof buf);
  return PutCrlf(p + digits.size());
}

}  // namespace

// Each piece is written straight into the buffer after one capacity check
// (resize_and_overwrite), not appended piece by piece: encoding is per command on
// batches of hundreds.
template <class Write>
void RedisCommands::Extend(size_t max, Write write) {
  const size_t old = buf_->size();
  buf_->resize_and_overwrite(
      old + max, [&](char* p, size_t) { return static_cast<size_t>(write(p + old) - p); });
}

void RedisCommands::Counted(int n) {
  assert(!cmds_->empty() && cmds_->back().args_left >= n);
  cmds_->back().args_left -= n;
}

RedisCommands& RedisCommands::Add(int argc) {
  assert(cmds_->empty() || cmds_->back().args_left == 0);
  cmds_->push_back({buf_->size(), 0, 0, argc});
  Extend(kMaxHeader, [&](char* p) { return PutHeader(p, '*', static_cast<size_t>(argc)); });
  return *this;
}

RedisCommands& RedisCommands::Arg(std::string_view a) {
  Counted();
  Extend(kMaxHeader + a.size() + 2, [&](char* p) { return PutBulk(p, a); });
  return *this;
}

RedisCommands& RedisCommands::Arg(int64_t v) {
  char buf[20];
  return Arg(Digits(v, buf));
}

RedisCommands& RedisCommands::Args(std::span<const int64_t> values) {
  Counted(static_cast<int>(values.size()));
  Extend(values.size() * kMaxBulkInt, [&](char* p) {
    for (const int64_t v : values) p = PutBulkInt(p, v);
    return p;
  });
  return *this;
}

RedisCommands& RedisCommands::Key(std::string_view prefix, std::string_view suffix) {
  return JoinedKey(prefix, suffix, {});
}

RedisCommands& RedisCommands::Key(std::string_view prefix, std::string_view kind, int64_t id) {
  char buf[20];
  return JoinedKey(prefix, kind, Digits(id, buf));
}

RedisCommands& RedisCommands::Key(std::string_view prefix, KeyTemplate t, int64_t id) {
  char buf[20];
  return JoinedKey(prefix, t.before, Digits(id, buf), t.after);
}

RedisCommands& RedisCommands::Key(std::string_view prefix, KeyTemplate t, std::string_view id) {
  return JoinedKey(prefix, t.before, id, t.after);
}

RedisCommands& RedisCommands::Args(std::span<const std::string_view> values) {
  Counted(static_cast<int>(values.size()));
  size_t max = 0;
  for (std::string_view v : values) max += kMaxHeader + v.size() + 2;
  Extend(max, [&](char* p) {
    for (std::string_view v : values) p = PutBulk(p, v);
    return p;
  });
  return *this;
}

RedisCommands& RedisCommands::JoinedKey(std::string_view a, std::string_view b, std::string_view c,
                                        std::string_view d) {
  Counted();
  const size_t len = a.size() + b.size() + c.size() + d.size();
  char header[kMaxHeader];
  const std::string_view h(header, static_cast<size_t>(PutHeader(header, '$', len) - header));
  if (Cmd& cmd = cmds_->back(); cmd.key_len == 0) {
    cmd.key_at = buf_->size() + h.size();
    cmd.key_len = static_cast<uint32_t>(len);
  }
  Extend(h.size() + len + 2,
         [&](char* p) { return PutCrlf(Put(Put(Put(Put(Put(p, h), a), b), c), d)); });
  return *this;
}

RedisCommands::Shape RedisCommands::MakeShape(std::string_view name,
                                              std::span<const std::string> after) {
  // Encoded as a command of its own with the key left out (Keyed writes it in between).
  RedisCommands one;
  one.Add(static_cast<int>(2 + after.size())).Arg(name);
  Shape s;
  s.head.assign(one.wire());
  for (const std::string& a : after) one.Arg(a);
  s.tail.assign(one.wire().substr(s.head.size()));
  return s;
}

RedisCommands& RedisCommands::Keyed(const Shape& shape, std::string_view prefix,
                                    std::string_view kind, int64_t id) {
  char buf[20];
  return KeyedText(shape, prefix, {kind, {}}, Digits(id, buf));
}

RedisCommands& RedisCommands::Keyed(const Shape& shape, std::string_view prefix, KeyTemplate t,
                                    int64_t id) {
  char buf[20];
  return KeyedText(shape, prefix, t, Digits(id, buf));
}

RedisCommands& RedisCommands::Keyed(const Shape& shape, std::string_view prefix, KeyTemplate t,
                                    std::string_view id) {
  return KeyedText(shape, prefix, t, id);
}

RedisCommands& RedisCommands::KeyedText(const Shape& shape, std::string_view prefix, KeyTemplate t,
                                        std::string_view num) {
  const size_t len = prefix.size() + t.before.size() + num.size() + t.after.size();
  Cmd& cmd = cmds_->emplace_back();
  cmd.start = buf_->size();
  cmd.args_left = 0;
  Extend(shape.head.size() + kMaxHeader + len + 2 + shape.tail.size(), [&](char* p) {
    char* const at = p;
    p = PutHeader(Put(p, shape.head), '$', len);
    cmd.key_at = cmd.start + static_cast<size_t>(p - at);
    cmd.key_len = static_cast<uint32_t>(len);
    return Put(PutCrlf(Put(Put(Put(Put(p, prefix), t.before), num), t.after)), shape.tail);
  });
  return *this;
}

RedisCommands& RedisCommands::Append(RedisCommand& command) {
  const std::string_view wire = command.wire();
  const std::string_view key = command.key();
  Cmd c{buf_->size(), 0, 0, 0};
  if (key.data() >= wire.data() && key.data() < wire.data() + wire.size()) {
    c.key_at = buf_->size() + static_cast<size_t>(key.data() - wire.data());
    c.key_len = static_cast<uint32_t>(key.size());
  }
  cmds_->push_back(c);
  buf_->append(wire);
  return *this;
}

RedisCommands& RedisCommands::Append(const RedisCommands& other, size_t i) {
  const Cmd& o = (*other.cmds_)[i];
  // Filled in place, field by field: built on the stack and copied, its 4-byte fields
  // were read back as 8 bytes (a store-forwarding stall per command a cluster routes).
  Cmd& c = cmds_->emplace_back();
  c.start = buf_->size();
  c.key_at = o.key_len != 0 ? buf_->size() + (o.key_at - o.start) : 0;
  c.key_len = o.key_len;
  c.args_left = 0;
  buf_->append(other.wire(i));
  return *this;
}

RedisCommands RedisCommands::From(std::vector<RedisCommand>& commands) {
  RedisCommands out;
  out.cmds_->reserve(commands.size());
  for (RedisCommand& c : commands) out.Append(c);
  return out;
}

std::string_view RedisCommands::Argument(size_t i, int k) const {
  const std::string_view w = wire(i);
  // "*<argc>\r\n" then "$<len>\r\n<bytes>\r\n" per argument: our own encoding.
  size_t pos = w.find("\r\n");
  const int argc = ParseStrictInt<int>(w.substr(1, pos - 1)).value_or(0);
  pos += 2;
  for (int a = 0; a < argc && pos < w.size(); ++a) {
    const size_t crlf = w.find("\r\n", pos);
    const size_t len = ParseStrictInt<size_t>(w.substr(pos + 1, crlf - pos - 1)).value_or(0);
    const size_t start = crlf + 2;
    if (a == k) return w.substr(start, len);
    pos = start + len + 2;
  }
  return {};
}

std::string RedisCommands::Describe(size_t i) const {
  std::string out(Argument(i, 0));
  std::string_view first = Argument(i, 1);
  if (!first.empty()) {
    out += ' ';
    out += first;
  }
  return out;
}

}  // namespace rankd
