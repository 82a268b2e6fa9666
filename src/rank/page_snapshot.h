// PageSnapshot: a ranking kept for its later pages (docs/api.md, "Pages"), in the form
// the one Redis string {prefix}rankd:page:<32 hex digits> holds it:
//
//   rankd-page 1\n                                   the format's name and version
//   {"plan":"feed","user_id":42,"items":[\n          the answers' head (AppendRankHead)
//   ,"degraded":[],"served_id":"..."\n               their meta (AppendRankMeta)
//   {"id":90017,"score":3.25,"author":17}\n          one item a line, in ranking order
//   ...
//
// Every page's answer is pasted from these lines: a later page costs no JSON writing
// but its counts. The cursor (page_cursor.h) carries where its page's first item starts
// and the longest item's size, so that a later page is two GETRANGEs in one round trip
// (the header lines; page_size x the longest item from the page's first byte), then a
// split on newlines: JSON written by api/rank_response.h holds no raw newline.
//
// Threads: plain values and pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/rank_response.h"
#include "core/error.h"
#include "rank/page_cursor.h"
#include "sched/scheduler.h"

namespace rankd {

struct PageSnapshot {
  std::string bytes;              // what the Redis string holds
  uint32_t header_bytes = 0;      // its three header lines
  std::vector<uint32_t> ends;     // where each item's line ends (after its '\n')
  uint32_t max_item_bytes = 0;    // the longest item line, '\n' included
  std::string_view head() const;  // the answers' head, without its newline
  std::string_view meta() const;  // their meta, the same
  size_t items() const { return ends.size(); }
  // The lines of items [0, n), newlines included. REQUIRES: n <= items().
  std::string_view Lines(size_t n) const;
};

// The snapshot of `r`'s output: its rows in order, the first row of each id only (ids
// are the output's "id" column; rows with a null id all stay, and so does every row of
// an output without that column), at most `max_items` of them. `extras` go into the
// meta line (experiment, variant, served_id).
PageSnapshot BuildPageSnapshot(const RunResult& r, const ResponseExtras& extras, size_t max_items);

// A later page read back from a snapshot: views into the replies it was read from.
struct PageRead {
  std::string_view head;
  std::string_view meta;
  std::string_view lines;  // the page's item lines, newlines included
  size_t count = 0;        // items in `lines`
};

// The page of up to `page_size` items at cursor `c`, from the replies of GETRANGE of
// [0, c.header_bytes) and of [c.byte_start, ...). cursor_expired when the snapshot is
// gone (expired or deleted: Redis answers empty strings) or is not the one `c` was
// issued for.
Result<PageRead> ReadPage(std::string_view header, std::string_view items, const PageCursor& c,
                          size_t page_size);

// A page's answer, all but its closing '}': head, the item `lines` comma-separated,
// counts, meta, and the cursor when there is one (empty: none). Who adds "nodes"
// (explain, first pages only) adds them after this.
void AppendPage(std::string_view head, std::string_view lines, size_t count, int64_t took_us,
                std::string_view meta, std::string_view cursor, std::string& out);

}  // namespace rankd
