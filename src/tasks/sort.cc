// sort: a stable sort of the selection vector by one column, nulls last in either order.
// Only the index vector moves; no column is copied. When a take of N is the node's only
// reader (PlanNode::rows_read), only the first N rows are put in order.
#include "tasks/sort.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "tasks/task.h"

namespace rankd {

namespace {

// Order-preserving unsigned images of keys: a sorts before b (ascending) iff
// Image(a) < Image(b), and keys equal for the comparison get equal images (0.0 and -0.0:
// the comparison sorts them as ties, kept in input order).
uint64_t Image(int64_t x) { return static_cast<uint64_t>(x) ^ (uint64_t{1} << 63); }
uint64_t Image(double x) {
  uint64_t b = std::bit_cast<uint64_t>(x == 0 ? 0.0 : x);
  // Negative: flip every bit (a larger magnitude sorts first); else set the sign bit.
  return b ^ ((uint64_t{0} - (b >> 63)) | (uint64_t{1} << 63));
}
uint64_t Image(uint32_t x) { return x; }
uint64_t Image(uint8_t x) { return x; }

// A row's place in the order asked: its key's image (Image below, flipped for desc) above
// its logical position. One unsigned comparison then orders by key and breaks ties by
// position, so an unstable sort or selection gives a stable result, and it compiles to
// no branch (a score's order is random: half of the branches a comparator takes would
// be mispredicted).
using SortKey = unsigned __int128;
SortKey MakeSortKey(uint64_t image, size_t pos) {
  return (SortKey{image} << 32) | static_cast<uint32_t>(pos);
}
uint32_t PositionOf(SortKey k) { return static_cast<uint32_t>(k); }

// Moves the `cut` smallest of v[0, n) to its front, in no particular order (as
// std::nth_element), by quickselect with a branch-free partition: each element is
// written to the pivot's side by a store and an add, never a branch. Measured on
// home_light's sort (~200 scores, top 30, over 2,000 viewers), std::nth_element's
// mispredicted comparisons made it 4x the cost it has when the same few inputs repeat.
// After 2 log2(n) + 8 rounds (an input made to defeat the median of three) the rest goes
// to std::nth_element, so the worst case stays O(n log n).
template <class T>
void SelectSmallest(T* v, size_t n, size_t cut) {
  size_t lo = 0, hi = n;
  int rounds = 2 * std::bit_width(n) + 8;
  while (hi - lo > 16) {
    if (rounds-- == 0) {
      std::nth_element(v + lo, v + cut, v + hi);
      return;
    }
    // The median of the first, middle and last as the pivot, moved to the end.
    const size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < v[lo]) std::swap(v[mid], v[lo]);
    if (v[hi - 1] < v[mid]) std::swap(v[hi - 1], v[mid]);
    if (v[mid] < v[lo]) std::swap(v[mid], v[lo]);
    std::swap(v[mid], v[hi - 1]);
    const T pivot = v[hi - 1];
    size_t m = lo;  // v[lo, m) < pivot <= v[m, i)
    for (size_t i = lo; i < hi - 1; ++i) {
      const T x = v[i];
      const bool less = x < pivot;
      v[i] = v[m];
      v[m] = x;
      m += less;
    }
    std::swap(v[m], v[hi - 1]);  // v[lo, m) < v[m] == pivot <= v[m + 1, hi)
    if (m == lo) {
      // The pivot is the range's smallest key: gather its equals behind it, so that a
      // run of equal keys is settled at once instead of one key a round.
      size_t e = m + 1;  // v[m, e) == pivot
      for (size_t i = m + 1; i < hi; ++i) {
        const T x = v[i];
        const bool equal = !(pivot < x);
        v[i] = v[e];
        v[e] = x;
        e += equal;
      }
      if (cut <= e) return;
      lo = e;
      continue;
    }
    if (cut == m || cut == m + 1) return;
    if (cut < m)
      hi = m;
    else
      lo = m + 1;
  }
  std::sort(v + lo, v + hi);
}

// Sorts `rows` by key. Keys are gathered once into SortKeys, so the comparisons read one
// contiguous array instead of chasing row indices into the column.
// Only the first `first` rows need their final place (the rest keep every row, in no
// particular order): with a take after the sort, selecting those rows (SelectSmallest)
// and sorting just them does less work. Not std::partial_sort: its heap selection is
// slower than a full sort on presorted input (measured: 100 rows in reverse order,
// top 20: 1.0 µs vs 0.6 µs; select-then-sort 0.3 µs).
//
// Cancellation: at ~120 ns a row, a block of kSortBlock rows is well under a millisecond
// of work, so a full sort of a large input sorts block by block and merges the blocks
// pairwise, polling between blocks and merges; the selection of the first rows goes
// block by block too (SelectFirst). Returns false when cancelled (rows are then left as
// they were).
constexpr size_t kSortBlock = 4096;
// Below this many rows a full sort uses std::sort (SortByKey): a bucket or radix sort's
// fixed costs (its counters) are then a large part of the work.
constexpr size_t kBucketRows = 256;
// TopRows orders the rows it keeps by counting ranks, cut^2 steps: for a take of at most
// this many.
constexpr size_t kTopRowsMax = 64;

// Moves the `cut` smallest entries to the front of `e` (the rest follow, in no
// particular order) like SelectSmallest, but over blocks: the best `cut` so far plus
// the next block of max(cut, kSortBlock) entries are selected down to `cut` again, so no
// step handles more than 2 * max(cut, kSortBlock) entries (take's count is at most
// 10,000: ~0.2 ms) and `cancelled` is polled between steps. The first `cut` entries are
// the same set as one selection's (the order is total). Returns false when cancelled.
bool SelectFirst(PoolVector<SortKey>& e, size_t cut, const CancelCheck& cancelled) {
  const size_t block = std::max(cut, kSortBlock);
  const auto at = [&](PoolVector<SortKey>& v, size_t i) {
    return v.begin() + static_cast<ptrdiff_t>(i);
  };
  if (e.size() <= cut + block) {  // one step: in place, nothing to copy or poll
    SelectSmallest(e.data(), e.size(), cut);
    return true;
  }
  size_t taken = cut + block;
  PoolVector<SortKey> best(e.begin(), at(e, taken));
  size_t rejected = 0;  // e[0, rejected) holds the entries dropped so far; always < taken
  for (;;) {
    SelectSmallest(best.data(), best.size(), cut);
    for (size_t i = cut; i < best.size(); ++i) e[rejected++] = best[i];
    best.resize(cut);
    if (taken == e.size()) break;
    if (cancelled && cancelled()) return false;
    size_t next = std::min(e.size(), taken + block);
    best.insert(best.end(), at(e, taken), at(e, next));
    taken = next;
  }
  // best, then the rejected: rows are all kept.
  best.insert(best.end(), e.begin(), at(e, rejected));
  e.swap(best);
  return true;
}

// The first `cut` rows in order and the others after them, for inputs of at most
// kSortBlock rows (nothing to poll): the cut-th smallest key image is found by selection
// over the plain 64-bit images (a SortKey's 16 bytes would be moved through the
// partition's store-to-load chain, which forwards 8-byte stores to 16-byte loads
// badly: 1.6x slower here), then one branch-free pass keeps the rows below it and, of
// the rows equal to it, the first ones by position, and the kept rows are ordered by
// counting each one's rank among them. Measured (220 random scores, top 30, fresh input
// each time): 1.7 µs against 3.1 µs for nth_element and sort over (key, position) pairs.
template <class Key, class KeyOf>
void TopRows(Selection& rows, bool desc, size_t cut, KeyOf key_of) {
  const size_t n = rows.size();
  const uint64_t flip = desc ? ~uint64_t{0} : 0;
  PoolVector<uint64_t> image(n), scratch(n);
  for (size_t i = 0; i < n; ++i)
    scratch[i] = image[i] = Image(static_cast<Key>(key_of(rows[i]))) ^ flip;
  SelectSmallest(scratch.data(), n, cut);
  const uint64_t bound = *std::max_element(scratch.begin(), scratch.begin() + ptrdiff_t(cut));
  size_t below = 0;
  for (size_t i = 0; i < n; ++i) below += image[i] < bound;
  // Kept rows (in position order) to kept, the others to rest; each row is written to
  // both and only its own list's end moves (one spare slot each for the last write).
  PoolVector<uint32_t> kept(cut + 1), rest(n - cut + 1);
  size_t nkept = 0, nrest = 0, equal = 0;
  const size_t equal_kept = cut - below;
  for (size_t i = 0; i < n; ++i) {
    const bool is_equal = image[i] == bound;
    const bool keep = (image[i] < bound) | (is_equal & (equal < equal_kept));
    equal += is_equal;
    kept[nkept] = static_cast<uint32_t>(i);
    rest[nrest] = static_cast<uint32_t>(i);
    nkept += keep;
    nrest += !keep;
  }
  // A kept row's rank: the kept rows before it in the order (smaller image, or equal
  // and earlier). cut is small (kTopRowsMax): cut^2 plain adds.
  uint64_t kept_image[kTopRowsMax];
  for (size_t a = 0; a < cut; ++a) kept_image[a] = image[kept[a]];
  Selection sorted(n);
  for (size_t a = 0; a < cut; ++a) {
    const uint64_t ia = kept_image[a];
    size_t rank = 0;
    for (size_t b = 0; b < cut; ++b) {
      const uint64_t ib = kept_image[b];
      rank += (ib < ia) | ((ib == ia) & (b < a));
    }
    sorted[rank] = rows[kept[a]];
  }
  for (size_t i = 0; i < n - cut; ++i) sorted[cut + i] = rows[rest[i]];
  rows.swap(sorted);
}

template <class Key, class KeyOf>
bool SortByKey(Selection& rows, bool desc, size_t first, const CancelCheck& cancelled,
               KeyOf key_of) {
  auto stop = [&] { return cancelled && cancelled(); };
  const uint64_t flip = desc ? ~uint64_t{0} : 0;
  PoolVector<SortKey> e(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i % kSortBlock == 0 && stop()) return false;
    e[i] = MakeSortKey(Image(static_cast<Key>(key_of(rows[i]))) ^ flip, i);
  }
  const size_t cut = std::min(first, e.size());
  if (cut != e.size() && (!SelectFirst(e, cut, cancelled) || stop())) return false;
  const auto at = [&](size_t i) { return e.begin() + static_cast<ptrdiff_t>(i); };
  if (cut <= kSortBlock) {
    std::sort(e.begin(), at(cut));
  } else {
    for (size_t b = 0; b < cut; b += kSortBlock) {
      if (stop()) return false;
      std::sort(at(b), at(std::min(cut, b + kSortBlock)));
    }
    for (size_t width = kSortBlock; width < cut; width *= 2)
      for (size_t b = 0; b + width < cut; b += 2 * width) {
        if (stop()) return false;
        std::inplace_merge(at(b), at(b + width), at(std::min(cut, b + 2 * width)));
      }
  }
  Selection sorted(rows.size());
  for (size_t i = 0; i < e.size(); ++i) sorted[i] = rows[PositionOf(e[i])];
  rows.swap(sorted);
  return true;
}

