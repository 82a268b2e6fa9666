// KeyTemplate: a Redis key template's literal text around its id ("item:{id}" is
// {"item:", ""}, "doc:{id}:v1" is {"doc:", ":v1"}): how keys are built from ids
// (redis/command_batch.h) and how an invalidated key is read back into its id (the shard cache,
// plan/schema.h). A view: the texts belong to whoever made it.
//
// Threads: a plain value; any thread.
#pragma once

#include <optional>
#include <string_view>

namespace rankd {

struct KeyTemplate {
  std::string_view before;
  std::string_view after;

  // The id text of `key` (without the endpoint's prefix) when the whole template matches
  // it with a non-empty id; nullopt otherwise.
  std::optional<std::string_view> IdIn(std::string_view key) const {
    if (key.size() <= before.size() + after.size()) return std::nullopt;
    if (!key.starts_with(before) || !key.ends_with(after)) return std::nullopt;
    return key.substr(before.size(), key.size() - before.size() - after.size());
  }
};

}  // namespace rankd
