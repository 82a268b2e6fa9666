#include "redis/seed.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/mix.h"
#include "redis/cluster_slots.h"
#include "redis/reply.h"

namespace rankd {

namespace {

// ---- deterministic randomness ------------------------------------------------------

enum Stream : uint64_t { kPermutation = 1, kProfile, kFollow, kItems, kRecs, kSeen };

// splitmix64, one stream per (seed, user, purpose): a user's data does not depend on
// how many numbers other users drew.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t user, Stream stream)
      : s_(Mix64(seed * 0x9e3779b97f4a7c15ULL + Mix64(user * 0x100000001b3ULL + stream))) {}
  uint64_t Next() { return SplitMix64(s_); }
  // Uniform in [0, n); the modulo bias (< n / 2^64) does not matter here.
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }
  // Uniform in (0, 1], from 53 bits: plain IEEE arithmetic, same everywhere.
  double Unit() { return static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53; }
  // Index drawn with the given integer weights.
  template <size_t N>
  size_t Weighted(const int (&w)[N]) {
    int total = std::accumulate(w, w + N, 0);
    int64_t x = Below(total);
    for (size_t i = 0; i < N; ++i) {
      if (x < w[i]) return i;
      x -= w[i];
    }
    return N - 1;
  }

 private:
  uint64_t s_;
};

// ---- the shape of the data ----------------------------------------------------------

struct Country {
  const char* code;
  const char* lang;
};
constexpr Country kCountries[] = {{"US", "en"}, {"IN", "hi"}, {"BR", "pt"}, {"GB", "en"},
                                  {"DE", "de"}, {"FR", "fr"}, {"JP", "ja"}, {"MX", "es"},
                                  {"CA", "en"}, {"ES", "es"}};
constexpr int kCountryWeights[] = {34, 14, 10, 9, 8, 7, 6, 5, 4, 3};
constexpr const char* kCategories[] = {"entertainment", "music", "sports", "news",
                                       "gaming",        "food",  "travel", "tech"};
constexpr int kCategoryWeights[] = {22, 18, 15, 12, 10, 9, 8, 6};
// age_s: minutes, hours, days or weeks old.
constexpr int64_t kAgeBucketLo[] = {60, 3600, 86400, 604800};
constexpr int64_t kAgeBucketHi[] = {3600, 86400, 604800, 1209600};
constexpr int kAgeBucketWeights[] = {20, 35, 35, 10};
constexpr int64_t kMaxLikes = 10'000'000;

// Follow popularity: Zipf (s = 1) over ranks, ranks mapped to users by a seeded shuffle
// so that the popular authors are not simply the low uids.
class Popularity {
 public:
  Popularity(uint64_t seed, int64_t users)
      : cdf_(static_cast<size_t>(users)), by_rank_(static_cast<size_t>(users)) {
    double sum = 0;
    for (int64_t r = 0; r < users; ++r)
      cdf_[static_cast<size_t>(r)] = sum += 1.0 / static_cast<double>(r + 1);
    std::iota(by_rank_.begin(), by_rank_.end(), int64_t{1});
    Rng rng(seed, 0, kPermutation);
    for (int64_t i = users - 1; i > 0; --i)
      std::swap(by_rank_[static_cast<size_t>(i)], by_rank_[static_cast<size_t>(rng.Below(i + 1))]);
  }
  int64_t Draw(Rng& rng) const {
    double x = rng.Unit() * cdf_.back();
    size_t r = static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), x) - cdf_.begin());
    return by_rank_[std::min(r, by_rank_.size() - 1)];
  }
  int64_t ByRank(int64_t r) const { return by_rank_[static_cast<size_t>(r)]; }

 private:
  std::vector<double> cdf_;
  std::vector<int64_t> by_rank_;
};

