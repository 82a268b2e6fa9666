// RedisClusterPool: one shard's client of a Redis Cluster endpoint (redis-cluster://).
// It keeps a RedisPool per cluster node (the endpoint's connection count each, sharing
// the endpoint's RedisStats) and the slot map, fetched with CLUSTER SLOTS from any node
// it knows (the URL's seeds first).
//
// Batch() routes each command by the slot of its key (its first argument; every command
// the IO tasks send has exactly one key), sends each node's share to that node, all
// nodes in the same loop turn, and answers with the replies in the batch's order (the
// node batches' replies kept where they are and placed by reference, not copied): a
// batch costs one round trip, the slowest node's. Then, per command:
//   MOVED slot host:port    the slot's owner is remembered at once, the whole map is
//                           fetched again in the background, the command resent there;
//   ASK slot host:port      ASKING + the command, to that node, this once;
//   either, to an address the slot map does not name: the batch first waits for a map
//                           fetched from a node it knows (a fetch started after the
//                           reply), and follows only if that map names the address; if
//                           not, the redirect's error reply stands (502 for a required
//                           node), counted in unknown_redirects. A reply's text alone
//                           never opens a connection: no node outside the map (or the
//                           URL's seeds, for fetching it) ever sees the endpoint's AUTH;
//   TRYAGAIN, CLUSTERDOWN   resent after a jittered 10-100 ms pause, again and again
//                           while the deadline leaves room; then the batch fails with
//                           unavailable (a cluster failing over answers CLUSTERDOWN);
// With read_from=replica, read commands go to a live replica of their slot (in turn),
// to the master when the slot has none live; connections send READONLY after connecting, a
// MOVED from a replica is followed like any other, and the slot map is fetched every 2 s
// (replicas join and leave without a MOVED).
// MOVED and ASK at most `max_redirects` times per command (retries too when there is no
// deadline), after which the error reply stands (a backend_error for the task). Resent commands of
// one round again leave together. A node that fails a batch (connection refused or lost: a dead
// master) makes the batch fail as a single server's would (unavailable, backend_error,
// deadline_exceeded) and starts a map refresh from another node, which finds the promoted replica.
//
// Counters: the endpoint's RedisStats, shared by its node pools (batches counts node
// batches: rounds x nodes touched), plus moved, asked, cluster_retries, unknown_redirects
// and slot_map_refreshes; and per node a ClusterNodeStats, listed in RedisStats::Nodes()
// while the node is in the slot map (or was reached before the first map).
//
// A CLUSTER SLOTS reply naming more than `max_cluster_nodes` nodes, or otherwise bad, is
// refused (logged when the reason differs from the last one logged) and the map kept.
//
// A node that leaves the slot map (removed from the cluster) is retired: its stats leave
// the list, and its pool is closed as soon as no node batch or map fetch waits on it, so
// that rankd stops reconnecting to it. Map fetches ask the map's nodes first and the
// URL's seeds only when none of those answers, so a removed seed is not reconnected.
//
// Threads: create, use, Close and destroy on the loop thread of `loop` only; the stats
// from any thread.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/block_pool.h"
#include "core/deadline.h"
#include "core/event_loop.h"
#include "core/timer_queue.h"
#include "redis/client.h"
#include "redis/cluster_slots.h"
#include "redis/options.h"
#include "redis/server_pool.h"

namespace rankd {

class RedisClusterPool final : public RedisClient {
 public:
  // Starts connecting to the seeds and fetching the slot map at once.
  RedisClusterPool(EventLoop& loop, RedisEndpoint endpoint, RedisClientOptions opts);
  ~RedisClusterPool() override;

  Coro<Result<RespReplies>> Batch(RedisCommands commands, Deadline deadline) override;
  using RedisClient::Batch;
  bool live() const override;
  std::string NotLiveReason() const override;

  // Every node's pool tracks (with `config`); a change of the slot map or a MOVED
  // flushes the sink, and the map is then fetched every 2 s.
  void EnableTracking(const TrackingConfig& config) override;
  // Every node in the slot map tracks.
  bool tracking_ready() const override;
  void SetTrackingPrefixes(std::vector<std::string> prefixes) override;

