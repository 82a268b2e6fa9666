#include "redis/cluster_pool.h"

#include <coroutine>
#include <string_view>

#include "core/awaitables.h"
#include "core/parse_int.h"

namespace rankd {

namespace {

// What a cluster error reply asks of the client.
struct Redirect {
  enum Kind : uint8_t { kNone, kMoved, kAsk, kRetry } kind = kNone;
  int slot = -1;
  RedisAddress to;  // kMoved, kAsk; an empty host means the replying node's
};

// "MOVED 3999 127.0.0.1:6381", "ASK 3999 :6381", "TRYAGAIN ...", "CLUSTERDOWN ...".
Redirect ParseRedirect(std::string_view err) {
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

std::string AddressText(const RedisAddress& a) { return a.host + ":" + std::to_string(a.port); }

uint64_t NextRandom(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint32_t kNoGroup = UINT32_MAX;  // a command no node serves
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

// A batch's replies while it runs: the node batches' RespReplies as they came, and for
// each command of the batch which of them holds its latest reply. Put in the batch's
// order at the end (Gather); read in place meanwhile (a redirect's error text).
struct RedisClusterPool::Replies {
  struct At {
    uint32_t part = UINT32_MAX;
    uint32_t index = 0;
  };
  std::vector<RespReplies> parts;
  std::vector<At> at;

  RespView operator[](size_t i) const { return parts[at[i].part][at[i].index]; }
  // A node's replies (-1 in reply_to: ASKING's, dropped).
  void Scatter(const std::vector<int64_t>& reply_to, RespReplies from) {
    const auto part = static_cast<uint32_t>(parts.size());
    for (size_t k = 0; k < reply_to.size(); ++k)
      if (reply_to[k] >= 0) at[static_cast<size_t>(reply_to[k])] = {part, static_cast<uint32_t>(k)};
    parts.push_back(std::move(from));
  }
  void SetError(size_t i, std::string_view message) {
    RespReplies one;
    one.AppendError(message);
    Scatter(std::vector<int64_t>{static_cast<int64_t>(i)}, std::move(one));
  }
  // The batch's replies in order: the one node batch's as they are when it answered
  // everything in order (the common case), else copied into one buffer.
  RespReplies Gather() {
    bool identity = parts.size() == 1 && parts[0].size() == at.size();
    for (size_t i = 0; identity && i < at.size(); ++i) identity = at[i].index == i;
    if (identity) return std::move(parts[0]);
    RespReplies out;
    out.Reserve(at.size());
    for (const At& a : at) out.Append(parts[a.part].raw(a.index));
    return out;
  }
};

// The node batches of one round in flight: the last to finish resumes the round.
struct RedisClusterPool::Round {
  EventLoop* loop;
  Replies* replies;  // the Batch frame's; it waits for every node batch
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

Task<Result<RespReplies>> RedisClusterPool::NodeBatch(Node& node, RedisCommands cmds,
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
  refreshing_ = true;
  Spawn(RunRefresh(alive_));
}

// One pass over the current map's nodes, then (when none of them answered) over the
// seeds not in it, each from a rotating start, until one answers CLUSTER SLOTS with a
// map. Without any map yet, a failed pass is tried again after 100-200 ms.
Task<void> RedisClusterPool::RunRefresh(std::shared_ptr<bool> alive) {
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
      auto map = SlotMap::FromClusterSlots((*reply)[0].ToReply(), addr);
      if (!map) {
        refresh_error_ = "CLUSTER SLOTS from " + AddressText(addr) + ": " + map.error().message;
        continue;
      }
      Bump(node_stats->slot_map_refreshes);
      Install(*map);
      installed = true;
    }
  refreshing_ = false;
  last_refresh_ = Clock::now();
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
  loop_.timers().Start(100 + NextRandom(rng_) % 100, [this, alive] {
    if (*alive) RefreshSlotMap();
  });
}

void RedisClusterPool::Install(const SlotMap& map) {
  std::vector<Node*> old_owner = std::move(slot_owner_);
  std::vector<std::vector<Node*>> old_replica_sets = std::move(replica_sets_);
  std::vector<int32_t> old_slot_replicas = slot_replicas_;
  slot_owner_.assign(kClusterSlots, nullptr);
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
  for (const auto& range : map.ranges()) {
    if (endpoint_.read_from_replica && !range.replicas.empty()) {
      std::vector<Node*> set;
      for (int r : range.replicas) set.push_back(&NodeAt(map.nodes()[static_cast<size_t>(r)]));
      std::fill(slot_replicas_.begin() + range.first, slot_replicas_.begin() + range.last + 1,
                static_cast<int32_t>(replica_sets_.size()));
      replica_sets_.push_back(std::move(set));
    }
    Node* owner = &NodeAt(map.nodes()[static_cast<size_t>(range.master)]);
    std::fill(slot_owner_.begin() + range.first, slot_owner_.begin() + range.last + 1, owner);
    if (std::find(masters_.begin(), masters_.end(), owner) == masters_.end())
      masters_.push_back(owner);
  }
  map_ = map;
  Bump(stats_->slot_map_refreshes);
  // A key read from a node that no longer serves its slot is no longer tracked there.
  if (tracking_ && (old_owner != slot_owner_ || old_replica_sets != replica_sets_ ||
                    old_slot_replicas != slot_replicas_))
    tracking_->sink->OnInvalidateAll();
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

Task<Result<RespReplies>> RedisClusterPool::Batch(RedisCommands commands, Deadline deadline) {
  loop_.AssertInLoopThread();
  if (commands.empty()) co_return RespReplies{};
  if (closed_) co_return Fail(Unavailable("client closed", "client closed"));
  if (!map_) {
    RefreshSlotMap();
    co_return Fail(Unavailable("no slot map yet", NotLiveReason()));
  }
  std::shared_ptr<bool> alive = alive_;
  const size_t n = commands.size();
  Replies replies;
  replies.at.resize(n);
  std::vector<int> slot(n);
  std::vector<Node*> target(n);
  std::vector<uint8_t> asking(n, 0);
  std::vector<uint8_t> redirects(n, 0);
  std::vector<uint32_t> todo(n);
  for (uint32_t i = 0; i < n; ++i) {
    slot[i] = KeySlot(commands.key(i));
    target[i] = FirstTarget(commands, i, slot[i]);
    todo[i] = i;
  }
  while (true) {
    auto sent = co_await SendRound(commands, todo, target, asking, replies, deadline);
    if (!*alive) co_return Fail(Error::Unavailable("redis: client closed"));
    if (!sent) {
      if (sent.error().code == ErrorCode::kUnavailable) RefreshSlotMap();
      co_return Fail(std::move(sent.error()));
    }
    std::vector<uint32_t> again;
    std::string pause_for;  // the text of a TRYAGAIN or CLUSTERDOWN that pauses the batch
    for (uint32_t i : todo) {
      const RespView r = replies[i];
      if (!r.is_error()) continue;
      Redirect redirect = ParseRedirect(r.str());
      ClusterNodeStats* from = target[i] != nullptr ? target[i]->stats.get() : nullptr;
      if (redirect.kind == Redirect::kNone) {
        if (from != nullptr) Bump(from->errors);
        continue;
      }
      // Redirects are bounded per command; retries by the deadline (without one, like
      // redirects).
      bool bounded = redirect.kind != Redirect::kRetry || !deadline;
      if (bounded && redirects[i] >= opts_.max_redirects) continue;
      if (bounded) ++redirects[i];
      asking[i] = 0;
      if (redirect.kind == Redirect::kRetry) {
        pause_for = r.str();
        Bump(stats_->cluster_retries);
        if (from != nullptr) Bump(from->retries);
        RefreshSlotMap();
      } else {
        if (redirect.to.host.empty()) redirect.to.host = target[i]->pool->endpoint().host;
        Node& to = NodeAt(redirect.to);
        target[i] = &to;
        if (redirect.kind == Redirect::kMoved) {
          slot_owner_[static_cast<size_t>(redirect.slot)] = &to;
          if (tracking_) tracking_->sink->OnInvalidateAll();  // as Install would
          Bump(stats_->moved);
          Bump(from->moved);
          RefreshSlotMap();
        } else {
          asking[i] = 1;
          Bump(stats_->asked);
          Bump(from->asked);
        }
      }
      again.push_back(i);
    }
    if (again.empty()) co_return replies.Gather();
    if (!pause_for.empty()) {
      uint64_t ms = kRetryPauseMinMs + NextRandom(rng_) % (kRetryPauseMaxMs - kRetryPauseMinMs + 1);
      if (deadline && ms_until(*deadline) <= ms)
        co_return Fail(Unavailable("cluster is down or reconfiguring",
                                   "no time left to retry after: " + pause_for));
      co_await SleepMs(loop_, ms);
      if (!*alive) co_return Fail(Error::Unavailable("redis: client closed"));
      // The map may be newer now: retried commands go to their slot's current owner.
      for (uint32_t i : again)
        if (asking[i] == 0 && ParseRedirect(replies[i].str()).kind == Redirect::kRetry)
          target[i] = slot_owner_[static_cast<size_t>(slot[i])];
    }
    todo = std::move(again);
  }
}

RedisClusterPool::Node* RedisClusterPool::FirstTarget(const RedisCommands& commands, size_t i,
                                                      int slot) {
  Node* master = slot_owner_[static_cast<size_t>(slot)];
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

Task<Result<void>> RedisClusterPool::SendRound(const RedisCommands& commands,
                                               const std::vector<uint32_t>& todo,
                                               const std::vector<Node*>& target,
                                               const std::vector<uint8_t>& asking, Replies& replies,
                                               Deadline deadline) {
  // A node's share: its commands' bytes copied into one buffer of its own (ASKING
  // first where asked), and where each reply goes.
  struct Group {
    Node* node;
    RedisCommands cmds;
    std::vector<int64_t> reply_to;  // the batch index of each command's reply; -1: ASKING's
  };
  // Two passes: find each command's group and count, then fill buffers of exact size.
  std::vector<Group> groups;
  std::vector<size_t> sizes;
  std::vector<size_t> bytes;
  std::vector<uint32_t> group_of(todo.size());
  for (size_t k = 0; k < todo.size(); ++k) {
    uint32_t i = todo[k];
    Node* node = target[i];
    if (node == nullptr) {
      replies.SetError(i, "CLUSTERDOWN Hash slot not served");
      group_of[k] = kNoGroup;
      continue;
    }
    size_t g = 0;
    while (g < groups.size() && groups[g].node != node) ++g;
    if (g == groups.size()) {
      groups.push_back(Group{node, {}, {}});
      sizes.push_back(0);
      bytes.push_back(0);
    }
    sizes[g] += asking[i] ? 2 : 1;
    bytes[g] += commands.wire(i).size() + (asking[i] ? kAsking.size() : 0);
    group_of[k] = static_cast<uint32_t>(g);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].cmds.Reserve(sizes[g], bytes[g]);
    groups[g].reply_to.reserve(sizes[g]);
  }
  for (size_t k = 0; k < todo.size(); ++k) {
    if (group_of[k] == kNoGroup) continue;
    uint32_t i = todo[k];
    Group& g = groups[group_of[k]];
    if (asking[i]) {
      g.cmds.Add(1).Arg("ASKING");
      g.reply_to.push_back(-1);
    }
    g.cmds.Append(commands, i);
    g.reply_to.push_back(i);
  }
  if (groups.empty()) co_return Result<void>{};
  if (groups.size() == 1) {  // one node (a one-key batch, say): no round to share
    auto r = co_await NodeBatch(*groups[0].node, std::move(groups[0].cmds), deadline);
    if (!r) co_return Fail(std::move(r.error()));
    replies.Scatter(groups[0].reply_to, std::move(*r));
    co_return Result<void>{};
  }
  auto round = std::make_shared<Round>(Round{&loop_, &replies, groups.size(), {}, {}});
  for (auto& g : groups)
    Spawn(RunNodeBatch(g.node, std::move(g.cmds), std::move(g.reply_to), deadline, round));
  co_await RoundAwaiter{round->remaining, round->waiter};
  if (round->error) co_return Fail(std::move(*round->error));
  co_return Result<void>{};
}

// One node's share of a round, spawned so that every node's share leaves in the same
// loop turn.
Task<void> RedisClusterPool::RunNodeBatch(Node* node, RedisCommands cmds,
                                          std::vector<int64_t> reply_to, Deadline deadline,
                                          std::shared_ptr<Round> round) {
  auto r = co_await NodeBatch(*node, std::move(cmds), deadline);
  if (!r) {
    if (!round->error) round->error = std::move(r.error());
  } else {
    round->replies->Scatter(reply_to, std::move(*r));
  }
  // Node batches resume through the loop's deferred queue, never in a read handler, so
  // the round may go on from here; Defer keeps the stack flat all the same.
  if (--round->remaining == 0 && round->waiter) round->loop->Defer(round->waiter);
}

}  // namespace rankd