// A full sort of many rows: a stable LSD radix sort of (image, row) pairs, one byte of the
// image a pass. Stable, so ties keep their input order, as SortByKey's position tie-break
// does: the same result. Passes over a byte that every key shares are skipped. Measured
// (ops/bench vm, 9,500 f64 keys, 8 passes): ~4x faster than std::sort of (key, position)
// pairs. Polls `cancelled` every kSortBlock rows of each pass. Returns false when
// cancelled (rows are then left as they were).
template <class KeyOf>
bool RadixSort(Selection& rows, bool desc, const CancelCheck& cancelled, KeyOf key_of) {
  struct Keyed {
    uint64_t key;
    uint32_t row;
  };
  const size_t n = rows.size();
  const uint64_t flip = desc ? ~uint64_t{0} : 0;
  PoolVector<Keyed> a(n), b(n);
  PoolVector<std::array<uint32_t, 256>> count(8, std::array<uint32_t, 256>{});
  uint64_t diff = 0;  // bits that differ between some key and the first
  const uint64_t first_key = n ? Image(key_of(rows[0])) ^ flip : 0;
  auto stop = [&] { return cancelled && cancelled(); };
  for (size_t begin = 0; begin < n; begin += kSortBlock) {
    if (stop()) return false;
    const size_t end = std::min(n, begin + kSortBlock);
    for (size_t k = begin; k < end; ++k) {
      const uint64_t key = Image(key_of(rows[k])) ^ flip;
      a[k] = {key, rows[k]};
      diff |= key ^ first_key;
      for (int d = 0; d < 8; ++d) ++count[static_cast<size_t>(d)][(key >> (8 * d)) & 255];
    }
  }
  for (int d = 0; d < 8; ++d) {
    const int shift = 8 * d;
    if (((diff >> shift) & 255) == 0) continue;
    std::array<uint32_t, 256>& at = count[static_cast<size_t>(d)];
    uint32_t sum = 0;
    for (uint32_t& c : at) {
      uint32_t here = c;
      c = sum;
      sum += here;
    }
    for (size_t begin = 0; begin < n; begin += kSortBlock) {
      if (stop()) return false;
      const size_t end = std::min(n, begin + kSortBlock);
      for (size_t k = begin; k < end; ++k) b[at[(a[k].key >> shift) & 255]++] = a[k];
    }
    a.swap(b);
  }
  for (size_t k = 0; k < n; ++k) rows[k] = a[k].row;
  return true;
}

