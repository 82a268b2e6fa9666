#include "demo/seed.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "core/mix.h"
#include "events/counter_write.h"
#include "events/shard_events.h"
#include "events/zset_marks.h"
#include "plan/schema.h"
#include "redis/cluster_slots.h"
#include "redis/server_pool.h"
#include "redis/shard_clients.h"
#include "sched/shard_runtime.h"

namespace rankd {

namespace {

// ---- deterministic randomness ------------------------------------------------------

enum Stream : uint64_t {
  kPermutation = 1,
  kProfile,
  kFollow,
  kItems,
  kRecs,
  kSeen,
  kItemPermutation,
  kEvents,
  kTaste,
  kEmbBasis,
  kEmbNoise
};

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

// Follow popularity: Zipf (s = 1) over ranks, ranks mapped to ids 1..n by a seeded shuffle
// (`stream`) so that the popular authors (or items) are not simply the low ids.
class Popularity {
 public:
  Popularity(uint64_t seed, int64_t n, Stream stream = kPermutation)
      : cdf_(static_cast<size_t>(n)), by_rank_(static_cast<size_t>(n)) {
    double sum = 0;
    for (int64_t r = 0; r < n; ++r)
      cdf_[static_cast<size_t>(r)] = sum += 1.0 / static_cast<double>(r + 1);
    std::iota(by_rank_.begin(), by_rank_.end(), int64_t{1});
    Rng rng(seed, 0, stream);
    for (int64_t i = n - 1; i > 0; --i)
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

// ---- embeddings ---------------------------------------------------------------------
//
// A hidden low-rank structure, so that similarity means something (docs/vectors.md, "The
// demo"): kTopics latent topics (one per category), each a fixed random direction of the
// vec:kEmbDim space (the basis). Every author has a taste, a mixture of two topics; an item
// is half its category's topic and half its author's taste, plus a little noise; a user is
// half their own taste and half the mean taste of whom they follow. All in plain IEEE
// arithmetic (no libm but sqrt), so a seed gives the same bytes everywhere.

constexpr int kTopics = 8;   // = std::size(kCategories)
constexpr int kEmbDim = 32;  // the demo schema's item_emb and user_emb: vec:32
constexpr double kNoiseScale = 0.05;
static_assert(kTopics == std::size(kCategories));
using Mixture = std::array<double, kTopics>;

// Roughly standard normal: the sum of four uniforms, centred, scaled to variance 1.
double Normalish(Rng& r) {
  return (r.Unit() + r.Unit() + r.Unit() + r.Unit() - 2.0) * 1.7320508075688772;
}

class Embeddings {
 public:
  explicit Embeddings(uint64_t seed) : seed_(seed) {
    Rng r(seed, 0, kEmbBasis);
    // Entries of variance 1/D: each topic is close to a unit vector, and two topics are
    // nearly orthogonal, so a dot product lies roughly in [-1, 1].
    const double scale = 1.0 / std::sqrt(static_cast<double>(kEmbDim));
    for (auto& topic : basis_)
      for (double& x : topic) x = Normalish(r) * scale;
  }

  // Author u's taste: 0.7 of a first topic, 0.3 of a second (maybe the same).
  Mixture Taste(int64_t u) const {
    Rng r(seed_, static_cast<uint64_t>(u), kTaste);
    Mixture m{};
    m[static_cast<size_t>(r.Below(kTopics))] += 0.7;
    m[static_cast<size_t>(r.Below(kTopics))] += 0.3;
    return m;
  }

  // mixture · basis (+ noise from `noise` when given), as D little-endian float32.
  std::string Vector(const Mixture& m, Rng* noise) const {
    std::string out(4 * kEmbDim, '\0');
    for (int d = 0; d < kEmbDim; ++d) {
      double x = 0;
      for (int t = 0; t < kTopics; ++t) x += m[static_cast<size_t>(t)] * basis_[t][d];
      if (noise) x += kNoiseScale * Normalish(*noise);
      const auto bits = std::bit_cast<uint32_t>(static_cast<float>(x));
      for (int b = 0; b < 4; ++b)
        out[static_cast<size_t>(4 * d + b)] = static_cast<char>(bits >> (8 * b));
    }
    return out;
  }

 private:
  uint64_t seed_;
  double basis_[kTopics][kEmbDim];
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

// How long any one round trip of the seeder may take.
constexpr auto kRoundTrip = std::chrono::seconds(60);

Deadline RoundTripDeadline() { return Clock::now() + kRoundTrip; }

// Pipelined writer on rankd's own Redis client (the endpoint's pool on a CLI
// ShardRuntime; a cluster's routing sends each command to its slot's master): commands are
// encoded into one batch, sent every `batch` commands, and their replies checked, so a
// batch costs one round trip. Called from the main thread; the batches run on the loop.
class Writer {
 public:
  Writer(ShardRuntime& rt, RedisClient& client, int batch)
      : rt_(rt), client_(client), batch_(batch) {}

  // `CMD key args...`: the key under the endpoint's prefix (its first Key(): the command's
  // routing key).
  Status Send(std::string_view cmd, const std::string& key, const std::vector<std::string>& args) {
    cmds_.Add(static_cast<int>(2 + args.size())).Arg(cmd).Key(client_.prefix(), key);
    for (const auto& a : args) cmds_.Arg(a);
    ++commands_;
    if (static_cast<int>(cmds_.size()) >= batch_) return Flush();
    return {};
  }

  Status Flush() {
    if (cmds_.empty()) return {};
    ++round_trips_;
    auto replies =
        rt_.Run(client_.Batch(std::exchange(cmds_, RedisCommands{}), RoundTripDeadline()));
    if (!replies) return Fail(Error(replies.error().code, "seed: " + replies.error().message));
    for (size_t i = 0; i < replies->size(); ++i)
      if ((*replies)[i].is_error())
        return Fail(
            Error::Backend("seed: Redis refused a write: " + std::string((*replies)[i].str())));
    return {};
  }

  int64_t commands() const { return commands_; }
  int64_t round_trips() const { return round_trips_; }

 private:
  ShardRuntime& rt_;
  RedisClient& client_;
  int batch_;
  RedisCommands cmds_;
  int64_t commands_ = 0;
  int64_t round_trips_ = 0;
};

Status CheckOptions(const SeedOptions& o) {
  auto bad = [](std::string m) { return Fail(Error::InvalidParam("seed: " + std::move(m))); };
  if (o.users < 1 || o.users > 100'000'000) return bad("--users must be in 1..100000000");
  if (o.follows < 0 || o.follows > 100000) return bad("--follows must be in 0..100000");
  if (o.media < 1 || o.media > 10000) return bad("--media must be in 1..10000");
  if (o.embedded_media < 0 || o.embedded_media > o.media)
    return bad("--embedded-media must be in 0..--media (" + std::to_string(o.media) + ")");
  if (o.recs < 0 || o.recs > 100000) return bad("--recs must be in 0..100000");
  if (o.seen < 0 || o.seen > 100000) return bad("--seen must be in 0..100000");
  if (o.events < 0 || o.events > 1'000'000'000) return bad("--events must be in 0..1000000000");
  if (o.now_ms < 0) return bad("--now-ms must be a Unix time in ms");
  if (o.pipeline < 1) return bad("pipeline must be positive");
  return {};
}

}  // namespace

std::string SeedSummary::OneLine() const {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", seconds);
  return "seeded " + std::to_string(users) + " users, " + std::to_string(items) + " items, " +
         std::to_string(follow_edges) + " follows, " + std::to_string(recs) + " recs, " +
         std::to_string(seen) + " seen ids" +
         (events > 0 ? ", " + std::to_string(events) + " events" : std::string()) + " in " + secs +
         " s (" + std::to_string(commands) + " commands, " + std::to_string(round_trips) +
         " round trips)";
}

namespace {

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
        total_items_(o.users * o.media) {}

  Status Seed(int64_t u) {
    auto home = Profile(u);
    if (!home) return Fail(home.error());
    auto followees = Follows(u);
    if (!followees) return Fail(followees.error());
    if (o_.embeddings)
      if (auto s = UserEmbedding(u, *followees); !s) return s;
    if (auto s = Media(u, **home); !s) return s;
    auto recs = Recs(u);
    if (!recs) return Fail(recs.error());
    if (auto s = Seen(u, *followees, *recs); !s) return s;
    sum_.users += 1;
    return {};
  }

  SeedSummary& summary() { return sum_; }

 private:
  // `CMD key ids...` (RPUSH or SADD) for the key of `id` in `family`; nothing for no ids.
  Status PushIds(const char* cmd, const KeyFamily& family, int64_t id,
                 const std::vector<int64_t>& ids) {
    if (ids.empty()) return {};
    args_.clear();
    for (int64_t v : ids) args_.push_back(Dec(v));
    return w_.Send(cmd, family.KeyOf(Dec(id)), args_);
  }

  // HSET of the key of `id` in `family`: every declared field, in declaration order, its
  // value from `values` by name. REQUIRES: `values` names every field (the demo schema's).
  Status HashSet(const KeyFamily& family, int64_t id,
                 std::initializer_list<std::pair<std::string_view, std::string>> values) {
    args_.clear();
    for (const SchemaField& f : family.fields) {
      auto it = std::find_if(values.begin(), values.end(),
                             [&](const auto& v) { return v.first == f.name; });
      if (it == values.end())
        return Fail(Error::Internal("seed: no value for field '" + f.name + "' of family '" +
                                    family.name + "'"));
      args_.push_back(f.name);
      args_.push_back(it->second);
    }
    return w_.Send("HSET", family.KeyOf(Dec(id)), args_);
  }

  Result<const Country*> Profile(int64_t u) {
    Rng prof(o_.seed, static_cast<uint64_t>(u), kProfile);
    const Country& home = kCountries[prof.Weighted(kCountryWeights)];
    const char* lang = prof.Below(100) < 80 ? home.lang : "en";
    int64_t age = 13 + prof.Below(23) + prof.Below(23) + prof.Below(23);  // a bell over 13..79
    int64_t premium = prof.Below(100) < 15 ? 1 : 0;
    if (auto s = HashSet(
            user_, u,
            {{"country", home.code}, {"lang", lang}, {"age", Dec(age)}, {"premium", Dec(premium)}});
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
    if (auto s = PushIds("RPUSH", follow_, u, followees); !s) return Fail(s.error());
    sum_.follow_edges += static_cast<int64_t>(followees.size());
    return followees;
  }

  // Half the user's own taste, half the mean taste of whom they follow.
  Status UserEmbedding(int64_t u, const std::vector<int64_t>& followees) {
    Mixture m = emb_.Taste(u);
    const double own = followees.empty() ? 1.0 : 0.5;
    for (double& x : m) x *= own;
    for (int64_t f : followees) {
      const Mixture t = emb_.Taste(f);
      for (size_t i = 0; i < m.size(); ++i)
        m[i] += 0.5 * t[i] / static_cast<double>(followees.size());
    }
    return HashSet(user_emb_, u, {{"emb", emb_.Vector(m, nullptr)}});
  }

  // The user's media list (newest first), one hash per item and its embedding.
  Status Media(int64_t u, const Country& home) {
    Rng items(o_.seed, static_cast<uint64_t>(u), kItems);
    Rng noise(o_.seed, static_cast<uint64_t>(u), kEmbNoise);
    const Mixture taste = emb_.Taste(u);
    std::vector<int64_t> ages(static_cast<size_t>(m_));
    for (auto& a : ages) {
      size_t b = items.Weighted(kAgeBucketWeights);
      a = kAgeBucketLo[b] + items.Below(kAgeBucketHi[b] - kAgeBucketLo[b]);
    }
    std::sort(ages.begin(), ages.end());
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < m_; ++k) ids.push_back(DemoItemId(u, k, m_));
    if (auto s = PushIds("RPUSH", media_, u, ids); !s) return s;
    for (int64_t k = 0; k < m_; ++k) {
      // Likes: Pareto tail (alpha = 1) from one uniform draw: P(likes > x) = 20/(x+20).
      int64_t likes = std::min<int64_t>(kMaxLikes, static_cast<int64_t>(20.0 / items.Unit()) - 20);
      const size_t topic = items.Weighted(kCategoryWeights);
      const char* category = kCategories[topic];
      const char* country =
          items.Below(100) < 75 ? home.code : kCountries[items.Weighted(kCountryWeights)].code;
      int64_t milli = (items.Below(1001) + items.Below(1001)) / 2;  // quality, 3 decimals
      char quality[8];
      std::snprintf(quality, sizeof quality, "%d.%03d", static_cast<int>(milli / 1000),
                    static_cast<int>(milli % 1000));
      int64_t nsfw = items.Below(1000) < 20 ? 1 : 0;
      if (auto s = HashSet(item_, DemoItemId(u, k, m_),
                           {{"author", Dec(u)},
                            {"likes", Dec(likes)},
                            {"age_s", Dec(ages[static_cast<size_t>(k)])},
                            {"category", category},
                            {"country", country},
                            {"quality", quality},
                            {"nsfw", Dec(nsfw)}});
          !s)
        return s;
      if (!o_.embeddings || k >= o_.embedded_media) continue;  // k = 0 is the newest
      Mixture m = taste;
      for (double& x : m) x *= 0.5;
      m[topic] += 0.5;
      if (auto s = HashSet(item_emb_, DemoItemId(u, k, m_), {{"emb", emb_.Vector(m, &noise)}}); !s)
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
    if (auto s = PushIds("RPUSH", recs_, u, recs); !s) return Fail(s.error());
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
    if (auto s = PushIds("SADD", seen_, u, seen); !s) return s;
    sum_.seen += static_cast<int64_t>(seen.size());
    return {};
  }

  const SeedOptions& o_;
  Writer& w_;
  Popularity pop_;
  const int64_t n_, m_, follows_, total_items_;
  // The demo schema's families (plan/schema.h): the keys are their templates'.
  const SchemaPtr schema_ = DemoSchema();
  const KeyFamily& user_ = *schema_->Find("user");
  const KeyFamily& follow_ = *schema_->Find("follow");
  const KeyFamily& media_ = *schema_->Find("media");
  const KeyFamily& item_ = *schema_->Find("item");
  const KeyFamily& recs_ = *schema_->Find("recs");
  const KeyFamily& seen_ = *schema_->Find("seen");
  const KeyFamily& user_emb_ = *schema_->Find("user_emb");
  const KeyFamily& item_emb_ = *schema_->Find("item_emb");
  const Embeddings emb_{o_.seed};
  SeedSummary sum_;
  std::vector<std::string> args_;  // reused: one allocation for every list command
};

// Events per write: a fixed number, so that the contents never depend on --pipeline.
constexpr int64_t kEventChunk = 10000;

// The event history: `o.events` events, impressions and clicks 9:1, users uniform, items
// Zipf-popular (s = 1, their own shuffle), times uniform over the 7 days before now_ms,
// from one stream in a fixed order. Written as POST /events writes them (CounterBatch,
// aggregated per chunk, and MarkBatch: the demo's counters families and served zsets), a
// chunk of kEventChunk at a time.
Status SeedEvents(const SeedOptions& o, int64_t now_ms, ShardRuntime& rt, RedisClient& client,
                  SeedSummary& sum) {
  const SchemaPtr schema = DemoSchema();
  const EventType& impression = *schema->FindEvent("impression");
  const EventType& click = *schema->FindEvent("click");
  const KeyFamily& served = *schema->Find(impression.marks->family);
  const int64_t items = o.users * o.media;
  const Popularity pop(o.seed, items, kItemPermutation);
  constexpr int64_t kSpanMs = int64_t{604800} * 1000;  // the demo families' keep_s
  Rng rng(o.seed, 0, kEvents);
  for (int64_t done = 0; done < o.events;) {
    CounterBatch counters(schema, now_ms);
    MarkBatch marks;
    for (int64_t end = std::min(o.events, done + kEventChunk); done < end; ++done) {
      const EventType& type = rng.Below(10) == 0 ? click : impression;
      const int64_t user = 1 + rng.Below(o.users);
      const int64_t item = pop.Draw(rng);
      const int64_t ts_ms = now_ms - rng.Below(kSpanMs);
      counters.Add(type, IdRef{user, {}}, IdRef{item, {}}, 1, ts_ms);
      if (type.marks) marks.Add(served, *type.marks, UserId(user), UserId(item), ts_ms);
    }
    size_t calls = 0;
    auto again = rt.Run(WriteEventBatch(client, counters, marks, RoundTripDeadline(), &calls));
    if (!again) return Fail(Error(again.error().code, "seed: " + again.error().message));
    sum.commands += static_cast<int64_t>(calls);
    sum.round_trips += 1 + (*again > 0 ? 1 : 0);
  }
  sum.events = o.events;
  return {};
}

}  // namespace

namespace {

std::string WhereOf(const RedisEndpoint& ep) {
  return ep.host + ":" + std::to_string(ep.port) + "/" + std::to_string(ep.db);
}

// Waits up to 5 s for `client` (on rt's loop) to be live; unavailable, naming `where`, if
// it is not, or as soon as a connection attempt failed.
Status WaitLive(ShardRuntime& rt, const RedisClient& client, const std::string& where) {
  for (int i = 0; i < 1000; ++i) {
    auto [live, failed, why] = rt.OnLoop([&] {
      return std::tuple(client.live(), client.stats().connect_failures.load() > 0,
                        client.NotLiveReason());
    });
    if (live) return {};
    if (failed || i == 999)
      return Fail(Error::Unavailable("seed: cannot connect to " + where + ": " + why));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {};
}

// One command on `client`, its reply (as replies[0]) unless Redis answered an error.
Result<RespReplies> Call(ShardRuntime& rt, RedisClient& client, const std::string& where,
                         std::vector<std::string> args) {
  RedisCommands cmds;
  cmds.Add(static_cast<int>(args.size()));
  for (const auto& a : args) cmds.Arg(a);
  auto replies = rt.Run(client.Batch(std::move(cmds), RoundTripDeadline()));
  if (!replies)
    return Fail(Error(replies.error().code, "seed: " + where + ": " + replies.error().message));
  if ((*replies)[0].is_error())
    return Fail(Error::Backend("seed: " + where + ": " + args[0] +
                               " failed: " + std::string((*replies)[0].str())));
  return replies;
}

// The database of `ep` (one server, never a cluster) is empty, or emptied when `flush`
// allows it; on a connection of its own, closed after.
Status EmptyDb(ShardRuntime& rt, const RedisEndpoint& ep, bool flush) {
  const std::string where = WhereOf(ep);
  RedisClientOptions opts;
  auto pool = rt.OnLoop([&] { return std::make_unique<RedisPool>(rt.loop(), ep, opts); });
  auto check = [&]() -> Status {
    if (auto ok = WaitLive(rt, *pool, where); !ok) return ok;
    auto size = Call(rt, *pool, where, {"DBSIZE"});
    if (!size) return Fail(size.error());
    const int64_t keys = (*size)[0].integer();
    if (keys == 0) return {};
    if (!flush)
      return Fail(Error::InvalidParam("seed: database " + where + " holds " + std::to_string(keys) +
                                      " keys; refusing to write into it without --flush"));
    if (auto r = Call(rt, *pool, where, {"FLUSHDB"}); !r) return Fail(r.error());
    return {};
  };
  Status ok = check();
  rt.OnLoop([&] {
    pool->Close();
    pool.reset();
  });
  return ok;
}

// The servers that hold the data: the endpoint itself, or every master of its cluster
// (the slot map asked of the cluster through its client); every slot must be served.
Result<std::vector<RedisEndpoint>> Masters(ShardRuntime& rt, RedisClient& client,
                                           const RedisEndpoint& ep) {
  if (!ep.is_cluster()) return std::vector<RedisEndpoint>{ep};
  // Its argument 1 routes CLUSTER SLOTS to some master; any node answers for the cluster.
  auto slots = Call(rt, client, WhereOf(ep), {"CLUSTER", "SLOTS"});
  if (!slots) return Fail(slots.error());
  auto map = SlotMap::FromClusterSlots((*slots)[0], ep.cluster_seeds.front(),
                                       RedisClientOptions{}.max_cluster_nodes);
  if (!map) return Fail(Error::Backend("seed: " + WhereOf(ep) + ": " + map.error().message));
  for (int slot = 0; slot < kClusterSlots; ++slot)
    if (map->MasterOf(slot) < 0)
      return Fail(Error::Unavailable("seed: the cluster does not serve every slot"));
  std::vector<RedisEndpoint> out;
  std::vector<int> seen;
  for (const auto& range : map->ranges()) {
    if (std::find(seen.begin(), seen.end(), range.master) != seen.end()) continue;
    seen.push_back(range.master);
    out.push_back(ep.AtNode(map->nodes()[static_cast<size_t>(range.master)]));
  }
  return out;
}

}  // namespace

Result<SeedSummary> SeedDemoData(const SeedOptions& o) {
  if (auto ok = CheckOptions(o); !ok) return Fail(ok.error());
  auto t0 = std::chrono::steady_clock::now();
  ShardRuntime rt("seed", /*cpu_threads=*/1);
  rt.Start();
  RedisClientOptions opts;
  RedisPools& pools = rt.OnLoop(
      [&]() -> RedisPools& { return rt.OpenRedis(std::vector<RedisEndpoint>{o.endpoint}, opts); });
  RedisClient& client = *rt.OnLoop([&] { return pools.pools().front().get(); });
  if (auto ok = WaitLive(
          rt, client,
          o.endpoint.is_cluster() ? "cluster " + WhereOf(o.endpoint) : WhereOf(o.endpoint));
      !ok)
    return Fail(ok.error());
  auto masters = Masters(rt, client, o.endpoint);
  if (!masters) return Fail(masters.error());
  for (const RedisEndpoint& m : *masters)
    if (auto ok = EmptyDb(rt, m, o.flush); !ok) return Fail(ok.error());
  Writer w(rt, client, o.pipeline);
  UserSeeder seeder(o, w);
  for (int64_t u = 1; u <= o.users; ++u)
    if (auto s = seeder.Seed(u); !s) return Fail(s.error());
  if (auto s = w.Flush(); !s) return Fail(s.error());
  SeedSummary sum = seeder.summary();
  sum.commands = w.commands();
  sum.round_trips = w.round_trips();
  if (o.events > 0) {
    const int64_t now_ms = o.now_ms > 0 ? o.now_ms
                                        : std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count();
    if (auto s = SeedEvents(o, now_ms, rt, client, sum); !s) return Fail(s.error());
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rt.Stop();
  return sum;
}

}  // namespace rankd
