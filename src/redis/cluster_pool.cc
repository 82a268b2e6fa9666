#include "redis/cluster_pool.h"

#include <algorithm>
#include <coroutine>
#include <string_view>
#include <utility>

#include "core/awaitables.h"
#include "core/log.h"
#include "core/mix.h"
#include "core/parse_int.h"

namespace rankd {

namespace {

std::string AddressText(const RedisAddress& a) { return a.host + ":" + std::to_string(a.port); }

constexpr std::string_view kAsking = "*1\r\n$6\r\nASKING\r\n";

// The commands a replica may answer (with READONLY): every command the IO tasks send.
bool IsRead(std::string_view name) {
  static constexpr std::string_view kReads[] = {"HGETALL",    "HMGET",    "HGET",      "LRANGE",
                                                "SMISMEMBER", "SMEMBERS", "SISMEMBER", "GET",
                                                "MGET",       "EXISTS",   "ZRANGE",    "ZSCORE"};
  return std::find(std::begin(kReads), std::end(kReads), name) != std::end(kReads);
}

constexpr uint64_t kReplicaRefreshMs = 2000;  // read_from=replica: map fetched this often
constexpr uint64_t kRetryPauseMinMs = 10;
constexpr uint64_t kRetryPauseMaxMs = 100;
// A burst of failures costs one CLUSTER SLOTS: triggers within this long of the last
// fetch are dropped (the failures that follow trigger again).
constexpr auto kRefreshHoldOff = std::chrono::milliseconds(100);

}  // namespace

// What a cluster error reply asks of the client.
struct RedisClusterPool::Redirect {
  enum Kind : uint8_t { kNone, kMoved, kAsk, kRetry } kind = kNone;
  int slot = -1;
  RedisAddress to;  // kMoved, kAsk; an empty host means the replying node's
};

RedisClusterPool::Redirect RedisClusterPool::ParseRedirect(std::string_view err) {
  Redirect r;
  if (err.starts_with("TRYAGAIN") || err.starts_with("CLUSTERDOWN")) {
    r.kind = Redirect::kRetry;
    return r;
  }
  if (err.starts_with("MOVED "))
    r.kind = Redirect::kMoved;
  else if (err.starts_with("ASK "))
    r.kind = Redirect::kAsk;
  else
    return {};
  std::string_view rest = err.substr(err.find(' ') + 1);
  size_t space = rest.find(' ');
  size_t colon = rest.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space)
    return {};
  std::optional<int> slot = ParseStrictInt<int>(rest.substr(0, space));
  std::optional<int> port = ParseStrictInt<int>(rest.substr(colon + 1));
  if (!slot || *slot < 0 || *slot >= kClusterSlots || !port || *port < 1 || *port > 65535)
    return {};
  r.slot = *slot;
  r.to = {std::string(rest.substr(space + 1, colon - space - 1)), *port};
  return r;
}

// A node's share of a round: its commands' bytes copied into one buffer of its own
// (ASKING first where asked), and, once it answered, its replies.
struct RedisClusterPool::Share {
  Node* node;  // nullptr: a slot no node serves
  RedisCommands cmds;
  RespReplies replies;
};

// A command of the batch to send again, where, and whether ASKING goes first.
struct RedisClusterPool::Resend {
  uint32_t i;
  Node* to;
  bool asking;
};

// The node batches of one round in flight: the last to finish resumes the round.
struct RedisClusterPool::Round {
  EventLoop* loop;
  size_t remaining = 0;
  std::optional<Error> error;  // the first node batch's failure
  std::coroutine_handle<> waiter;
};

namespace {
struct RoundAwaiter {
  const size_t& remaining;
  std::coroutine_handle<>& waiter;
  bool await_ready() const noexcept { return remaining == 0; }
  void await_suspend(std::coroutine_handle<> h) noexcept { waiter = h; }
  void await_resume() const noexcept {}
};
}  // namespace