// A full sort of up to kSortBlock rows (nothing to poll) in one scatter: the rows go to
// buckets by the up-to-12 bits of their key images that start at the highest bit in
// which two keys differ (the bits above it are the same in every key), then each bucket
// of more than one row is ordered by whole images, by insertion when it is small, else
// by std::sort of (image, position). With about two buckets a row, scores spread over
// magnitudes (diversify's discounted scores) leave a few rows a bucket; keys clustered
// under an outlier fall into a few large buckets, sorted in O(n log n) like SortByKey.
// Stable: the scatter keeps input order, insertion moves a row only past a larger image
// and the std::sort breaks ties by position. Measured (ops/bench pages, diversify's sort
// of 1,000 uniform scores): see docs/benchmarks.md "Feed pages".
template <class KeyOf>
void BucketSort(Selection& rows, bool desc, KeyOf key_of) {
  constexpr size_t kInsertionMax = 32;  // larger buckets: std::sort
  const size_t n = rows.size();
  const uint64_t flip = desc ? ~uint64_t{0} : 0;
  PoolVector<uint64_t> image(n);
  uint64_t diff = 0;  // bits that differ between some key and the first
  for (size_t k = 0; k < n; ++k) {
    image[k] = Image(key_of(rows[k])) ^ flip;
    diff |= image[k] ^ image[0];
  }
  if (diff == 0) return;  // every key ties: the input order is the order
  const int bits = std::clamp(static_cast<int>(std::bit_width(n)) + 1, 8, 12);
  const int shift = std::max(0, static_cast<int>(std::bit_width(diff)) - bits);
  const size_t buckets = size_t{1} << bits;
  const auto bucket = [&](uint32_t pos) { return (image[pos] >> shift) & (buckets - 1); };
  PoolVector<uint32_t> start(buckets + 1, 0);
  for (uint32_t k = 0; k < n; ++k) ++start[bucket(k) + 1];
  for (size_t i = 1; i <= buckets; ++i) start[i] += start[i - 1];
  PoolVector<uint32_t> pos(n), next(start.begin(), start.end() - 1);
  for (uint32_t k = 0; k < n; ++k) pos[next[bucket(k)]++] = k;
  if (shift > 0) {  // with shift 0 a bucket's rows have one image: already in order
    for (size_t i = 0; i < buckets; ++i) {
      uint32_t* first = pos.data() + start[i];
      uint32_t* last = pos.data() + start[i + 1];
      if (last - first <= 1) continue;
      if (static_cast<size_t>(last - first) > kInsertionMax) {
        std::sort(first, last, [&](uint32_t a, uint32_t b) {
          return image[a] < image[b] || (image[a] == image[b] && a < b);
        });
        continue;
      }
      for (uint32_t* p = first + 1; p < last; ++p) {
        const uint32_t row = *p;
        uint32_t* q = p;
        for (; q > first && image[q[-1]] > image[row]; --q) *q = q[-1];
        *q = row;
      }
    }
  }
  Selection sorted(n);
  for (size_t k = 0; k < n; ++k) sorted[k] = rows[pos[k]];
  rows.swap(sorted);
}

