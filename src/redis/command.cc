#include "redis/command.h"

#include <charconv>
#include <cstring>

#include "core/parse_int.h"

namespace rankd {

namespace {
void AppendDecimal(std::string& out, int64_t v) {
  char tmp[24];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof tmp, v);
  out.append(tmp, end);
}
}  // namespace

RedisCommand& RedisCommand::Arg(std::string_view a) {
  buf_ += '$';
  AppendDecimal(buf_, static_cast<int64_t>(a.size()));
  buf_ += "\r\n";
  buf_.append(a);
  buf_ += "\r\n";
  ++argc_;
  return *this;
}

RedisCommand& RedisCommand::Arg(int64_t v) {
  char tmp[24];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof tmp, v);
  return Arg(std::string_view(tmp, static_cast<size_t>(end - tmp)));
}

RedisCommand& RedisCommand::Key(std::string_view prefix, std::string_view suffix) {
  buf_ += '$';
  AppendDecimal(buf_, static_cast<int64_t>(prefix.size() + suffix.size()));
  buf_ += "\r\n";
  MarkKey(prefix.size() + suffix.size());
  buf_.append(prefix);
  buf_.append(suffix);
  buf_ += "\r\n";
  ++argc_;
  return *this;
}

RedisCommand& RedisCommand::Key(std::string_view prefix, std::string_view kind, int64_t id) {
  char tmp[24];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof tmp, id);
  size_t id_len = static_cast<size_t>(end - tmp);
  buf_ += '$';
  AppendDecimal(buf_, static_cast<int64_t>(prefix.size() + kind.size() + id_len));
  buf_ += "\r\n";
  MarkKey(prefix.size() + kind.size() + id_len);
  buf_.append(prefix);
  buf_.append(kind);
  buf_.append(tmp, id_len);
  buf_ += "\r\n";
  ++argc_;
  return *this;
}

std::string_view RedisCommand::wire() {
  char head[kHeaderRoom];
  size_t n = 0;
  head[n++] = '*';
  auto [end, ec] = std::to_chars(head + n, head + sizeof head, argc_);
  n = static_cast<size_t>(end - head);
  head[n++] = '\r';
  head[n++] = '\n';
  header_start_ = kHeaderRoom - n;
  std::memcpy(buf_.data() + header_start_, head, n);
  return std::string_view(buf_).substr(header_start_);
}

std::string_view RedisCommand::Argument(int i) const {
  size_t pos = kHeaderRoom;
  for (int k = 0; k < argc_ && pos < buf_.size(); ++k) {
    // "$<len>\r\n<bytes>\r\n"
    size_t crlf = buf_.find("\r\n", pos);
    // Our own header, written by Arg: always a valid length.
    size_t len =
        ParseStrictInt<size_t>(std::string_view(buf_).substr(pos + 1, crlf - pos - 1)).value_or(0);
    size_t start = crlf + 2;
    if (k == i) return std::string_view(buf_).substr(start, len);
    pos = start + len + 2;
  }
  return {};
}

std::string RedisCommand::Describe() const {
  std::string out(Argument(0));
  if (argc_ > 1) {
    out += ' ';
    out += Argument(1);
  }
  return out;
}

}  // namespace rankd
