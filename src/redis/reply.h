// RedisReply: a reply as a tree of values (nil, integer, string, array, error, status),
// each owning its bytes. What hiredis's reader builds for the handshake and the
// tracker's push mode (reader.h), and a copy of a RespView (resp.h) for tests and
// callers off the request path; the request path reads replies in place instead.
//
// Threads: a plain value type; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct redisReply;

namespace rankd {

struct RedisReply {
  enum class Kind : uint8_t { kNil, kInteger, kString, kArray, kError, kStatus };

  Kind kind = Kind::kNil;
  int64_t integer = 0;               // kInteger
  std::string str;                   // kString, kError, kStatus
  std::vector<RedisReply> elements;  // kArray

  bool is_nil() const { return kind == Kind::kNil; }
  bool is_error() const { return kind == Kind::kError; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_integer() const { return kind == Kind::kInteger; }

  static RedisReply Error(std::string message) {
    RedisReply r;
    r.kind = Kind::kError;
    r.str = std::move(message);
    return r;
  }
  // Deep copy of a hiredis reply. REQUIRES: r != nullptr.
  static RedisReply FromHiredis(const redisReply* r);
};

std::string_view RedisReplyKindName(RedisReply::Kind k);  // "nil", "integer", ...

}  // namespace rankd
