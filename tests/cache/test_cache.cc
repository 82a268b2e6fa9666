// ShardCache: lookups, hash merges, TTLs on a fake clock, SIEVE eviction under a byte
// budget, invalidation racing reads in flight, tickets, key parsing and the stats.
#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/shard_cache.h"

using rankd::CachedField;
using rankd::CachedHash;
using rankd::CachedList;
using rankd::CacheFamily;
using rankd::CacheKey;
using rankd::ReadTicket;
using rankd::ShardCache;
using rankd::Value;

namespace {

// The demo's cached families under fixed ids (a loaded schema's come from KeyFamily::cache_id).
enum Fam : uint32_t { kUser = 1, kFollow, kRecs, kMedia, kItem };
std::vector<CacheFamily> DemoFamilies() {
  return {{kUser, "user:", "", false},
          {kFollow, "follow:", "", false},
          {kRecs, "recs:", "", false},
          {kMedia, "media:", "", false},
          {kItem, "item:", "", false}};
}

// A cache on a clock the test moves by hand.
struct Fixture {
  explicit Fixture(uint64_t budget, uint64_t ttl_cap_ms = 60000)
      : cache({.budget_bytes = budget, .ttl_cap_ms = ttl_cap_ms}, [this] { return now; }) {
    cache.SetFamilies(DemoFamilies());
  }
  uint64_t now = 1000;
  ShardCache cache;

  int64_t bytes() const { return cache.stats().bytes.load(); }
  int64_t entries() const { return cache.stats().entries.load(); }

  // One read of one key, stored at once.
  void PutList(const CacheKey& k, CachedList l, std::optional<uint64_t> ttl = std::nullopt) {
    ReadTicket t = cache.BeginRead(std::array{k});
    cache.PutList(t, k, std::move(l), ttl);
  }
  void PutHash(const CacheKey& k, CachedHash h, std::optional<uint64_t> ttl = std::nullopt) {
    ReadTicket t = cache.BeginRead(std::array{k});
    cache.PutHash(t, k, std::move(h), ttl);
  }
  // Copies of what a lookup finds (nullopt: a miss).
  std::optional<CachedList> FindList(const CacheKey& k) {
    rankd::ListRef l = cache.FindList(k);
    return l ? std::optional(l.ToList()) : std::nullopt;
  }
  std::optional<CachedHash> FindHash(const CacheKey& k) {
    rankd::HashRef h = cache.FindHash(k);
    return h ? std::optional(h.ToHash()) : std::nullopt;
  }
};

CacheKey User(int64_t id, uint16_t endpoint = 0) { return {endpoint, kUser, id}; }
CacheKey Media(int64_t id, uint16_t endpoint = 0) { return {endpoint, kMedia, id}; }
CacheKey Follow(int64_t id, uint16_t endpoint = 0) { return {endpoint, kFollow, id}; }

CachedList List(uint32_t asked, std::vector<int64_t> members) {
  CachedList l;
  l.asked = asked;
  l.members.assign(members);
  return l;
}

// A hash knowing the given fields (index -> value).
CachedHash Hash(std::initializer_list<std::pair<size_t, Value>> fields, bool exists = true) {
  CachedHash h;
  h.exists = exists;
  for (const auto& [f, v] : fields) {
    if (h.fields.size() <= f) h.fields.resize(f + 1);
    h.fields.Set(f, CachedField{CachedField::State::kValue, v});
    h.known |= uint64_t{1} << f;
  }
  return h;
}

constexpr uint64_t kBig = 64 << 20;  // a budget nothing here comes near

}  // namespace