RedisClusterPool::RedisClusterPool(EventLoop& loop, RedisEndpoint endpoint, RedisClientOptions opts)
    : RedisClient(std::move(endpoint),
                  [] {
                    auto stats = std::make_shared<RedisStats>();
                    stats->cluster = true;
                    return stats;
                  }()),
      loop_(loop),
      opts_(opts),
      rng_(reinterpret_cast<uintptr_t>(this) ^
           static_cast<uint64_t>(Clock::now().time_since_epoch().count())) {
  loop_.AssertInLoopThread();
  for (const auto& seed : endpoint_.cluster_seeds) NodeAt(seed);
  RefreshSlotMap();
}

RedisClusterPool::~RedisClusterPool() {
  Close();
  *alive_ = false;
}

void RedisClusterPool::Close() {
  if (closed_) return;
  loop_.AssertInLoopThread();
  closed_ = true;
  for (auto& n : nodes_) n->pool->Close();
  for (const MapWaiter& w : std::exchange(map_waiters_, {})) {
    if (w.timer != 0) loop_.timers().Cancel(w.timer);
    loop_.Defer(w.handle);
  }
}

RedisClusterPool::Node& RedisClusterPool::NodeAt(const RedisAddress& addr) {
  for (auto& n : nodes_)
    if (!n->retired && n->pool->endpoint().host == addr.host &&
        n->pool->endpoint().port == addr.port)
      return *n;
  auto node = std::make_unique<Node>();
  node->pool = std::make_unique<RedisPool>(loop_, endpoint_.AtNode(addr), opts_, stats_);
  if (tracking_) node->pool->EnableTracking(*tracking_);
  node->stats = std::make_shared<ClusterNodeStats>(AddressText(addr));
  nodes_.push_back(std::move(node));
  PublishNodes();
  return *nodes_.back();
}

void RedisClusterPool::PublishNodes() {
  std::vector<std::shared_ptr<const ClusterNodeStats>> live;
  for (const auto& n : nodes_)
    if (!n->retired) live.push_back(n->stats);
  stats_->SetNodes(std::move(live));
}

Coro<Result<RespReplies>> RedisClusterPool::NodeBatch(Node& node, RedisCommands cmds,
                                                      Deadline deadline) {
  std::shared_ptr<bool> alive = alive_;
  Bump(node.stats->commands, cmds.size());
  ++node.in_flight;
  auto r = co_await node.pool->Batch(std::move(cmds), deadline);
  if (!*alive) co_return r;
  --node.in_flight;
  if (!r) Bump(node.stats->errors);
  if (node.retired && node.in_flight == 0) node.pool->Close();
  co_return r;
}

bool RedisClusterPool::live() const {
  loop_.AssertInLoopThread();
  if (closed_ || !map_) return false;
  for (const Node* m : masters_)
    if (!m->pool->live()) return false;
  return true;
}

std::string RedisClusterPool::NotLiveReason() const {
  loop_.AssertInLoopThread();
  if (closed_) return "client closed";
  if (!map_)
    return "no slot map yet" + (refresh_error_.empty() ? std::string() : ": " + refresh_error_);
  for (const Node* m : masters_)
    if (!m->pool->live()) return "master " + m->stats->node + ": " + m->pool->NotLiveReason();
  return "";
}

Error RedisClusterPool::Unavailable(std::string what, std::string detail) const {
  Error e = Error::Unavailable("redis endpoint " + endpoint_.name + ": " + what);
  e.detail = "redis endpoint " + endpoint_.Label() + ": " + detail;
  return e;
}

void RedisClusterPool::RefreshSlotMap() {
  if (refreshing_ || closed_) return;
  if (map_ && Clock::now() - last_refresh_ < kRefreshHoldOff) return;
  StartRefresh();
}

void RedisClusterPool::StartRefresh() {
  refreshing_ = true;
  ++refreshes_started_;
  Spawn(RunRefresh(alive_));
}

// No hold-off here: a batch waits on it. Waiters that come while a fetch runs share the
// next one, so a node that keeps redirecting to strangers costs one fetch at a time.
uint64_t RedisClusterPool::NextFetch() {
  const uint64_t fetch = refreshes_started_ + 1;
  if (!refreshing_ && !closed_) StartRefresh();
  return fetch;
}

