#include "rank/page_snapshot.h"

#include <algorithm>
#include <unordered_set>

namespace rankd {

namespace {

constexpr std::string_view kMagic = "rankd-page 1\n";
// A Redis string holds at most 512 MiB: items past it are left out (the chain ends
// there), which also keeps every offset in a cursor's 32 bits.
constexpr size_t kMaxBytes = (size_t{512} << 20) - 1;

// Whether the row's id was seen before; rows with a null id, or of an output without an
// i64 or str "id" column, never are.
class SeenIds {
 public:
  explicit SeenIds(const RowSet& rows, size_t reserve) : id_(rows.column("id")) {
    if (id_ && id_->type == ColumnType::kI64) nums_.reserve(reserve);
    if (id_ && id_->type == ColumnType::kStr) strs_.reserve(reserve);
  }
  bool Repeated(uint32_t row) {
    if (!id_ || !id_->valid(row)) return false;
    if (id_->type == ColumnType::kI64) return !nums_.insert(id_->i64[row]).second;
    if (id_->type == ColumnType::kStr) return !strs_.insert(id_->str(row)).second;
    return false;
  }

 private:
  const Column* id_;
  std::unordered_set<int64_t> nums_;
  std::unordered_set<std::string_view> strs_;  // views into the column, which outlives this
};

// The line of `s` that starts at `at`, without its '\n' (the rest of `s` when no '\n'
// ends it); moves `at` past it.
std::string_view NextLine(std::string_view s, size_t& at) {
  size_t nl = s.find('\n', at);
  if (nl == std::string_view::npos) nl = s.size();
  std::string_view line = s.substr(at, nl - at);
  at = nl + 1;
  return line;
}

Error Gone() {
  return Error::CursorExpired(
      "cursor: its ranking is no longer kept (expired or removed): ask for the first page again");
}

}  // namespace

std::string_view PageSnapshot::head() const {
  size_t at = kMagic.size();
  return NextLine(bytes, at);
}

std::string_view PageSnapshot::meta() const {
  size_t at = kMagic.size();
  NextLine(bytes, at);
  return NextLine(bytes, at);
}

std::string_view PageSnapshot::Lines(size_t n) const {
  if (n == 0) return {};
  return std::string_view(bytes).substr(header_bytes, ends[n - 1] - header_bytes);
}

PageSnapshot BuildPageSnapshot(const RunResult& r, const ResponseExtras& extras, size_t max_items) {
  PageSnapshot s;
  const RowSet& rows = r.output;
  s.bytes.reserve(256 + std::min(rows.size(), max_items) * 48);
  s.bytes += kMagic;
  AppendRankHead(r, s.bytes);
  s.bytes += '\n';
  AppendRankMeta(r, extras, s.bytes);
  s.bytes += '\n';
  s.header_bytes = static_cast<uint32_t>(s.bytes.size());
  RankItemWriter writer(r);
  SeenIds seen(rows, std::min(rows.size(), max_items));
  s.ends.reserve(std::min(rows.size(), max_items));
  for (size_t i = 0; i < rows.size() && s.ends.size() < max_items; ++i) {
    uint32_t row = rows.row(i);
    if (seen.Repeated(row)) continue;
    size_t start = s.bytes.size();
    writer.Append(row, s.bytes);
    s.bytes += '\n';
    if (s.bytes.size() > kMaxBytes) {
      s.bytes.resize(start);
      break;
    }
    s.ends.push_back(static_cast<uint32_t>(s.bytes.size()));
    s.max_item_bytes = std::max(s.max_item_bytes, static_cast<uint32_t>(s.bytes.size() - start));
  }
  return s;
}

Result<PageRead> ReadPage(std::string_view header, std::string_view items, const PageCursor& c,
                          size_t page_size) {
  // Empty replies: no such key. Anything not shaped as the cursor says is not the
  // snapshot it was issued for (another version's format, or a key someone rewrote).
  if (header.size() != c.header_bytes || !header.starts_with(kMagic) || !header.ends_with('\n'))
    return Fail(Gone());
  PageRead p;
  size_t at = kMagic.size();
  p.head = NextLine(header, at);
  p.meta = NextLine(header, at);
  if (at != header.size()) return Fail(Gone());
  size_t want = std::min<size_t>(page_size, c.items - c.offset);
  size_t end = 0;
  while (p.count < want) {
    size_t nl = items.find('\n', end);
    if (nl == std::string_view::npos) return Fail(Gone());
    end = nl + 1;
    ++p.count;
  }
  p.lines = items.substr(0, end);
  return p;
}

void AppendPage(std::string_view head, std::string_view lines, size_t count, int64_t took_us,
                std::string_view meta, std::string_view cursor, std::string& out) {
  out.reserve(out.size() + head.size() + lines.size() + meta.size() + cursor.size() + 64);
  out += head;
  if (!lines.empty()) {
    size_t from = out.size();
    out.append(lines.substr(0, lines.size() - 1));  // less the last newline
    std::replace(out.begin() + static_cast<std::ptrdiff_t>(from), out.end(), '\n', ',');
  }
  AppendRankCounts(count, took_us, out);
  out += meta;
  if (!cursor.empty()) AppendRankCursor(cursor, out);
}

}  // namespace rankd