  void Close() override;

 private:
  struct Round;
  struct Share;
  struct Resend;
  struct Followups;
  struct Redirect;
  struct MapWaiter {
    uint64_t fetch;  // resumed once this many fetches have ended
    std::coroutine_handle<> handle;
    TimerQueue::Id timer;  // resumes it at its deadline; 0 without one
  };
  // co_await FreshSlotMap(...): see there.
  struct FreshMapAwaiter {
    RedisClusterPool& pool;
    uint64_t fetch;
    Deadline deadline;
    bool await_ready() const noexcept {
      return pool.closed_ || pool.refreshes_ended_ >= fetch || deadline_exceeded(deadline);
    }
    void await_suspend(std::coroutine_handle<> h) { pool.AddMapWaiter(fetch, h, deadline); }
    void await_resume() const noexcept {}
  };
  struct Node {
    std::unique_ptr<RedisPool> pool;
    std::shared_ptr<ClusterNodeStats> stats;
    int in_flight = 0;     // node batches and map fetches waiting on it
    bool retired = false;  // left the slot map; closed once in_flight is 0
  };
  template <class T>
  using PoolVector = std::vector<T, block_pool::Allocator<T>>;

  // The node at `addr` that is not retired, made on first use.
  Node& NodeAt(const RedisAddress& addr);
  // One batch to one node, counted in its stats; closes a retired node it leaves idle.
  Coro<Result<RespReplies>> NodeBatch(Node& node, RedisCommands cmds, Deadline deadline);
  // Publishes the stats of the nodes not retired to RedisStats::Nodes().
  void PublishNodes();
  // The node serving `slot` (its master), nullptr when none does.
  Node* OwnerOf(int slot) const {
    uint16_t o = bucket_owner_[static_cast<size_t>(slot) >> kBucketShift];
    if (o == kMixed) o = slot_owner_[static_cast<size_t>(slot)];
    return owners_[o];
  }
  // Makes `node` the owner of `slot` (a MOVED).
  void SetOwner(int slot, Node* node);
  // Sets bucket_owner_[b] from slot_owner_.
  void SetBucket(size_t b);
  // Where command i goes first: its slot's master, or with read_from=replica a live
  // replica when the command reads.
  Node* FirstTarget(const RedisCommands& commands, size_t i);
  // Starts fetching the slot map unless a fetch is running or one ended under 100 ms ago.
  void RefreshSlotMap();
  void StartRefresh();
  // Resumes once the slot map fetch number `fetch` (NextFetch) has ended, installed or
  // not, or `deadline` passed (refreshes_ended_ < fetch then), or the pool closed.
  // Resumes through the loop's deferred queue: check `alive` and closed_ after.
  FreshMapAwaiter FreshSlotMap(uint64_t fetch, Deadline deadline) {
    return FreshMapAwaiter{*this, fetch, deadline};
  }
  // The number of the next fetch to start, started now if none is running (a running one
  // started before the caller's reply came).
  uint64_t NextFetch();
  void AddMapWaiter(uint64_t fetch, std::coroutine_handle<> h, Deadline deadline);
  // After a fetch ended: resumes the waiters it satisfies; starts the next fetch when
  // others wait for one that started after it.
  void WakeMapWaiters();
  Coro<void> RunRefresh(std::shared_ptr<bool> alive);
  // LogWarn(line) unless it is the last line this pool logged so (a node that keeps
  // sending the same bad reply or redirect is logged once, not once per fetch).
  void LogOnce(std::string line);
  // Whether the slot map names `addr` (a master or a replica).
  bool InMap(const RedisAddress& addr) const { return map_ && map_->IndexOf(addr) >= 0; }
  void Install(const SlotMap& map);
  // One round of a batch: sends the commands to their targets, every node at once (the
  // first round: every command to its FirstTarget; later ones: `resend`, ASKING first
  // where asked), and places each reply in `replies` (gathered: the node batches' replies
  // are kept, not copied), adding one part per node touched, whose node goes to
  // `part_node`. A target of nullptr (a slot no node serves) gets a CLUSTERDOWN error
  // reply without being sent.
  Coro<Result<void>> SendRound(const RedisCommands& commands, const PoolVector<Resend>* resend,
                               RespReplies& replies, PoolVector<Node*>& part_node,
                               Deadline deadline);
  // "MOVED 3999 127.0.0.1:6381", "ASK 3999 :6381", "TRYAGAIN ...", "CLUSTERDOWN ...":
  // what a cluster error reply asks of the client (kind kNone for any other error).
  static Redirect ParseRedirect(std::string_view err);
  // After a round: what its replies (of `resend`, or of every command after the first
  // round) ask to send again, into `next`. Errors other than redirects stay as replies.
  void ReadRound(const RespReplies& replies, const PoolVector<Node*>& part_node,
                 const PoolVector<Resend>* resend, Deadline deadline, Followups& next);
  // Sends command i where a MOVED or ASK from `from` says, next round (a MOVED also
  // updates the slot map's owner and asks for a fresh map).
  void Follow(uint32_t i, Node* from, const Redirect& redirect, PoolVector<Resend>& again);
  // Fetches the slot map again, then follows the redirects to addresses it now names;
  // the others are counted and logged, and their error replies stay.
  Coro<Result<void>> FollowStrangers(Followups& next, Deadline deadline);
  // After a TRYAGAIN or CLUSTERDOWN: waits 10..100 ms (failing when the deadline comes
  // first), then points the retried commands at their slot's current owner.
  Coro<Result<void>> PauseToRetry(const RedisCommands& commands, const RespReplies& replies,
                                  Followups& next, Deadline deadline);
  Coro<void> RunNodeBatch(Node* node, RedisCommands cmds, RespReplies* out, Deadline deadline,
                          std::shared_ptr<Round> round);
  Error Unavailable(std::string what, std::string detail) const;