std::string Dec(int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

// Distinct draws from `draw` until `want` are collected or the attempts run out.
template <class F>
std::vector<int64_t> Distinct(int64_t want, F draw) {
  std::vector<int64_t> out;
  std::unordered_set<int64_t> seen;
  out.reserve(static_cast<size_t>(want));
  for (int64_t tries = 0; static_cast<int64_t>(out.size()) < want && tries < 20 * want + 1000;
       ++tries) {
    int64_t v = draw();
    if (v > 0 && seen.insert(v).second) out.push_back(v);
  }
  return out;
}

// ---- the writer ---------------------------------------------------------------------

// Pipelined synchronous writer: appends commands and reads the replies back every
// `batch` commands, so a batch costs one round trip.
class Writer {
 public:
  // One context per server; `slot_server[slot]` picks a command's server by its key's
  // slot (a cluster), or is empty (one server).
  Writer(std::vector<redisContext*> servers, std::vector<int16_t> slot_server, int batch)
      : servers_(std::move(servers)),
        slot_server_(std::move(slot_server)),
        pending_(servers_.size(), 0),
        batch_(batch) {}

  Status Send(const std::vector<std::string>& args) {
    argv_.clear();
    lens_.clear();
    for (const auto& a : args) {
      argv_.push_back(a.data());
      lens_.push_back(a.size());
    }
    size_t server = slot_server_.empty()
                        ? 0
                        : static_cast<size_t>(slot_server_[static_cast<size_t>(KeySlot(args[1]))]);
    redisContext* c = servers_[server];
    if (redisAppendCommandArgv(c, static_cast<int>(argv_.size()), argv_.data(), lens_.data()) !=
        REDIS_OK)
      return Fail(
          Error::Unavailable(std::string("seed: cannot queue ") + args[0] + ": " + c->errstr));
    ++pending_[server];
    ++total_pending_;
    ++commands_;
    if (total_pending_ >= batch_) return Flush();
    return {};
  }

  // Writes every server's commands first, then reads the replies: one round trip,
  // whatever the number of servers.
  Status Flush() {
    if (total_pending_ == 0) return {};
    ++round_trips_;
    for (redisContext* c : servers_) {
      for (int done = 0; !done;)
        if (redisBufferWrite(c, &done) != REDIS_OK)
          return Fail(Error::Unavailable(std::string("seed: connection lost: ") + c->errstr));
    }
    for (size_t i = 0; i < servers_.size(); ++i) {
      redisContext* c = servers_[i];
      for (; pending_[i] > 0; --pending_[i]) {
        void* raw = nullptr;
        if (redisGetReply(c, &raw) != REDIS_OK)
          return Fail(Error::Unavailable(std::string("seed: connection lost: ") + c->errstr));
        std::unique_ptr<redisReply, void (*)(void*)> r(static_cast<redisReply*>(raw),
                                                       freeReplyObject);
        if (r->type == REDIS_REPLY_ERROR)
          return Fail(
              Error::Backend("seed: Redis refused a write: " + std::string(r->str, r->len)));
      }
    }
    total_pending_ = 0;
    return {};
  }

  int64_t commands() const { return commands_; }
  int64_t round_trips() const { return round_trips_; }

 private:
  std::vector<redisContext*> servers_;
  std::vector<int16_t> slot_server_;
  std::vector<int> pending_;
  int batch_;
  int total_pending_ = 0;
  int64_t commands_ = 0;
  int64_t round_trips_ = 0;
  std::vector<const char*> argv_;
  std::vector<size_t> lens_;
};

Status CheckOptions(const SeedOptions& o) {
  auto bad = [](std::string m) { return Fail(Error::InvalidParam("seed: " + std::move(m))); };
  if (o.users < 1 || o.users > 100'000'000) return bad("--users must be in 1..100000000");
  if (o.follows < 0 || o.follows > 100000) return bad("--follows must be in 0..100000");
  if (o.media < 1 || o.media > 10000) return bad("--media must be in 1..10000");
  if (o.recs < 0 || o.recs > 100000) return bad("--recs must be in 0..100000");
  if (o.seen < 0 || o.seen > 100000) return bad("--seen must be in 0..100000");
  if (o.pipeline < 1) return bad("pipeline must be positive");
  return {};
}

// One synchronous command outside the pipeline (handshake, DBSIZE, FLUSHDB).
Result<std::unique_ptr<redisReply, void (*)(void*)>> Call(redisContext* c, const std::string& where,
                                                          std::vector<std::string> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* raw = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (raw == nullptr)
    return Fail(Error::Unavailable("seed: " + where + ": " + args[0] + " failed: " + c->errstr));
  std::unique_ptr<redisReply, void (*)(void*)> r(raw, freeReplyObject);
  if (r->type == REDIS_REPLY_ERROR)
    return Fail(Error::Backend("seed: " + where + ": " + args[0] +
                               " failed: " + std::string(r->str, r->len)));
  return r;
}

}  // namespace