// Sorts rows by key_of: TopRows when a take reads a few of at most kSortBlock rows; when
// every row needs its place, BucketSort from kBucketRows rows to kSortBlock and RadixSort
// above (its passes poll); else SortByKey.
template <class Key, class KeyOf>
bool SortBy(Selection& rows, bool desc, size_t first, const CancelCheck& cancelled, KeyOf key_of) {
  if (first < rows.size() && first <= kTopRowsMax && rows.size() <= kSortBlock) {
    if (cancelled && cancelled()) return false;
    TopRows<Key>(rows, desc, first, key_of);
    return true;
  }
  const auto key = [&](uint32_t r) { return static_cast<Key>(key_of(r)); };
  if (first >= rows.size() && rows.size() > kSortBlock)
    return RadixSort(rows, desc, cancelled, key);
  if (first >= rows.size() && rows.size() >= kBucketRows) {
    if (cancelled && cancelled()) return false;
    BucketSort(rows, desc, key);
    return true;
  }
  return SortByKey<Key>(rows, desc, first, cancelled, key_of);
}

// The rank of each dictionary entry in byte order: strings then sort as integers.
std::vector<uint32_t> DictRanks(const StringDict& dict) {
  std::vector<uint32_t> order(dict.values.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return dict.values[a] < dict.values[b]; });
  std::vector<uint32_t> rank(order.size());
  uint32_t r = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && dict.values[order[i]] != dict.values[order[i - 1]]) ++r;
    rank[order[i]] = r;
  }
  return rank;
}

}  // namespace