  EventLoop& loop_;
  RedisClientOptions opts_;
  std::vector<std::unique_ptr<Node>> nodes_;  // retired ones too (closed): never removed
  std::optional<SlotMap> map_;
  // Per slot, once a map is known, its master as an index into owners_ (owners_[0] is
  // nullptr: unserved), and the same per bucket of 64 slots, kMixed where the bucket's
  // slots have different owners. Every command of a batch looks its slot up, at a
  // random place: the 512 bytes of buckets stay in cache, and masters serve ranges of
  // slots, so only the buckets where a range ends (or a MOVED split one) look further.
  static constexpr int kBucketShift = 6;
  static constexpr uint16_t kMixed = UINT16_MAX;
  std::vector<uint16_t> slot_owner_;
  std::vector<uint16_t> bucket_owner_;
  std::vector<Node*> owners_;   // at most kMixed entries
  std::vector<Node*> masters_;  // of the current map, each once
  // read_from=replica: the replicas of each range, and per slot its range's index (-1:
  // no replica).
  std::vector<std::vector<Node*>> replica_sets_;
  std::vector<int32_t> slot_replicas_;
  size_t next_reader_ = 0;              // spreads reads over a slot's replicas
  bool replica_refresh_armed_ = false;  // the periodic map fetch of read_from=replica
  bool refreshing_ = false;
  uint64_t refreshes_started_ = 0;
  uint64_t refreshes_ended_ = 0;
  std::vector<MapWaiter> map_waiters_;  // batches waiting on FreshSlotMap
  TimePoint last_refresh_{};            // when the last fetch ended
  std::string refresh_error_;           // why the last fetch failed, for NotLiveReason
  std::string last_logged_;  // the last refused reply or redirect logged: each is logged once
                             // until another comes
  std::optional<TrackingConfig> tracking_;
  bool closed_ = false;
  size_t next_seed_ = 0;  // where the next refresh starts asking
  uint64_t rng_;          // backoff jitter
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rankd
