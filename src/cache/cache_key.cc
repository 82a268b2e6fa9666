// The cache's key families and the parsing of an invalidated Redis key back into one
// (shard_cache.h). Threads: any thread (pure).
#include <array>
#include <optional>
#include <string_view>
#include <utility>

#include "cache/shard_cache.h"
#include "core/parse_int.h"

namespace rankd {

namespace {

constexpr std::array<std::pair<CacheKind, std::string_view>, 5> kPrefixes{{
    {CacheKind::kUser, "user:"},
    {CacheKind::kFollow, "follow:"},
    {CacheKind::kRecs, "recs:"},
    {CacheKind::kMedia, "media:"},
    {CacheKind::kItem, "item:"},
}};

}  // namespace

std::string_view CacheKindPrefix(CacheKind k) {
  for (const auto& [kind, prefix] : kPrefixes)
    if (kind == k) return prefix;
  return {};
}

std::optional<std::pair<CacheKind, int64_t>> ParseCacheKey(std::string_view key) {
  for (const auto& [kind, prefix] : kPrefixes) {
    if (!key.starts_with(prefix)) continue;
    // ParseStrictInt refuses '+', spaces, trailing bytes and overflow. It takes leading
    // zeros ("user:007" -> 7): at worst an extra invalidation of user:7, which is safe.
    std::optional<int64_t> id = ParseStrictInt<int64_t>(key.substr(prefix.size()));
    if (!id) return std::nullopt;
    return std::pair{kind, *id};
  }
  return std::nullopt;
}

}  // namespace rankd
