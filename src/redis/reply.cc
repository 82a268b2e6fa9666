#include "redis/reply.h"

#include <hiredis/hiredis.h>

namespace rankd {

RedisReply RedisReply::FromHiredis(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out.kind = Kind::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      out.kind = Kind::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.kind = Kind::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.kind = Kind::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.kind = Kind::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(FromHiredis(r->element[i]));
      break;
    case REDIS_REPLY_NIL:
    default: out.kind = Kind::kNil; break;
  }
  return out;
}

std::string_view RedisReplyKindName(RedisReply::Kind k) {
  switch (k) {
    case RedisReply::Kind::kNil: return "nil";
    case RedisReply::Kind::kInteger: return "integer";
    case RedisReply::Kind::kString: return "string";
    case RedisReply::Kind::kArray: return "array";
    case RedisReply::Kind::kError: return "error";
    case RedisReply::Kind::kStatus: return "status";
  }
  return "nil";
}

}  // namespace rankd