TEST_SUITE("cache") {
  TEST_CASE("hash and list: misses, hits, kinds") {
    Fixture f(kBig);
    CHECK(f.FindList(Media(1)) == std::nullopt);
    CHECK(f.FindHash(User(1)) == std::nullopt);

    f.PutList(Media(1), List(10, {5, 6, 7}));
    f.PutHash(User(1), Hash({{0, Value{int64_t{42}}}, {1, Value{std::string("de")}}}));
    std::optional<CachedList> l = f.FindList(Media(1));
    REQUIRE(l != std::nullopt);
    CHECK(l->members == std::vector<int64_t>{5, 6, 7});
    CHECK(l->asked == 10);
    std::optional<CachedHash> h = f.FindHash(User(1));
    REQUIRE(h != std::nullopt);
    CHECK(h->exists);
    CHECK(h->known == 0b11);
    CHECK(std::get<int64_t>(h->fields[0].value) == 42);
    CHECK(std::get<std::string>(h->fields[1].value) == "de");

    // Same id, other families: other keys.
    CHECK(f.FindList(Follow(1)) == std::nullopt);
    CHECK(f.FindHash({0, kItem, 1}) == std::nullopt);
    CHECK(f.entries() == 2);

    // A lookup counts nothing; RecordLookups does.
    CHECK(f.cache.stats().hits.load() == 0);
    f.cache.RecordLookups(3, 2);
    CHECK(f.cache.stats().hits.load() == 3);
    CHECK(f.cache.stats().misses.load() == 2);
  }

  TEST_CASE("a list replaces the older entry of its key") {
    Fixture f(kBig);
    f.PutList(Media(1), List(2, {1, 2}));
    f.PutList(Media(1), List(50, {1, 2, 3}));
    std::optional<CachedList> l = f.FindList(Media(1));
    REQUIRE(l != std::nullopt);
    CHECK(l->asked == 50);
    CHECK(l->members.size() == 3);
    CHECK(f.entries() == 1);
  }

  TEST_CASE("CachedList: complete and Covers") {
    CachedList full = List(10, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // maybe more in Redis
    CHECK_FALSE(full.complete());
    CHECK(full.Covers(0));
    CHECK(full.Covers(10));
    CHECK_FALSE(full.Covers(11));

    CachedList shorter = List(10, {1, 2, 3});  // the whole list
    CHECK(shorter.complete());
    CHECK(shorter.Covers(3));
    CHECK(shorter.Covers(1000));

    CachedList empty = List(5, {});  // the key does not exist or the list is empty
    CHECK(empty.complete());
    CHECK(empty.Covers(100));

    CachedList none = List(0, {});  // asked for nothing: knows nothing
    CHECK_FALSE(none.complete());
    CHECK(none.Covers(0));
    CHECK_FALSE(none.Covers(1));
  }

  TEST_CASE("ListRef: the same answers as the CachedList it holds") {
    Fixture f(kBig);
    int64_t id = 0;
    for (const CachedList& l : {List(10, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), List(10, {1, 2, 3}),
                                List(5, {}), List(0, {})}) {
      f.PutList(Media(++id), l);
      rankd::ListRef r = f.cache.FindList(Media(id));
      REQUIRE(r);
      for (uint32_t count : {0u, 1u, 3u, 5u, 10u, 11u, 1000u})
        CHECK(r.Covers(count) == l.Covers(count));
      CHECK(r.complete() == l.complete());
    }
  }

  // Entries keep up to 5 fields or members in their first cache line and spill the rest
  // (and strings over 7 bytes) to a heap block: every shape must come back as it went in.
  TEST_CASE("entries: values round-trip inline and spilled") {
    Fixture f(kBig);
    using State = CachedField::State;
    for (size_t nfields : {1u, 4u, 5u, 6u, 7u, 31u}) {
      CAPTURE(nfields);
      CachedHash in;
      in.fields.resize(32);
      for (size_t i = 0; i < nfields; ++i) {
        const size_t field = nfields == 31 ? i : 2 * i;  // gaps between known fields
        switch (i % 7) {
          case 0: in.fields.SetI64(field, -static_cast<int64_t>(i) - 1); break;
          case 1: in.fields.SetF64(field, 0.25 * static_cast<double>(i)); break;
          case 2: in.fields.SetStr(field, "short7!"); break;                // 7 bytes: inline
          case 3: in.fields.SetStr(field, std::string(9 + i, 'x')); break;  // spilled
          case 4: in.fields.SetBool(field, true); break;
          case 5: in.fields.SetNoValue(field, State::kMissing); break;
          case 6: in.fields.SetNoValue(field, State::kUnparsable); break;
        }
        in.known |= uint64_t{1} << field;
      }
      const CacheKey k = User(static_cast<int64_t>(nfields));
      f.PutHash(k, in);
      rankd::HashRef r = f.cache.FindHash(k);
      REQUIRE(r);
      CHECK(r.known() == in.known);
      for (uint64_t bits = in.known; bits != 0; bits &= bits - 1) {
        const auto field = static_cast<size_t>(std::countr_zero(bits));
        CAPTURE(field);
        CHECK(r.state(field) == in.fields.state(field));
        rankd::CachedFields out;
        out.resize(1);
        r.CopyField(field, out, 0);
        CHECK(out.state(0) == in.fields.state(field));
        CHECK(out.kind(0) == in.fields.kind(field));
        CHECK(out[0].value == in.fields[field].value);
      }
    }
    // Lists: members inline up to 5, then spilled; non-id positions always spilled.
    for (size_t n : {0u, 1u, 5u, 6u, 60u}) {
      CAPTURE(n);
      CachedList in;
      in.asked = 60;
      for (size_t i = 0; i < n; ++i) in.members.push_back(static_cast<int64_t>(i * 1000 + 7));
      for (size_t i = 1; i < n; i += 4) {
        in.members[i] = 0;
        in.bad.push_back(static_cast<uint32_t>(i));
      }
      f.PutList(Media(static_cast<int64_t>(100 + n)), in);
      std::optional<CachedList> out = f.FindList(Media(static_cast<int64_t>(100 + n)));
      REQUIRE(out != std::nullopt);
      CHECK(out->asked == 60);
      CHECK(out->members == std::vector<int64_t>(in.members.begin(), in.members.end()));
      CHECK(out->bad == in.bad);
    }
  }

  TEST_CASE("entries: a spill is charged, a hash with a field index of 32 or more is not kept") {
    Fixture f(kBig);
    f.PutList(Media(1), List(5, {1, 2, 3, 4, 5}));
    const int64_t inline_bytes = f.bytes();
    f.PutList(Media(2), List(60, std::vector<int64_t>(60, 9)));
    CHECK(f.bytes() - inline_bytes >= inline_bytes + 60 * 8);  // the entry + its spill

    CachedHash wide;
    wide.fields.resize(33);
    wide.fields.SetI64(32, 1);
    wide.known = uint64_t{1} << 32;
    f.PutHash(User(1), wide);
    CHECK(f.FindHash(User(1)) == std::nullopt);
  }

  TEST_CASE("hash fields merge into an entry with the same exists") {
    Fixture f(kBig);
    f.PutHash(User(7), Hash({{0, Value{int64_t{1}}}, {2, Value{2.5}}}));
    int64_t before = f.bytes();
    std::string long_text(200, 'x');
    f.PutHash(User(7), Hash({{1, Value{true}}, {2, Value{3.5}}, {4, Value{long_text}}}));
    std::optional<CachedHash> h = f.FindHash(User(7));
    REQUIRE(h != std::nullopt);
    CHECK(h->known == 0b10111);
    REQUIRE(h->fields.size() == 5);
    CHECK(std::get<int64_t>(h->fields[0].value) == 1);   // kept
    CHECK(std::get<bool>(h->fields[1].value));           // added
    CHECK(std::get<double>(h->fields[2].value) == 3.5);  // the newer read wins
    CHECK(std::get<std::string>(h->fields[4].value) == long_text);
    CHECK(f.entries() == 1);
    // Re-charged: more fields and a string on the heap.
    CHECK(f.bytes() >= before + 200);

    // A field whose state is not kValue merges too (it is known to be missing).
    CachedHash missing;
    missing.fields.resize(6);
    missing.fields.Set(5, CachedField{CachedField::State::kMissing, Value{}});
    missing.known = uint64_t{1} << 5;
    f.PutHash(User(7), std::move(missing));
    h = f.FindHash(User(7));
    REQUIRE(h != std::nullopt);
    CHECK(h->known == 0b110111);
    CHECK(h->fields[5].state == CachedField::State::kMissing);

    // The key vanished: another `exists` replaces the entry.
    f.PutHash(User(7), Hash({}, /*exists=*/false));
    h = f.FindHash(User(7));
    REQUIRE(h != std::nullopt);
    CHECK_FALSE(h->exists);
    CHECK(h->known == 0);
    CHECK(f.entries() == 1);
    // Charged anew, not added: a few cells are inline (in the entry's own block), so an
    // empty hash costs what the first small one did.
    CHECK(f.bytes() <= before);
  }

  TEST_CASE("TTL: the cap, a key's own TTL, and expiry at lookup") {
    Fixture f(kBig, /*ttl_cap_ms=*/1000);
    f.PutList(Media(1), List(5, {1}));        // the cap: 1000
    f.PutList(Media(2), List(5, {1}), 100);   // the key's TTL: 100
    f.PutList(Media(3), List(5, {1}), 5000);  // the key's TTL, capped: 1000
    f.PutList(Media(4), List(5, {1}), 0);     // expires now: not stored
    CHECK(f.entries() == 3);
    CHECK(f.FindList(Media(4)) == std::nullopt);

    f.now += 99;
    CHECK(f.FindList(Media(2)) != std::nullopt);
    f.now += 1;
    CHECK(f.FindList(Media(2)) == std::nullopt);
    CHECK(f.cache.stats().expirations.load() == 1);
    CHECK(f.entries() == 2);

    f.now += 899;  // 999 after the put
    CHECK(f.FindList(Media(1)) != std::nullopt);
    CHECK(f.FindList(Media(3)) != std::nullopt);
    f.now += 1;
    CHECK(f.FindList(Media(1)) == std::nullopt);
    CHECK(f.FindList(Media(3)) == std::nullopt);
    CHECK(f.cache.stats().expirations.load() == 3);
    CHECK(f.entries() == 0);
    CHECK(f.bytes() == 0);
  }

  TEST_CASE("a merged hash keeps the older entry's expiry") {
    Fixture f(kBig, /*ttl_cap_ms=*/1000);
    f.PutHash(User(1), Hash({{0, Value{int64_t{1}}}}));
    f.now += 600;
    f.PutHash(User(1), Hash({{1, Value{int64_t{2}}}}));
    f.now += 400;  // the first field's cap ran out
    CHECK(f.FindHash(User(1)) == std::nullopt);
    // An expired entry is not merged into: the new read starts afresh.
    f.PutHash(User(1), Hash({{0, Value{int64_t{1}}}}));
    f.now += 500;
    f.PutHash(User(1), Hash({{1, Value{int64_t{2}}}}));
    std::optional<CachedHash> h = f.FindHash(User(1));
    REQUIRE(h != std::nullopt);
    CHECK(h->known == 0b11);
  }

  TEST_CASE("eviction keeps the bytes within a budget 10x smaller than the data") {
    // The charge of one list of 4 members (all entries below are alike).
    Fixture probe(kBig);
    probe.PutList(Media(0), List(4, {1, 2, 3, 4}));
    const int64_t each = probe.bytes();
    CHECK(each > static_cast<int64_t>(sizeof(rankd::CacheEntry)));  // the entry + its slots

    const int working_set = 2000;
    const uint64_t budget = static_cast<uint64_t>(each) * working_set / 10;
    Fixture f(budget);
    const int hot = 50;  // looked up between every insert
    for (int i = 0; i < hot; ++i) f.PutList(Media(i), List(4, {1, 2, 3, 4}));
    for (int i = hot; i < working_set; ++i) {
      for (int h = 0; h < hot; ++h) {
        if (std::optional<CachedList> l = f.FindList(Media(h)); l == std::nullopt) {
          f.PutList(Media(h), List(4, {1, 2, 3, 4}));  // a miss is read and stored again
        }
      }
      f.PutList(Media(i), List(4, {1, 2, 3, 4}));
      REQUIRE(f.bytes() <= static_cast<int64_t>(budget));
    }
    CHECK(f.cache.stats().evictions.load() > 0);
    CHECK(f.entries() == f.bytes() / each);
    CHECK(f.entries() >= working_set / 10 - 1);
    // The hot keys survived the scan of cold ones: visited entries are passed over.
    for (int h = 0; h < hot; ++h) CHECK(f.FindList(Media(h)) != std::nullopt);
  }

  TEST_CASE("a large budget (entries in huge-page chunks): eviction reuses their cells") {
    const uint64_t budget = 32 << 20;
    Fixture f(budget);
    f.PutHash(User(0), Hash({{0, Value{int64_t{1}}}, {1, Value{std::string(100, 'u')}}}));
    const int64_t each = f.bytes();
    const int64_t n = 3 * static_cast<int64_t>(budget) / each;  // three budgets' worth
    for (int64_t i = 1; i < n; ++i) {
      f.PutHash(User(i), Hash({{0, Value{i}}, {1, Value{std::string(100, 'u')}}}));
      REQUIRE(f.bytes() <= static_cast<int64_t>(budget));
    }
    CHECK(f.cache.stats().evictions.load() > 0);
    CHECK(f.entries() == f.bytes() / each);
    for (int64_t i = n - 100; i < n; ++i) {  // the newest are there, intact
      std::optional<CachedHash> h = f.FindHash(User(i));
      REQUIRE(h != std::nullopt);
      CHECK(std::get<int64_t>(h->fields[0].value) == i);
      CHECK(std::get<std::string>(h->fields[1].value) == std::string(100, 'u'));
    }
    f.cache.Invalidate(0, "user:" + std::to_string(n - 1));
    CHECK(f.FindHash(User(n - 1)) == std::nullopt);
    f.cache.InvalidateAll(0);
    CHECK(f.entries() == 0);
    CHECK(f.bytes() == 0);
    f.PutList(Media(1), List(4, {1, 2, 3, 4}));  // freed cells serve again
    REQUIRE(f.FindList(Media(1)) != std::nullopt);
    CHECK(f.FindList(Media(1))->members == std::vector<int64_t>{1, 2, 3, 4});
  }

  TEST_CASE("SIEVE: unvisited entries go first, visited ones stay, no move on a hit") {
    Fixture probe(kBig);
    probe.PutList(Media(0), List(4, {1, 2, 3, 4}));
    const int64_t each = probe.bytes();
    const int n = 32;  // the cache holds exactly n entries
    Fixture f(static_cast<uint64_t>(each) * n);
    for (int i = 0; i < n; ++i) f.PutList(Media(i), List(4, {1, 2, 3, 4}));
    CHECK(f.entries() == n);
    CHECK(f.cache.stats().evictions.load() == 0);
    for (int i = 0; i < n; i += 2) REQUIRE(f.FindList(Media(i)) != std::nullopt);  // even

    for (int i = n; i < n + n / 2; ++i) f.PutList(Media(i), List(4, {1, 2, 3, 4}));
    CHECK(f.cache.stats().evictions.load() == n / 2);
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK((f.FindList(Media(i)) != std::nullopt) == (i % 2 == 0));
    }
    // The hand went once over the old entries (clearing the evens' bits) and stopped at
    // the first new one; the new entries were never passed over.
    for (int i = n; i < n + n / 2; ++i) CHECK(f.FindList(Media(i)) != std::nullopt);
  }

  TEST_CASE("SIEVE: the hand resumes where it stopped") {
    Fixture probe(kBig);
    probe.PutList(Media(0), List(4, {1, 2, 3, 4}));
    const int64_t each = probe.bytes();
    const int n = 16;  // the least an entry may be of the budget
    Fixture f(static_cast<uint64_t>(each) * n);
    for (int i = 0; i < n; ++i) f.PutList(Media(i), List(4, {1, 2, 3, 4}));
    f.FindList(Media(0));
    f.FindList(Media(1));
    f.PutList(Media(n), List(4, {1, 2, 3, 4}));  // the hand clears 0 and 1, evicts 2
    CHECK(f.FindList(Media(2)) == std::nullopt);
    for (int i = 3; i < n; ++i) f.FindList(Media(i));
    // The hand goes on from 3 (clearing 3..15) and takes the unvisited newest entry; LRU
    // would take 0, and a hand restarting at the tail would too.
    f.PutList(Media(n + 1), List(4, {1, 2, 3, 4}));
    CHECK(f.FindList(Media(n)) == std::nullopt);
    for (int i : {0, 1, 3, n - 1, n + 1}) {
      CAPTURE(i);
      CHECK(f.FindList(Media(i)) != std::nullopt);
    }
    CHECK(f.cache.stats().evictions.load() == 2);
  }

  TEST_CASE("an entry over 1/16 of the budget is not stored; budget 0 stores nothing") {
    Fixture probe(kBig);
    probe.PutList(Media(0), List(4, {1, 2, 3, 4}));
    const uint64_t each = static_cast<uint64_t>(probe.bytes());

    Fixture f(each * 16);
    f.PutList(Media(1), List(4, {1, 2, 3, 4}));  // exactly 1/16: stored
    CHECK(f.FindList(Media(1)) != std::nullopt);
    f.PutList(Media(2), List(40, std::vector<int64_t>(40, 7)));  // more members: not stored
    CHECK(f.FindList(Media(2)) == std::nullopt);
    // A too large value leaves the older entry of its key alone.
    f.PutList(Media(1), List(500, std::vector<int64_t>(500, 9)));
    std::optional<CachedList> l = f.FindList(Media(1));
    REQUIRE(l != std::nullopt);
    CHECK(l->asked == 4);
    CHECK(f.entries() == 1);
    CHECK(f.bytes() == static_cast<int64_t>(each));

    Fixture zero(0);
    zero.PutList(Media(1), List(1, {1}));
    zero.PutHash(User(1), Hash({}));
    CHECK(zero.FindList(Media(1)) == std::nullopt);
    CHECK(zero.FindHash(User(1)) == std::nullopt);
    CHECK(zero.entries() == 0);
    CHECK(zero.bytes() == 0);
  }

  TEST_CASE("Invalidate drops the entry and counts every key") {
    Fixture f(kBig);
    f.PutList(Follow(5), List(10, {1}));
    f.PutHash(User(5), Hash({{0, Value{int64_t{1}}}}));
    f.cache.Invalidate(0, "follow:5");
    CHECK(f.FindList(Follow(5)) == std::nullopt);
    CHECK(f.FindHash(User(5)) != std::nullopt);
    f.cache.Invalidate(0, "user:5");
    CHECK(f.FindHash(User(5)) == std::nullopt);
    f.cache.Invalidate(0, "user:6");     // not held
    f.cache.Invalidate(0, "session:1");  // never held
    CHECK(f.cache.stats().invalidations.load() == 4);
    CHECK(f.entries() == 0);
    CHECK(f.bytes() == 0);
  }

  TEST_CASE("an invalidation during a read: that key is not stored, the others are") {
    Fixture f(kBig);
    std::array keys{Media(1), Media(2), User(3)};
    ReadTicket t = f.cache.BeginRead(keys);
    f.cache.Invalidate(0, "media:1");
    f.cache.Invalidate(1, "media:2");  // another endpoint's key: not ours
    CHECK_FALSE(t.Storable(Media(1)));
    CHECK(t.Storable(Media(2)));
    CHECK(t.Storable(User(3)));

    // A read that began after the invalidation may store the key, while t is open.
    {
      ReadTicket later = f.cache.BeginRead(std::array{Media(1)});
      CHECK(later.Storable(Media(1)));
      CHECK_FALSE(t.Storable(Media(1)));
      f.cache.PutList(later, Media(1), List(3, {1}), std::nullopt);
      CHECK(f.FindList(Media(1)) != std::nullopt);
      f.cache.Invalidate(0, "media:1");
      CHECK_FALSE(later.Storable(Media(1)));
    }

    f.cache.PutList(t, Media(1), List(3, {1}), std::nullopt);
    f.cache.PutList(t, Media(2), List(3, {2}), std::nullopt);
    f.cache.PutHash(t, User(3), Hash({{0, Value{int64_t{3}}}}), std::nullopt);
    CHECK(f.FindList(Media(1)) == std::nullopt);
    CHECK(f.FindList(Media(2)) != std::nullopt);
    CHECK(f.FindHash(User(3)) != std::nullopt);
  }

  TEST_CASE("InvalidateAll during a read: nothing of it is stored") {
    Fixture f(kBig);
    f.PutList(Media(1, 0), List(3, {1}));
    f.PutList(Media(1, 1), List(3, {1}));
    std::array keys{Media(2, 1), User(2, 1)};
    ReadTicket t = f.cache.BeginRead(keys);
    f.cache.InvalidateAll(0);  // endpoint 0; t reads endpoint 1's keys
    CHECK(f.cache.stats().invalidations.load() == 1);
    CHECK_FALSE(t.Storable(Media(2, 1)));
    CHECK_FALSE(t.Storable(User(2, 1)));
    f.cache.PutList(t, Media(2, 1), List(3, {1}), std::nullopt);
    CHECK(f.FindList(Media(2, 1)) == std::nullopt);
    // Only endpoint 0's entries went.
    CHECK(f.FindList(Media(1, 0)) == std::nullopt);
    CHECK(f.FindList(Media(1, 1)) != std::nullopt);
    // Reads begun after it store again.
    f.PutList(Media(2, 1), List(3, {1}));
    CHECK(f.FindList(Media(2, 1)) != std::nullopt);
  }

  TEST_CASE("endpoints are separate") {
    Fixture f(kBig);
    f.PutHash(User(7, 0), Hash({{0, Value{int64_t{0}}}}));
    f.PutHash(User(7, 1), Hash({{0, Value{int64_t{1}}}}));
    CHECK(f.entries() == 2);
    CHECK(std::get<int64_t>(f.FindHash(User(7, 1))->fields[0].value) == 1);
    f.cache.Invalidate(1, "user:7");
    CHECK(f.FindHash(User(7, 1)) == std::nullopt);
    REQUIRE(f.FindHash(User(7, 0)) != std::nullopt);
    CHECK(std::get<int64_t>(f.FindHash(User(7, 0))->fields[0].value) == 0);
  }

  TEST_CASE("ForEachCacheKey: a key is matched to every family whose whole template fits") {
    using P = std::pair<uint32_t, int64_t>;
    auto keys = [](const std::vector<CacheFamily>& fams, std::string_view key) {
      std::vector<P> out;
      rankd::ForEachCacheKey(fams, 0, key, [&](const CacheKey& k) {
        out.push_back({k.family, k.id});
      });
      return out;
    };
    const auto demo = DemoFamilies();
    CHECK(keys(demo, "user:1") == std::vector<P>{{kUser, 1}});
    CHECK(keys(demo, "follow:0") == std::vector<P>{{kFollow, 0}});
    CHECK(keys(demo, "recs:-5") == std::vector<P>{{kRecs, -5}});
    CHECK(keys(demo, "media:9223372036854775807") == std::vector<P>{{kMedia, INT64_MAX}});
    CHECK(keys(demo, "item:-9223372036854775808") == std::vector<P>{{kItem, INT64_MIN}});
    for (const char* bad :
         {"", "user:", "user", "user:+1", "user: 1", "user:1 ", "user:1a",
          "user:9223372036854775808", "item:-9223372036854775809", "user:-", "users:1", "User:1",
          "feed:1", ":1", "user:1:2", "item:0x10", "media:1.5"}) {
      CAPTURE(bad);
      CHECK(keys(demo, bad).empty());
    }
    // Templates with text after {id}, overlapping prefixes and str ids.
    const std::vector<CacheFamily> fams = {
        {10, "p:", ":a", true}, {11, "p:", "", true}, {12, "p:x", ":a", false}};
    const int64_t ab = rankd::StrIdKey("ab");
    CHECK(keys(fams, "p:ab:a") == std::vector<P>{{10, ab}, {11, rankd::StrIdKey("ab:a")}});
    CHECK(keys(fams, "p:x7:a") ==
          std::vector<P>{{10, rankd::StrIdKey("x7")}, {11, rankd::StrIdKey("x7:a")}, {12, 7}});
    CHECK(keys(fams, "p::a") == std::vector<P>{{11, rankd::StrIdKey(":a")}});  // empty id: not 10
    CHECK(rankd::StrIdKey("ab") == ab);
    CHECK(rankd::StrIdKey("ab") != rankd::StrIdKey("ba"));
    CHECK(rankd::StrIdKey("") != rankd::StrIdKey(std::string_view("\0", 1)));
  }

  TEST_CASE("blobs: an untracked family's entries live their max age, whatever Redis says") {
    Fixture f(kBig, /*ttl_cap_ms=*/5000);
    constexpr uint32_t kCounts = 20;
    auto fams = DemoFamilies();
    fams.push_back({kCounts, "cnt:", "", false, /*tracked=*/false});
    f.cache.SetFamilies(fams);
    const CacheKey k{0, kCounts, 7};
    const std::string bytes = std::string("\x01\0\x02", 3) + std::string(300, 'z');
    f.cache.PutBlob(k, bytes, 300);
    rankd::BlobRef b = f.cache.FindBlob(k);
    REQUIRE(b);
    CHECK(b.bytes() == bytes);
    CHECK(reinterpret_cast<uintptr_t>(b.bytes().data()) % 16 == 0);
    CHECK_FALSE(f.cache.FindHash(k));  // a lookup of another kind misses
    CHECK_FALSE(f.cache.FindList(k));
    // Redis's invalidation of the key is ignored (counted, as every key is).
    f.cache.Invalidate(0, "cnt:7");
    CHECK(f.cache.FindBlob(k));
    CHECK(f.cache.stats().invalidations.load() == 1);
    f.now += 299;
    CHECK(f.cache.FindBlob(k));
    f.now += 1;
    CHECK_FALSE(f.cache.FindBlob(k));
    CHECK(f.entries() == 0);
    CHECK(f.cache.stats().expirations.load() == 1);
    // The TTL cap still bounds it; a max age of 0 stores nothing; a new blob replaces.
    f.cache.PutBlob(k, "a", 60000);
    f.cache.PutBlob(k, "bc", 60000);
    CHECK(f.cache.FindBlob(k).bytes() == "bc");
    CHECK(f.entries() == 1);
    f.now += 5000;
    CHECK_FALSE(f.cache.FindBlob(k));
    f.cache.PutBlob(k, "a", 0);
    CHECK(f.entries() == 0);
    // A tracked family's blob is dropped by its key's invalidation; InvalidateAll drops all.
    f.cache.PutBlob(User(3), "u", 1000);
    f.cache.Invalidate(0, "user:3");
    CHECK_FALSE(f.cache.FindBlob(User(3)));
    f.cache.PutBlob(k, "a", 1000);
    f.cache.InvalidateAll(0);
    CHECK_FALSE(f.cache.FindBlob(k));
    // Not stored for a family the cache does not hold, nor past 1/16 of the budget.
    f.cache.PutBlob({0, 99, 1}, "a", 1000);
    Fixture small(64 * 1024);
    small.cache.SetFamilies(fams);
    small.cache.PutBlob(k, std::string(8192, 'x'), 1000);
    CHECK(f.entries() == 0);
    CHECK(small.entries() == 0);
    small.cache.PutBlob(k, std::string(1024, 'x'), 1000);
    CHECK(small.entries() == 1);
    CHECK(small.bytes() >= 1024);
  }

  TEST_CASE(
      "SetFamilies drops the entries of families no longer held, and no earlier read stores") {
    Fixture f(kBig);
    CachedList l;
    l.asked = 1;
    l.members.push_back(5);
    f.PutList(Media(1), l);
    f.PutList(Follow(1), l);
    ReadTicket t = f.cache.BeginRead(std::array{Media(2)});
    auto fams = DemoFamilies();
    fams.erase(fams.begin() + 1);  // follow goes
    f.cache.SetFamilies(fams);
    CHECK(f.FindList(Follow(1)) == std::nullopt);
    CHECK(f.FindList(Media(1)) != std::nullopt);
    f.cache.PutList(t, Media(2), l, std::nullopt);  // begun before: not stored
    CHECK(f.FindList(Media(2)) == std::nullopt);
    f.PutList(Follow(3), l);  // a family not held is never stored
    CHECK(f.FindList(Follow(3)) == std::nullopt);
  }

  TEST_CASE("lists with str members and scores round-trip through an entry") {
    Fixture f(kBig);
    for (size_t n : {size_t{0}, size_t{3}, size_t{5}, size_t{6}, size_t{40}}) {
      CAPTURE(n);
      CachedList l;
      l.asked = static_cast<uint32_t>(n + 1);
      l.str_members = true;
      for (size_t i = 0; i < n; ++i) {
        l.AddStr(i == 2 ? std::string() : "member-" + std::to_string(i * 7919));
        l.scores.push_back(i == 1 ? std::numeric_limits<double>::infinity()
                                  : 0.5 * static_cast<double>(i));
      }
      if (n > 2) l.bad.push_back(2);
      f.PutList(Media(static_cast<int64_t>(100 + n)), l);
      auto got = f.FindList(Media(static_cast<int64_t>(100 + n)));
      REQUIRE(got);
      CHECK(got->str_members);
      CHECK(got->members.size() == n);
      CHECK(got->scores == l.scores);
      CHECK(got->bad == l.bad);
      for (size_t i = 0; i < n; ++i) CHECK(got->str(i) == l.str(i));
    }
  }

  TEST_CASE("tickets: moved-from ones do nothing, moves end the overwritten read") {
    Fixture f(kBig);
    ReadTicket empty;
    CHECK_FALSE(empty.Storable(Media(1)));
    f.cache.PutList(empty, Media(1), List(3, {1}), std::nullopt);
    CHECK(f.FindList(Media(1)) == std::nullopt);

    ReadTicket b;
    {
      ReadTicket a = f.cache.BeginRead(std::array{Media(1)});
      b = std::move(a);
      CHECK_FALSE(a.Storable(Media(1)));  // NOLINT(bugprone-use-after-move): on purpose
      ReadTicket c(std::move(a));         // moving a moved-from ticket: still nothing
      CHECK_FALSE(c.Storable(Media(1)));
    }  // a and c end no read: b's key is still being read
    CHECK(b.Storable(Media(1)));
    f.cache.Invalidate(0, "media:1");
    CHECK_FALSE(b.Storable(Media(1)));  // the mark reached b's pending key

    ReadTicket d = f.cache.BeginRead(std::array{Media(2), Media(3)});
    ReadTicket e(std::move(d));
    CHECK(e.Storable(Media(2)));
    e = std::move(b);  // ends e's read of 2 and 3; e now reads 1
    CHECK_FALSE(e.Storable(Media(1)));
    auto& self = e;
    e = std::move(self);  // self-move: no effect
    CHECK_FALSE(e.Storable(Media(1)));

    // Two tickets on one key: the key stays pending until both ended.
    ReadTicket x = f.cache.BeginRead(std::array{Media(9)});
    { ReadTicket y = f.cache.BeginRead(std::array{Media(9)}); }
    f.cache.Invalidate(0, "media:9");
    CHECK_FALSE(x.Storable(Media(9)));
  }

  TEST_CASE("stats: the gauges are exact and return to 0") {
    auto stats = [] {
      Fixture f(kBig);
      std::vector<int64_t> charged;
      auto put = [&](auto&& fn) {
        int64_t before = f.bytes();
        fn();
        charged.push_back(f.bytes() - before);
      };
      for (int i = 0; i < 100; ++i) {
        put([&] { f.PutList(Media(i), List(100, std::vector<int64_t>(i, i))); });
        put([&] {
          f.PutHash(User(i), Hash({{static_cast<size_t>(i % 7), Value{std::string(i, 'a')}}}));
        });
      }
      CHECK(f.entries() == 200);
      int64_t sum = 0;
      for (int64_t c : charged) sum += c;
      CHECK(f.bytes() == sum);
      // Strings past the inline buffer cost their heap.
      Fixture g(kBig);
      g.PutHash(User(1), Hash({{0, Value{std::string(3, 'a')}}}));
      g.PutHash(User(2), Hash({{0, Value{std::string(300, 'a')}}}));
      CHECK(g.bytes() > 0);
      int64_t both = g.bytes();
      g.cache.Invalidate(0, "user:2");
      CHECK(both - g.bytes() >= g.bytes() + 300);  // user:2 costs user:1 + 300 and more

      // Merges re-charge, replacements too; then everything goes.
      for (int i = 0; i < 100; i += 3)
        f.PutHash(User(i), Hash({{10, Value{std::string(50, 'b')}}}));
      for (int i = 0; i < 100; i += 5) f.PutList(Media(i), List(3, {1, 2, 3}));
      CHECK(f.entries() == 200);
      for (int i = 0; i < 50; ++i) {
        f.cache.Invalidate(0, "media:" + std::to_string(i));
        f.cache.Invalidate(0, "user:" + std::to_string(i));
      }
      CHECK(f.entries() == 100);
      CHECK(f.bytes() > 0);
      f.cache.InvalidateAll(0);
      CHECK(f.entries() == 0);
      CHECK(f.bytes() == 0);
      CHECK(f.cache.stats().invalidations.load() == 101);

      // The stats outlive the cache; its entries leave the gauges with it.
      f.PutList(Media(1), List(3, {1}));
      CHECK(f.entries() == 1);
      return f.cache.shared_stats();
    }();
    CHECK(stats->entries.load() == 0);
    CHECK(stats->bytes.load() == 0);
  }
}
