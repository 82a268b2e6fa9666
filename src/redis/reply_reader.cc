#include "redis/reply_reader.h"

#include <hiredis/read.h>

#include "redis/reader.h"

namespace rankd {

RedisReplyReader::RedisReplyReader(const ReplyLimits& limits)
    : scanner_(limits), reader_(redisReaderCreateWithFunctions(RedisReplyBuilders())) {
  if (reader_ == nullptr) error_ = Error::Backend("out of memory creating a reply reader");
}

RedisReplyReader::~RedisReplyReader() {
  if (reader_ != nullptr) redisReaderFree(reader_);
}

Status RedisReplyReader::Failed(Error e) {
  if (!error_) error_ = std::move(e);
  return std::unexpected(*error_);
}

Status RedisReplyReader::Feed(std::string_view bytes) {
  if (error_) return std::unexpected(*error_);
  auto ended = scanner_.Scan(bytes);
  if (!ended) return Failed(std::move(ended.error()));
  if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK)
    return Failed(Error::Backend("out of memory buffering a reply"));
  ready_ += *ended;
  return {};
}

Result<std::optional<RedisReply>> RedisReplyReader::Next() {
  if (error_) return std::unexpected(*error_);
  void* obj = nullptr;
  if (redisReaderGetReply(reader_, &obj) != REDIS_OK) {
    // reader_->errstr may quote stream bytes: keep it out of the message.
    bool oom = reader_->err == REDIS_ERR_OOM;
    (void)Failed(Error::Backend(oom ? "out of memory building a reply" : "protocol error"));
    return std::unexpected(*error_);
  }
  if (obj == nullptr) return std::optional<RedisReply>{};
  std::optional<RedisReply> out(std::move(TakeReply(obj)));
  RedisReplyBuilders()->freeObject(obj);
  if (ready_ > 0) --ready_;
  return out;
}

Status RespReader::Feed(std::string_view bytes) {
  if (error_) return std::unexpected(*error_);
  auto ended = scanner_.Scan(bytes, &ends_);
  if (!ended) {
    error_ = std::move(ended.error());
    return std::unexpected(*error_);
  }
  size_t from = 0;
  for (size_t end : ends_) {
    replies_.AppendBytes(bytes.substr(from, end - from));
    replies_.EndReply();
    from = end;
  }
  replies_.AppendBytes(bytes.substr(from));  // the start of a reply not complete yet
  return {};
}

}  // namespace rankd