std::string SeedSummary::OneLine() const {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", seconds);
  return "seeded " + std::to_string(users) + " users, " + std::to_string(items) + " items, " +
         std::to_string(follow_edges) + " follows, " + std::to_string(recs) + " recs, " +
         std::to_string(seen) + " seen ids in " + secs + " s (" + std::to_string(commands) +
         " commands, " + std::to_string(round_trips) + " round trips)";
}

namespace {

using RedisPtr = std::unique_ptr<redisContext, void (*)(redisContext*)>;

// Connects, authenticates and selects the database; an empty database, or one that
// --flush allows emptying, is ready to seed.
Result<RedisPtr> OpenEmptyDb(const RedisEndpoint& ep, bool flush, const std::string& where) {
  timeval tv{5, 0};
  RedisPtr ctx(redisConnectWithTimeout(ep.host.c_str(), ep.port, tv), redisFree);
  if (!ctx || ctx->err)
    return Fail(Error::Unavailable("seed: cannot connect to " + where + ": " +
                                   (ctx ? ctx->errstr : "out of memory")));
  redisContext* c = ctx.get();
  if (!ep.password.empty()) {
    auto r = ep.user.empty() ? Call(c, where, {"AUTH", ep.password})
                             : Call(c, where, {"AUTH", ep.user, ep.password});
    if (!r) return Fail(r.error());
  }
  if (ep.db != 0)
    if (auto r = Call(c, where, {"SELECT", std::to_string(ep.db)}); !r) return Fail(r.error());
  auto size = Call(c, where, {"DBSIZE"});
  if (!size) return Fail(size.error());
  if ((*size)->integer > 0) {
    if (!flush)
      return Fail(Error::InvalidParam("seed: database " + where + " holds " +
                                      std::to_string((*size)->integer) +
                                      " keys; refusing to write into it without --flush"));
    if (auto r = Call(c, where, {"FLUSHDB"}); !r) return Fail(r.error());
  }
  return ctx;
}

// Writes one user's keys at a time. Each kind of data draws from its own stream
// (Rng(seed, user, kind)), so the data set depends only on the options, never on the
// order or the split of this code.
class UserSeeder {
 public:
  UserSeeder(const SeedOptions& o, Writer& w)
      : o_(o),
        w_(w),
        pop_(o.seed, o.users),
        n_(o.users),
        m_(o.media),
        follows_(std::min(o.follows, o.users - 1)),
        total_items_(o.users * o.media),
        p_(o.endpoint.prefix) {}

  Status Seed(int64_t u) {
    auto home = Profile(u);
    if (!home) return Fail(home.error());
    auto followees = Follows(u);
    if (!followees) return Fail(followees.error());
    if (auto s = Media(u, **home); !s) return s;
    auto recs = Recs(u);
    if (!recs) return Fail(recs.error());
    if (auto s = Seen(u, *followees, *recs); !s) return s;
    sum_.users += 1;
    return {};
  }

  SeedSummary& summary() { return sum_; }

 private:
  // `CMD key ids...` (RPUSH or SADD); nothing for no ids.
  Status PushIds(const char* cmd, const std::string& key, const std::vector<int64_t>& ids) {
    if (ids.empty()) return {};
    args_ = {cmd, key};
    for (int64_t v : ids) args_.push_back(Dec(v));
    return w_.Send(args_);
  }

  Result<const Country*> Profile(int64_t u) {
    Rng prof(o_.seed, static_cast<uint64_t>(u), kProfile);
    const Country& home = kCountries[prof.Weighted(kCountryWeights)];
    const char* lang = prof.Below(100) < 80 ? home.lang : "en";
    int64_t age = 13 + prof.Below(23) + prof.Below(23) + prof.Below(23);  // a bell over 13..79
    int64_t premium = prof.Below(100) < 15 ? 1 : 0;
    if (auto s = w_.Send({"HSET", p_ + "user:" + Dec(u), "country", home.code, "lang", lang, "age",
                          Dec(age), "premium", Dec(premium)});
        !s)
      return Fail(s.error());
    return &home;
  }