void RedisClusterPool::AddMapWaiter(uint64_t fetch, std::coroutine_handle<> h, Deadline deadline) {
  TimerQueue::Id timer = 0;
  if (deadline)
    timer = loop_.timers().Start(ms_until(*deadline), [this, h, alive = alive_] {
      if (!*alive) return;
      auto it = std::find_if(map_waiters_.begin(), map_waiters_.end(),
                             [&](const MapWaiter& w) { return w.handle == h; });
      if (it == map_waiters_.end()) return;
      map_waiters_.erase(it);
      loop_.Defer(h);
    });
  map_waiters_.push_back({fetch, h, timer});
}

void RedisClusterPool::WakeMapWaiters() {
  bool later = false;
  std::erase_if(map_waiters_, [&](const MapWaiter& w) {
    if (w.fetch > refreshes_ended_) return later = true, false;
    if (w.timer != 0) loop_.timers().Cancel(w.timer);
    loop_.Defer(w.handle);
    return true;
  });
  if (later && !refreshing_ && !closed_) StartRefresh();
}

void RedisClusterPool::LogOnce(std::string line) {
  if (line == last_logged_) return;
  LogWarn(line);
  last_logged_ = std::move(line);
}

// One pass over the current map's nodes, then (when none of them answered) over the
// seeds not in it, each from a rotating start, until one answers CLUSTER SLOTS with a
// map. Without any map yet, a failed pass is tried again after 100-200 ms.
Coro<void> RedisClusterPool::RunRefresh(std::shared_ptr<bool> alive) {
  std::vector<RedisAddress> in_map;
  if (map_) in_map = map_->nodes();
  std::vector<RedisAddress> seeds;
  for (const auto& s : endpoint_.cluster_seeds)
    if (std::find(in_map.begin(), in_map.end(), s) == in_map.end()) seeds.push_back(s);
  const size_t start = next_seed_++;
  bool installed = false;
  for (const auto* from : {&in_map, &seeds})
    for (size_t k = 0; k < from->size() && !installed; ++k) {
      const RedisAddress addr = (*from)[(start + k) % from->size()];
      RedisCommands slots;
      slots.Add(2).Arg("CLUSTER").Arg("SLOTS");
      Node& node = NodeAt(addr);
      std::shared_ptr<ClusterNodeStats> node_stats = node.stats;
      auto reply = co_await NodeBatch(
          node, std::move(slots),
          Clock::now() + std::chrono::milliseconds(opts_.connect_timeout_ms + 1000));
      if (!*alive) co_return;
      if (closed_) break;
      if (!reply) {
        refresh_error_ = "CLUSTER SLOTS from " + AddressText(addr) + ": " + reply.error().message;
        continue;
      }
      auto map = SlotMap::FromClusterSlots((*reply)[0], addr, opts_.max_cluster_nodes);
      if (!map) {
        refresh_error_ = "CLUSTER SLOTS from " + AddressText(addr) + ": " + map.error().message;
        LogOnce("redis endpoint " + endpoint_.Label() + ": " + refresh_error_ +
                (map_ ? "; the slot map is kept" : ""));
        continue;
      }
      Bump(node_stats->slot_map_refreshes);
      Install(*map);
      installed = true;
    }
  refreshing_ = false;
  last_refresh_ = Clock::now();
  ++refreshes_ended_;
  WakeMapWaiters();
  // Replicas come and go without a MOVED (a new one is listed once it has synced), so
  // reading from them needs the map fetched now and then; so does a cache, whose hits
  // send nothing that could draw a MOVED after a slot moved (Install then flushes it).
  if ((endpoint_.read_from_replica || tracking_) && map_ && !closed_ && !replica_refresh_armed_) {
    replica_refresh_armed_ = true;
    loop_.timers().Start(kReplicaRefreshMs, [this, alive] {
      if (!*alive) return;
      replica_refresh_armed_ = false;
      RefreshSlotMap();
    });
  }
  if (installed || map_ || closed_) co_return;
  loop_.timers().Start(100 + SplitMix64(rng_) % 100, [this, alive] {
    if (*alive) RefreshSlotMap();
  });
}

