// CacheEntry (cache_entry.h): a hash or a list head encoded into an entry's first line
// and its spill, and copied back out; a blob copied into its spill. Threads: the owning cache's
// (any, for a lone entry).
#include "cache/cache_entry.h"

#include <algorithm>
#include <new>

namespace rankd {

namespace {

using State = CachedField::State;

bool IsLongStr(const CachedFields& fields, size_t f) {
  return fields.state(f) == State::kValue && fields.kind(f) == CachedFields::kStr &&
         fields.str(f).size() > CacheEntry::kShortStr;
}

char* AllocateSpill(uint64_t bytes) {
  void* p = std::malloc(bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<char*>(p);
}

}  // namespace

uint64_t CacheEntry::SpillBytes(const CachedHash& h) {
  const size_t n = static_cast<size_t>(std::popcount(h.known));
  uint64_t bytes = n > kInlineCells ? TagBytes(n) + 8 * n : 0;
  for (uint64_t bits = h.known; bits != 0; bits &= bits - 1) {
    const auto f = static_cast<size_t>(std::countr_zero(bits));
    if (IsLongStr(h.fields, f)) bytes += h.fields.str(f).size();
  }
  return bytes;
}

uint64_t CacheEntry::SpillBytes(const CachedList& l) {
  const size_t n = l.members.size();
  if (l.scores.empty() && !l.str_members)
    return (n > kInlineMembers ? 8 * n : 0) + sizeof(uint32_t) * l.bad.size();
  return ScoresAt(n, l.bad.size(), n > kInlineMembers) + (l.scores.empty() ? 0 : 8 * n) +
         (l.str_members ? l.strs.size() : 0);
}

CacheEntry::CacheEntry(const CacheKey& k, const CachedHash& h)
    : holds(Holds::kHash), known(static_cast<uint32_t>(h.known)), cells{}, key(k) {
  exists = h.exists;
  const size_t n = static_cast<size_t>(std::popcount(known));
  spilled = n > kInlineCells;
  if (const uint64_t total = SpillBytes(h); total != 0) {
    spill = AllocateSpill(total);
    spill_bytes = static_cast<uint32_t>(total);
  }
  uint8_t* tags = spilled ? reinterpret_cast<uint8_t*>(spill) : cells.tags;
  char* values = spilled ? spill + TagBytes(n) : reinterpret_cast<char*>(cells.values);
  uint64_t strings_at = spilled ? TagBytes(n) + 8 * n : 0;  // the long strings' bytes
  size_t c = 0;
  for (uint64_t bits = known; bits != 0; bits &= bits - 1, ++c) {
    const auto f = static_cast<size_t>(std::countr_zero(bits));
    const State state = h.fields.state(f);
    uint8_t tag = static_cast<uint8_t>(state);
    Kind kind = kNone;
    uint64_t v = 0;
    if (state == State::kValue) {
      switch (h.fields.kind(f)) {
        case CachedFields::kI64:
          kind = kI64;
          v = static_cast<uint64_t>(h.fields.i64(f));
          break;
        case CachedFields::kF64:
          kind = kF64;
          v = std::bit_cast<uint64_t>(h.fields.f64(f));
          break;
        case CachedFields::kBool:
          kind = kBool;
          v = h.fields.boolean(f) ? 1 : 0;
          break;
        case CachedFields::kStr: {
          const std::string_view s = h.fields.str(f);
          if (s.size() <= kShortStr) {
            kind = kShort;
            std::memcpy(&v, s.data(), s.size());
            tag |= static_cast<uint8_t>(s.size() << 5);
          } else {
            kind = kStr;
            std::memcpy(spill + strings_at, s.data(), s.size());
            v = (strings_at << 32) | s.size();
            strings_at += s.size();
          }
          break;
        }
        case CachedFields::kNone: break;  // a value of another type: kept as no value
      }
    }
    tags[c] = static_cast<uint8_t>(tag | (kind << 2));
    std::memcpy(values + 8 * c, &v, 8);
  }
}

CacheEntry::CacheEntry(const CacheKey& k, const CachedList& l)
    : holds(Holds::kList), asked(l.asked), list{}, key(k) {
  list.size = static_cast<uint32_t>(l.members.size());
  list.nbad = static_cast<uint32_t>(l.bad.size());
  spilled = list.size > kInlineMembers;
  if (const uint64_t total = SpillBytes(l); total != 0) {
    spill = AllocateSpill(total);
    spill_bytes = static_cast<uint32_t>(total);
  }
  if (list.size != 0)
    std::memcpy(spilled ? spill : reinterpret_cast<char*>(list.members), l.members.data(),
                8 * size_t{list.size});
  if (list.nbad != 0)
    std::memcpy(spill + (spilled ? 8 * size_t{list.size} : 0), l.bad.data(),
                sizeof(uint32_t) * list.nbad);
  has_scores = !l.scores.empty();
  str_members = l.str_members;
  if (has_scores)
    std::memcpy(spill + ScoresAt(list.size, list.nbad, spilled), l.scores.data(),
                8 * size_t{list.size});
  if (str_members && !l.strs.empty())
    std::memcpy(const_cast<char*>(strs()), l.strs.data(), l.strs.size());
}

CacheEntry::CacheEntry(const CacheKey& k, const CachedBlob& b)
    : holds(Holds::kBlob), known(0), cells{}, key(k) {
  spilled = true;
  spill_bytes = static_cast<uint32_t>(b.bytes.size());
  spill = AllocateSpill(std::max<uint64_t>(spill_bytes, 1));
  std::memcpy(spill, b.bytes.data(), spill_bytes);
}

CachedHash HashRef::ToHash() const {
  CachedHash h;
  h.exists = e_->exists;
  h.known = e_->known;
  h.fields.resize(h.known == 0 ? 0 : 64 - static_cast<size_t>(std::countl_zero(h.known)));
  for (uint64_t bits = h.known; bits != 0; bits &= bits - 1) {
    const auto f = static_cast<size_t>(std::countr_zero(bits));
    CopyField(f, h.fields, f);
  }
  return h;
}

CachedList ListRef::ToList() const {
  CachedList l;
  l.asked = asked();
  l.members.assign(members());
  const std::span<const uint32_t> b = bad();
  l.bad.assign(b.begin(), b.end());
  if (has_scores()) l.scores.assign(scores().begin(), scores().end());
  l.str_members = str_members();
  if (l.str_members) {
    l.members.resize(0);
    for (size_t i = 0; i < e_->list.size; ++i) l.AddStr(str(i));
  }
  return l;
}

}  // namespace rankd