  // Zipf-popular authors, never oneself.
  Result<std::vector<int64_t>> Follows(int64_t u) {
    Rng fol(o_.seed, static_cast<uint64_t>(u), kFollow);
    std::vector<int64_t> followees = Distinct(follows_, [&] {
      int64_t v = pop_.Draw(fol);
      return v == u ? 0 : v;
    });
    for (int64_t r = 0; static_cast<int64_t>(followees.size()) < follows_ && r < n_; ++r) {
      int64_t v = pop_.ByRank(r);  // top up (only when follows is close to users)
      if (v != u && std::find(followees.begin(), followees.end(), v) == followees.end())
        followees.push_back(v);
    }
    if (auto s = PushIds("RPUSH", p_ + "follow:" + Dec(u), followees); !s) return Fail(s.error());
    sum_.follow_edges += static_cast<int64_t>(followees.size());
    return followees;
  }

  // The user's media list (newest first) and one hash per item.
  Status Media(int64_t u, const Country& home) {
    Rng items(o_.seed, static_cast<uint64_t>(u), kItems);
    std::vector<int64_t> ages(static_cast<size_t>(m_));
    for (auto& a : ages) {
      size_t b = items.Weighted(kAgeBucketWeights);
      a = kAgeBucketLo[b] + items.Below(kAgeBucketHi[b] - kAgeBucketLo[b]);
    }
    std::sort(ages.begin(), ages.end());
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < m_; ++k) ids.push_back(DemoItemId(u, k, m_));
    if (auto s = PushIds("RPUSH", p_ + "media:" + Dec(u), ids); !s) return s;
    for (int64_t k = 0; k < m_; ++k) {
      // Likes: Pareto tail (alpha = 1) from one uniform draw: P(likes > x) = 20/(x+20).
      int64_t likes = std::min<int64_t>(kMaxLikes, static_cast<int64_t>(20.0 / items.Unit()) - 20);
      const char* category = kCategories[items.Weighted(kCategoryWeights)];
      const char* country =
          items.Below(100) < 75 ? home.code : kCountries[items.Weighted(kCountryWeights)].code;
      int64_t milli = (items.Below(1001) + items.Below(1001)) / 2;  // quality, 3 decimals
      char quality[8];
      std::snprintf(quality, sizeof quality, "%d.%03d", static_cast<int>(milli / 1000),
                    static_cast<int>(milli % 1000));
      int64_t nsfw = items.Below(1000) < 20 ? 1 : 0;
      if (auto s =
              w_.Send({"HSET", p_ + "item:" + Dec(DemoItemId(u, k, m_)), "author", Dec(u), "likes",
                       Dec(likes), "age_s", Dec(ages[static_cast<size_t>(k)]), "category", category,
                       "country", country, "quality", quality, "nsfw", Dec(nsfw)});
          !s)
        return s;
    }
    sum_.items += m_;
    return {};
  }

  // Items of popular authors, newer ones more likely; best first.
  Result<std::vector<int64_t>> Recs(int64_t u) {
    Rng rec(o_.seed, static_cast<uint64_t>(u), kRecs);
    std::vector<int64_t> recs = Distinct(std::min(o_.recs, total_items_), [&] {
      int64_t author = pop_.Draw(rec);
      int64_t k = std::min(rec.Below(m_), rec.Below(m_));
      return DemoItemId(author, k, m_);
    });
    if (auto s = PushIds("RPUSH", p_ + "recs:" + Dec(u), recs); !s) return Fail(s.error());
    sum_.recs += static_cast<int64_t>(recs.size());
    return recs;
  }

  // A third from the follow feed (newest items of the first followees), a third from the
  // top recs, the rest anywhere, so that seen-filtering has work to do.
  Status Seen(int64_t u, const std::vector<int64_t>& followees, const std::vector<int64_t>& recs) {
    Rng see(o_.seed, static_cast<uint64_t>(u), kSeen);
    auto below = [&see](size_t n) {
      return static_cast<size_t>(see.Below(static_cast<int64_t>(n)));
    };
    std::vector<int64_t> seen = Distinct(std::min(o_.seen, total_items_), [&]() -> int64_t {
      int64_t kind = see.Below(3);
      if (kind == 0 && !followees.empty()) {
        int64_t f = followees[below(std::min<size_t>(20, followees.size()))];
        return DemoItemId(f, see.Below(std::min<int64_t>(5, m_)), m_);
      }
      if (kind == 1 && !recs.empty()) return recs[below(std::max<size_t>(1, recs.size() / 2))];
      return 1 + see.Below(total_items_);
    });
    if (auto s = PushIds("SADD", p_ + "seen:" + Dec(u), seen); !s) return s;
    sum_.seen += static_cast<int64_t>(seen.size());
    return {};
  }