void RedisClusterPool::Install(const SlotMap& map) {
  std::vector<uint16_t> old_slot_owner = std::move(slot_owner_);
  std::vector<Node*> old_owners = std::move(owners_);
  std::vector<std::vector<Node*>> old_replica_sets = std::move(replica_sets_);
  std::vector<int32_t> old_slot_replicas = slot_replicas_;
  slot_owner_.assign(kClusterSlots, 0);
  owners_.assign(1, nullptr);
  masters_.clear();
  bool retired = false;
  for (auto& n : nodes_) {
    if (n->retired || map.IndexOf({n->pool->endpoint().host, n->pool->endpoint().port}) >= 0)
      continue;
    n->retired = retired = true;
    if (n->in_flight == 0) n->pool->Close();
  }
  if (retired) PublishNodes();
  replica_sets_.clear();
  if (endpoint_.read_from_replica) slot_replicas_.assign(kClusterSlots, -1);
  // Per node of the map, its Node and its place in owners_ (0: not a master yet): each
  // looked up once, so that the work is linear in the map. Every master serves a range
  // of at least one slot, so owners_ holds at most kClusterSlots + 1 < kMixed entries.
  std::vector<Node*> node_of(map.nodes().size(), nullptr);
  std::vector<uint16_t> owner_of(map.nodes().size(), 0);
  auto node_at = [&](int i) {
    Node*& n = node_of[static_cast<size_t>(i)];
    if (n == nullptr) n = &NodeAt(map.nodes()[static_cast<size_t>(i)]);
    return n;
  };
  for (const auto& range : map.ranges()) {
    if (endpoint_.read_from_replica && !range.replicas.empty()) {
      std::vector<Node*> set;
      for (int r : range.replicas) set.push_back(node_at(r));
      std::fill(slot_replicas_.begin() + range.first, slot_replicas_.begin() + range.last + 1,
                static_cast<int32_t>(replica_sets_.size()));
      replica_sets_.push_back(std::move(set));
    }
    uint16_t& owner = owner_of[static_cast<size_t>(range.master)];
    if (owner == 0) {
      masters_.push_back(node_at(range.master));
      owners_.push_back(masters_.back());  // owners_ is nullptr, then masters_
      owner = static_cast<uint16_t>(owners_.size() - 1);
    }
    std::fill(slot_owner_.begin() + range.first, slot_owner_.begin() + range.last + 1, owner);
  }
  bucket_owner_.resize(kClusterSlots >> kBucketShift);
  for (size_t b = 0; b < bucket_owner_.size(); ++b) SetBucket(b);
  map_ = map;
  Bump(stats_->slot_map_refreshes);
  // A key read from a node that no longer serves its slot is no longer tracked there.
  if (!tracking_) return;
  bool moved = old_slot_owner.empty();
  for (size_t s = 0; s < slot_owner_.size() && !moved; ++s)
    moved = old_owners[old_slot_owner[s]] != owners_[slot_owner_[s]];
  if (moved || old_replica_sets != replica_sets_ || old_slot_replicas != slot_replicas_)
    tracking_->sink->OnInvalidateAll();
}

void RedisClusterPool::SetOwner(int slot, Node* node) {
  auto it = std::find(owners_.begin(), owners_.end(), node);
  if (it == owners_.end()) {
    if (owners_.size() >= kMixed) {
      // Full of owners that MOVEDs named since the last map: keep those still owning a
      // slot (at most one a slot, so there is room again).
      std::vector<Node*> kept{nullptr};
      for (uint16_t& o : slot_owner_) {
        Node* n = owners_[o];
        auto k = std::find(kept.begin(), kept.end(), n);
        if (k == kept.end()) k = kept.insert(kept.end(), n);
        o = static_cast<uint16_t>(k - kept.begin());
      }
      owners_ = std::move(kept);
      for (size_t b = 0; b < bucket_owner_.size(); ++b) SetBucket(b);
    }
    it = owners_.insert(owners_.end(), node);
  }
  slot_owner_[static_cast<size_t>(slot)] = static_cast<uint16_t>(it - owners_.begin());
  SetBucket(static_cast<size_t>(slot) >> kBucketShift);
}

void RedisClusterPool::SetBucket(size_t b) {
  const auto first = slot_owner_.begin() + static_cast<ptrdiff_t>(b << kBucketShift);
  const auto last = first + (1 << kBucketShift);
  const bool same = std::all_of(first, last, [&](uint16_t o) { return o == *first; });
  bucket_owner_[b] = same ? *first : kMixed;
}

