#include "redis/resp_reader.h"

namespace rankd {

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