  const SeedOptions& o_;
  Writer& w_;
  Popularity pop_;
  const int64_t n_, m_, follows_, total_items_;
  const std::string& p_;
  SeedSummary sum_;
  std::vector<std::string> args_;  // reused: one allocation for every list command
};

}  // namespace

namespace {

std::string WhereOf(const RedisEndpoint& ep) {
  return ep.host + ":" + std::to_string(ep.port) + "/" + std::to_string(ep.db);
}

// The servers to write to: the endpoint itself, or every master of its cluster (found
// through its first seed that answers CLUSTER SLOTS), each empty or emptied; and, for a
// cluster, which of them owns each slot.
struct Servers {
  std::vector<RedisPtr> contexts;
  std::vector<int16_t> slot_server;
};

Result<Servers> OpenServers(const RedisEndpoint& ep, bool flush) {
  Servers out;
  if (!ep.is_cluster()) {
    auto ctx = OpenEmptyDb(ep, flush, WhereOf(ep));
    if (!ctx) return Fail(ctx.error());
    out.contexts.push_back(std::move(*ctx));
    return out;
  }
  std::optional<SlotMap> map;
  std::string why;
  for (const auto& seed : ep.cluster_seeds) {
    RedisEndpoint node = ep.AtNode(seed);
    timeval tv{5, 0};
    RedisPtr ctx(redisConnectWithTimeout(node.host.c_str(), node.port, tv), redisFree);
    if (!ctx || ctx->err) {
      why = "cannot connect to " + WhereOf(node) + ": " + (ctx ? ctx->errstr : "out of memory");
      continue;
    }
    if (!node.password.empty()) {
      auto r = node.user.empty()
                   ? Call(ctx.get(), WhereOf(node), {"AUTH", node.password})
                   : Call(ctx.get(), WhereOf(node), {"AUTH", node.user, node.password});
      if (!r) return Fail(r.error());
    }
    auto slots = Call(ctx.get(), WhereOf(node), {"CLUSTER", "SLOTS"});
    if (!slots) return Fail(slots.error());
    auto m = SlotMap::FromClusterSlots(RedisReply::FromHiredis(slots->get()), seed);
    if (!m) return Fail(Error::Backend("seed: " + WhereOf(node) + ": " + m.error().message));
    map = std::move(*m);
    break;
  }
  if (!map) return Fail(Error::Unavailable("seed: " + why));
  out.slot_server.assign(kClusterSlots, -1);
  for (const auto& range : map->ranges()) {
    const RedisAddress& master = map->nodes()[static_cast<size_t>(range.master)];
    int16_t server = -1;
    for (size_t i = 0; i < out.contexts.size(); ++i)
      if (out.contexts[i]->tcp.port == master.port && out.contexts[i]->tcp.host == master.host)
        server = static_cast<int16_t>(i);
    if (server < 0) {
      RedisEndpoint node = ep.AtNode(master);
      auto ctx = OpenEmptyDb(node, flush, WhereOf(node));
      if (!ctx) return Fail(ctx.error());
      out.contexts.push_back(std::move(*ctx));
      server = static_cast<int16_t>(out.contexts.size() - 1);
    }
    std::fill(out.slot_server.begin() + range.first, out.slot_server.begin() + range.last + 1,
              server);
  }
  if (std::find(out.slot_server.begin(), out.slot_server.end(), -1) != out.slot_server.end())
    return Fail(Error::Unavailable("seed: the cluster does not serve every slot"));
  return out;
}

}  // namespace

Result<SeedSummary> SeedDemoData(const SeedOptions& o) {
  if (auto ok = CheckOptions(o); !ok) return Fail(ok.error());
  auto t0 = std::chrono::steady_clock::now();
  auto servers = OpenServers(o.endpoint, o.flush);
  if (!servers) return Fail(servers.error());
  std::vector<redisContext*> contexts;
  for (auto& c : servers->contexts) contexts.push_back(c.get());
  Writer w(std::move(contexts), std::move(servers->slot_server), o.pipeline);
  UserSeeder seeder(o, w);
  for (int64_t u = 1; u <= o.users; ++u)
    if (auto s = seeder.Seed(u); !s) return Fail(s.error());
  if (auto s = w.Flush(); !s) return Fail(s.error());
  SeedSummary sum = seeder.summary();
  sum.commands = w.commands();
  sum.round_trips = w.round_trips();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace rankd