void RedisClusterPool::SetTrackingPrefixes(std::vector<std::string> prefixes) {
  loop_.AssertInLoopThread();
  if (!tracking_ || closed_) return;
  tracking_->bcast_prefixes = prefixes;
  for (auto& n : nodes_)
    if (!n->retired) n->pool->SetTrackingPrefixes(prefixes);
}

void RedisClusterPool::EnableTracking(const TrackingConfig& config) {
  loop_.AssertInLoopThread();
  if (tracking_ || closed_) return;
  tracking_ = config;
  for (auto& n : nodes_)
    if (!n->retired) n->pool->EnableTracking(config);
  RefreshSlotMap();  // arms the periodic fetch once it ends
}

bool RedisClusterPool::tracking_ready() const {
  loop_.AssertInLoopThread();
  if (!tracking_ || !map_ || closed_) return false;
  for (const auto& n : nodes_)
    if (!n->retired && !n->pool->tracking_ready()) return false;
  return true;
}

// What the replies of a batch's rounds asked for: the commands to send again next round,
// the redirects to addresses the slot map does not name (decided once it was fetched
// again), and whether a TRYAGAIN or CLUSTERDOWN pauses the batch first.
struct RedisClusterPool::Followups {
  struct Stranger {
    uint32_t i;
    Node* from;
    Redirect redirect;
  };
  PoolVector<uint8_t> redirects;  // per command, once one is redirected
  PoolVector<Resend> again;
  std::vector<Stranger> strangers;
  std::string pause_for;  // the text of a TRYAGAIN or CLUSTERDOWN

  void Clear() {
    again.clear();
    strangers.clear();
    pause_for.clear();
  }
};

Coro<Result<RespReplies>> RedisClusterPool::Batch(RedisCommands commands, Deadline deadline) {
  loop_.AssertInLoopThread();
  if (commands.empty()) co_return RespReplies{};
  if (closed_) co_return Fail(Unavailable("client closed", "client closed"));
  if (!map_) {
    RefreshSlotMap();
    co_return Fail(Unavailable("no slot map yet", NotLiveReason()));
  }
  std::shared_ptr<bool> alive = alive_;
  RespReplies replies;
  replies.Gathered(commands.size());
  PoolVector<Node*> part_node;  // the node that answered each part; nullptr: none did
  PoolVector<Resend> resend;    // the commands of the round after the first
  Followups next;
  bool first = true;
  while (true) {
    auto sent =
        co_await SendRound(commands, first ? nullptr : &resend, replies, part_node, deadline);
    if (!*alive) co_return Fail(Error::Unavailable("redis: client closed"));
    if (!sent) {
      if (sent.error().code == ErrorCode::kUnavailable) RefreshSlotMap();
      co_return Fail(std::move(sent.error()));
    }
    next.Clear();
    ReadRound(replies, part_node, first ? nullptr : &resend, deadline, next);
    if (!next.strangers.empty()) {
      auto followed = co_await FollowStrangers(next, deadline);
      if (!followed) co_return Fail(std::move(followed.error()));
    }
    if (next.again.empty()) co_return std::move(replies).Simplified();
    if (!next.pause_for.empty()) {
      auto paused = co_await PauseToRetry(commands, replies, next, deadline);
      if (!paused) co_return Fail(std::move(paused.error()));
    }
    std::swap(resend, next.again);
    first = false;
  }
}

