// PageCursor: where a chain of pages stands in its snapshot (docs/api.md, "Pages"), and
// CursorKey, which turns one into the opaque "cursor" string clients send back and
// checks such a string.
//
// A cursor is 43 bytes of fields and their HMAC-SHA256 under the key of
// --cursor-key-file, base64url without padding (100 characters). The MAC also covers
// the plan name and the user id the cursor was issued for, which the cursor does not
// carry: a later request names them again, and a cursor presented with another plan or
// user fails its MAC like an altered one. Nothing in a cursor is secret (it says where
// items lie in a snapshot); the MAC is what makes it unforgeable, so a client reaches
// only the snapshots rankd made for it, and only at item boundaries.
//
// Threads: a CursorKey is immutable once made: Seal and Open from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/value.h"

namespace rankd {

struct PageCursor {
  std::array<uint8_t, 16> snapshot{};  // the snapshot's random id (its Redis key's tail)
  uint32_t offset = 0;                 // items already served: the next page's first
  uint32_t byte_start = 0;             // where item `offset` starts in the snapshot
  uint32_t header_bytes = 0;           // the snapshot's header lines (page_snapshot.h)
  uint32_t items = 0;                  // items in the snapshot
  uint32_t bytes = 0;                  // the snapshot's size
  uint32_t max_item_bytes = 0;         // its longest item, newline included
  uint16_t page_size = 0;              // the first request's: later pages' default
};

class CursorKey {
 public:
  static constexpr size_t kMinBytes = 32;

  // Every byte of the file at `path` is the key (a trailing newline included). Errors
  // (bad_request, naming the file): unreadable, under kMinBytes, over 1 MiB.
  static Result<std::shared_ptr<const CursorKey>> Load(const std::string& path);
  // 32 bytes from the kernel's random source: cursors then verify in this process only.
  static std::shared_ptr<const CursorKey> Random();

  // The cursor string of `c` for `plan` and `user`.
  std::string Seal(const PageCursor& c, std::string_view plan, const UserId& user) const;
  // The hash tag of the snapshots of `plan` and `user`'s chains: 32 hex digits of an
  // HMAC under this key, so that replicas sharing the key agree on it (the quota of
  // --page-max-snapshots holds across them) and no Redis key names a user id.
  std::string ChainTag(std::string_view plan, const UserId& user) const;
  // The cursor `text` stands for. invalid_cursor when it is not a cursor, or its MAC
  // does not verify for `plan` and `user` under this key (altered, issued for another
  // plan or user, or by a server with another key).
  Result<PageCursor> Open(std::string_view text, std::string_view plan, const UserId& user) const;

 private:
  explicit CursorKey(std::string key) : key_(std::move(key)) {}
  using Mac = std::array<uint8_t, 32>;
  Mac Sign(std::string_view fields, std::string_view plan, const UserId& user) const;

  std::string key_;
};

}  // namespace rankd
