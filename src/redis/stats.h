// RedisStats: the counters of one endpoint's pool on one shard, for /metrics and for
// tests ("this task cost one batch, one socket write"). Written by the shard's loop
// thread only; read from any thread (relaxed atomics: a scrape sees each counter
// whole, not all of them at one instant).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rankd {

// One Redis Cluster node's share of an endpoint's work on one shard. Written by the
// shard's loop thread only; read from any thread.
struct ClusterNodeStats {
  using Counter = std::atomic<uint64_t>;
  explicit ClusterNodeStats(std::string n) : node(std::move(n)) {}
  const std::string node;         // "host:port"
  Counter commands{0};            // commands sent to it (ASKING included)
  Counter errors{0};              // failed node batches and error replies other than redirects
  Counter moved{0};               // MOVED replies it sent
  Counter asked{0};               // ASK replies it sent
  Counter retries{0};             // TRYAGAIN / CLUSTERDOWN replies it sent
  Counter slot_map_refreshes{0};  // slot maps fetched from it and installed
};

struct RedisStats {
  using Counter = std::atomic<uint64_t>;

  // Work.
  Counter batches{0};        // Batch() calls that reached a connection
  Counter commands{0};       // commands sent (written to a connection)
  Counter socket_writes{0};  // write(2) rounds: one per flush of an output buffer
  Counter replies{0};        // replies received (including error replies)
  Counter late_replies{0};   // replies that arrived after their batch gave up
  // Failures, by the error code the caller sees.
  Counter error_replies{0};       // Redis answered with an error (-> backend_error)
  Counter failed_unavailable{0};  // batches failed: no connection / connection lost
  Counter failed_deadline{0};     // batches failed: deadline passed first
  Counter expired_unsent{0};      // of those, never written: the deadline had passed
  Counter failed_backend{0};      // batches failed: their connection dropped a bad reply
  // Connections.
  Counter connects{0};                       // connections that completed the handshake
  Counter connect_failures{0};               // attempts that failed (refused, timeout, AUTH, ...)
  Counter disconnects{0};                    // live connections lost
  Counter bad_replies{0};                    // connections dropped over a reply: over a ReplyLimits
                                             // bound, a protocol error, or one nobody asked for
  std::atomic<int64_t> connections_live{0};  // gauge: handshake done, not yet lost
  // Redis Cluster endpoints only (redis/cluster_pool.h); `cluster` is set before the
  // stats are shared and never changes.
  bool cluster = false;
  Counter moved{0};               // MOVED replies followed
  Counter asked{0};               // ASK replies followed
  Counter cluster_retries{0};     // TRYAGAIN / CLUSTERDOWN / unserved slot: resent after a pause
  Counter slot_map_refreshes{0};  // slot maps fetched and installed
  Counter unknown_redirects{0};   // MOVED / ASK to an address the slot map does not name
                                  // (once fetched again): not followed

  // The cluster nodes this shard's client keeps a pool for, that have not left the slot
  // map: set by the loop thread, copied by scrapes.
  void SetNodes(std::vector<std::shared_ptr<const ClusterNodeStats>> nodes) {
    std::lock_guard lk(nodes_mu_);
    nodes_ = std::move(nodes);
  }
  std::vector<std::shared_ptr<const ClusterNodeStats>> Nodes() const {
    std::lock_guard lk(nodes_mu_);
    return nodes_;
  }

  // Batch latency, from Batch() to the last reply: cumulative-style buckets in
  // microseconds (Prometheus histogram layout; the last bucket is +Inf).
  static constexpr std::array<uint64_t, 12> kLatencyBoundsUs = {
      100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000};
  std::array<Counter, kLatencyBoundsUs.size() + 1> latency_buckets{};  // non-cumulative
  Counter latency_sum_us{0};
  Counter latency_count{0};

  void ObserveLatencyUs(uint64_t us) {
    size_t i = 0;
    while (i < kLatencyBoundsUs.size() && us > kLatencyBoundsUs[i]) ++i;
    latency_buckets[i].fetch_add(1, std::memory_order_relaxed);
    latency_sum_us.fetch_add(us, std::memory_order_relaxed);
    latency_count.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  mutable std::mutex nodes_mu_;
  std::vector<std::shared_ptr<const ClusterNodeStats>> nodes_;
};

// Shorthand for the loop thread's relaxed increments.
inline void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.fetch_add(n, std::memory_order_relaxed);
}
inline uint64_t Read(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

}  // namespace rankd