void RedisClusterPool::ReadRound(const RespReplies& replies, const PoolVector<Node*>& part_node,
                                 const PoolVector<Resend>* resend, Deadline deadline,
                                 Followups& next) {
  const size_t count = resend ? resend->size() : replies.size();
  for (size_t k = 0; k < count; ++k) {
    const uint32_t i = resend ? (*resend)[k].i : static_cast<uint32_t>(k);
    if (replies.raw(i)[0] != '-') continue;
    const RespView r = replies[i];
    Redirect redirect = ParseRedirect(r.str());
    Node* target = part_node[replies.part_of(i)];
    ClusterNodeStats* from = target != nullptr ? target->stats.get() : nullptr;
    if (redirect.kind == Redirect::kNone) {
      if (from != nullptr) Bump(from->errors);
      continue;
    }
    if (next.redirects.empty()) next.redirects.assign(replies.size(), 0);
    // Redirects are bounded per command; retries by the deadline (without one, like
    // redirects).
    bool bounded = redirect.kind != Redirect::kRetry || !deadline;
    if (bounded && next.redirects[i] >= opts_.max_redirects) continue;
    if (bounded) ++next.redirects[i];
    if (redirect.kind == Redirect::kRetry) {
      next.pause_for = r.str();
      Bump(stats_->cluster_retries);
      if (from != nullptr) Bump(from->retries);
      RefreshSlotMap();
      next.again.push_back(Resend{i, target, false});
      continue;
    }
    if (redirect.to.host.empty()) redirect.to.host = target->pool->endpoint().host;
    if (InMap(redirect.to))
      Follow(i, target, redirect, next.again);
    else
      next.strangers.push_back(Followups::Stranger{i, target, std::move(redirect)});
  }
}

void RedisClusterPool::Follow(uint32_t i, Node* from, const Redirect& redirect,
                              PoolVector<Resend>& again) {
  Node& to = NodeAt(redirect.to);
  Resend next{i, &to, false};
  if (redirect.kind == Redirect::kMoved) {
    SetOwner(redirect.slot, &to);
    if (tracking_) tracking_->sink->OnInvalidateAll();  // as Install would
    Bump(stats_->moved);
    Bump(from->stats->moved);
    RefreshSlotMap();
  } else {
    next.asking = true;
    Bump(stats_->asked);
    Bump(from->stats->asked);
  }
  again.push_back(next);
}

Coro<Result<void>> RedisClusterPool::FollowStrangers(Followups& next, Deadline deadline) {
  std::shared_ptr<bool> alive = alive_;
  const uint64_t fetch = NextFetch();
  co_await FreshSlotMap(fetch, deadline);
  if (!*alive || closed_) co_return Fail(Error::Unavailable("redis: client closed"));
  if (refreshes_ended_ < fetch) {
    Error e = Error::DeadlineExceeded("redis endpoint " + endpoint_.name +
                                      ": deadline passed while the slot map was fetched");
    e.detail = "redis endpoint " + endpoint_.Label() +
               ": deadline passed while the slot map was fetched again after a redirect "
               "to an address not in it";
    co_return Fail(std::move(e));
  }
  for (const Followups::Stranger& s : next.strangers) {
    if (InMap(s.redirect.to)) {
      Follow(s.i, s.from, s.redirect, next.again);
      continue;
    }
    Bump(stats_->unknown_redirects);
    LogOnce("redis endpoint " + endpoint_.Label() + ": " +
            (s.redirect.kind == Redirect::kMoved ? "MOVED" : "ASK") + " from " +
            s.from->stats->node + " to " + AddressText(s.redirect.to) +
            " not followed: no node of the slot map, fetched again, is at that address");
  }
  co_return Result<void>{};
}

Coro<Result<void>> RedisClusterPool::PauseToRetry(const RedisCommands& commands,
                                                  const RespReplies& replies, Followups& next,
                                                  Deadline deadline) {
  std::shared_ptr<bool> alive = alive_;
  uint64_t ms = kRetryPauseMinMs + SplitMix64(rng_) % (kRetryPauseMaxMs - kRetryPauseMinMs + 1);
  if (deadline && ms_until(*deadline) <= ms)
    co_return Fail(Unavailable("cluster is down or reconfiguring",
                               "no time left to retry after: " + next.pause_for));
  co_await SleepMs(loop_, ms);
  if (!*alive) co_return Fail(Error::Unavailable("redis: client closed"));
  // The map may be newer now: retried commands go to their slot's current owner.
  for (Resend& a : next.again)
    if (!a.asking && ParseRedirect(replies[a.i].str()).kind == Redirect::kRetry)
      a.to = OwnerOf(KeySlot(commands.key(a.i)));
  co_return Result<void>{};
}