std::optional<Selection> SortRows(const RowSet& rs, const Column& col, bool desc, size_t first,
                                  const CancelCheck& cancelled) {
  // Nulls (and NaN, which has no order) go last, in their input order. Branch-free: each
  // row is written to both lists and only the one it belongs to advances (a null key is
  // unpredictable per row).
  const size_t n = rs.size();
  Selection rows(n), nulls(n);
  size_t kept = 0, dropped = 0;
  const Selection* sel = rs.selection();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = sel ? (*sel)[i] : static_cast<uint32_t>(i);
    const bool has = col.valid(r) && !(col.type == ColumnType::kF64 && std::isnan(col.f64[r]));
    rows[kept] = r;
    nulls[dropped] = r;
    kept += has;
    dropped += !has;
  }
  rows.resize(kept);
  nulls.resize(dropped);
  if (first == 0) first = rows.size();
  bool sorted = false;
  switch (col.type) {
    case ColumnType::kI64:
      sorted =
          SortBy<int64_t>(rows, desc, first, cancelled, [&](uint32_t r) { return col.i64[r]; });
      break;
    case ColumnType::kF64:
      sorted = SortBy<double>(rows, desc, first, cancelled, [&](uint32_t r) { return col.f64[r]; });
      break;
    case ColumnType::kBool:
      sorted = SortBy<uint8_t>(rows, desc, first, cancelled, [&](uint32_t r) { return col.b[r]; });
      break;
    case ColumnType::kStr: {
      std::vector<uint32_t> rank = DictRanks(*col.dict);
      sorted = SortBy<uint32_t>(rows, desc, first, cancelled,
                                [&](uint32_t r) { return rank[col.str_code[r]]; });
      break;
    }
    case ColumnType::kVec: break;  // never: sort's key is typed at load (no vectors)
  }
  if (!sorted) return std::nullopt;
  rows.insert(rows.end(), nulls.begin(), nulls.end());
  return rows;
}

size_t RowsToOrder(const PlanNode* node, const ParamValues* params) {
  size_t first = node ? node->rows_read : 0;
  if (node && node->rows_read_param >= 0 && params) {
    const auto* count = std::get_if<int64_t>(&(*params)[node->rows_read_param]);
    if (count && *count >= 1 && (first == 0 || uint64_t(*count) < first)) first = size_t(*count);
  }
  return first;
}

Result<RowSet> RunSort(const TaskContext& ctx, RowSets in) {
  const RowSet& rs = in[0];
  auto col = KeyColumn(ctx, rs, "sort");
  if (!col) return Fail(col.error());
  // Only the rows a following take reads must be in order (PlanNode::rows_read).
  std::optional<Selection> rows = SortRows(rs, **col, ctx.args->Str("order") == "desc",
                                           RowsToOrder(ctx.node, ctx.params), CancelCheckOf(ctx));
  if (!rows) return Fail(CancelledError("sort"));
  return rs.WithSelection(std::move(*rows));
}

}  // namespace rankd