RedisClusterPool::Node* RedisClusterPool::FirstTarget(const RedisCommands& commands, size_t i) {
  const int slot = KeySlot(commands.key(i));
  Node* master = OwnerOf(slot);
  if (!endpoint_.read_from_replica) return master;
  int32_t set = slot_replicas_[static_cast<size_t>(slot)];
  if (set < 0 || !IsRead(commands.Argument(i, 0))) return master;
  const std::vector<Node*>& replicas = replica_sets_[static_cast<size_t>(set)];
  const size_t start = next_reader_++;
  for (size_t k = 0; k < replicas.size(); ++k) {
    Node* r = replicas[(start + k) % replicas.size()];
    if (r->pool->live()) return r;
  }
  return master;
}

Coro<Result<void>> RedisClusterPool::SendRound(const RedisCommands& commands,
                                               const PoolVector<Resend>* resend,
                                               RespReplies& replies, PoolVector<Node*>& part_node,
                                               Deadline deadline) {
  // One pass: each command is appended to its node's share as it is routed. A batch
  // touches a handful of nodes: a share is found by a short linear search. A share's
  // buffers are sized for the whole batch, an upper bound (they come from the thread's
  // free list, so once warm this reserves nothing).
  PoolVector<Share> shares;
  shares.reserve(masters_.size() + 1);
  const size_t count = resend != nullptr ? resend->size() : commands.size();
  const uint32_t first_part = replies.part_count();
  for (size_t k = 0; k < count; ++k) {
    const size_t i = resend != nullptr ? (*resend)[k].i : k;
    Node* node = resend != nullptr ? (*resend)[k].to : FirstTarget(commands, i);
    size_t g = 0;
    while (g < shares.size() && shares[g].node != node) ++g;
    if (g == shares.size()) {
      shares.push_back(Share{node, {}, {}});
      if (node != nullptr)
        shares[g].cmds.Reserve(
            resend != nullptr ? 2 * count : count,
            commands.wire().size() + (resend != nullptr ? count : 0) * kAsking.size());
    }
    Share& share = shares[g];
    size_t index;  // of its reply in the node's replies (after its ASKING's, if any)
    if (node == nullptr) {
      share.replies.AppendError("CLUSTERDOWN Hash slot not served");
      index = share.replies.size() - 1;
    } else {
      if (resend != nullptr && (*resend)[k].asking) share.cmds.Add(1).Arg("ASKING");
      share.cmds.Append(commands, i);
      index = share.cmds.size() - 1;
    }
    replies.Place(i, first_part + static_cast<uint32_t>(g), static_cast<uint32_t>(index));
  }
  size_t sends = 0;
  for (const Share& share : shares) sends += share.node != nullptr ? 1 : 0;
  if (sends == 1) {  // one node (a one-key batch, say): no round to share
    for (Share& share : shares) {
      if (share.node == nullptr) continue;
      auto r = co_await NodeBatch(*share.node, std::move(share.cmds), deadline);
      if (!r) co_return Fail(std::move(r.error()));
      share.replies = std::move(*r);
    }
  } else if (sends > 1) {
    auto round =
        std::allocate_shared<Round>(block_pool::Allocator<Round>(), Round{&loop_, sends, {}, {}});
    for (Share& share : shares)
      if (share.node != nullptr)
        Spawn(RunNodeBatch(share.node, std::move(share.cmds), &share.replies, deadline, round));
    co_await RoundAwaiter{round->remaining, round->waiter};
    if (round->error) co_return Fail(std::move(*round->error));
  }
  for (Share& share : shares) {
    replies.AddPart(std::move(share.replies));
    part_node.push_back(share.node);
  }
  co_return Result<void>{};
}

// One node's share of a round, spawned so that every node's share leaves in the same
// loop turn. `out` is in the round's frame, which waits for every node batch.
Coro<void> RedisClusterPool::RunNodeBatch(Node* node, RedisCommands cmds, RespReplies* out,
                                          Deadline deadline, std::shared_ptr<Round> round) {
  auto r = co_await NodeBatch(*node, std::move(cmds), deadline);
  if (!r) {
    if (!round->error) round->error = std::move(r.error());
  } else {
    *out = std::move(*r);
  }
  // Node batches resume through the loop's deferred queue, never in a read handler, so
  // the round may go on from here; Defer keeps the stack flat all the same.
  if (--round->remaining == 0 && round->waiter) round->loop->Defer(round->waiter);
}

}  // namespace rankd
