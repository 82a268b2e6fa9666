// Redis Cluster key slots and the slot map: which node serves each of the 16384 slots.
// A key's slot is CRC16 (XMODEM: polynomial 0x1021, initial value 0) of the key modulo
// 16384, where a key with a non-empty `{hash tag}` (the text between its first '{' and
// the first '}' after it) hashes only the tag, so that "{user1}.a" and "{user1}.b" share a
// slot. The slot map is built from a `CLUSTER SLOTS` reply: in time linear in the reply,
// with the nodes it may name bounded (a hostile or broken node's reply costs the loop
// no more than its size).
//
// Threads: pure functions and plain values; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "redis/endpoint.h"
#include "redis/resp_replies.h"

namespace rankd {

inline constexpr int kClusterSlots = 16384;

uint16_t Crc16Xmodem(std::string_view bytes);

// The slot of `key` (the whole key as sent, prefix included), with the hash tag rule.
int KeySlot(std::string_view key);

class SlotMap {
 public:
  struct Range {
    int first = 0;  // slots first..last, inclusive
    int last = 0;
    int master = 0;             // index into nodes()
    std::vector<int> replicas;  // indexes into nodes()
  };

  // From a CLUSTER SLOTS reply received from `from`: [[first, last, [host, port, id, ...]
  // (the master), [host, port, id, ...] (each replica)...], ...]. A node announced with an
  // empty host ("" or "?": it does not know its own address) is `from`'s host. Fails
  // (backend_error) on any other shape, when a slot is claimed twice, or when the reply
  // names more than `max_nodes` distinct nodes (--redis-max-cluster-nodes). Slots no
  // range claims have no master (a cluster that is not ok).
  static Result<SlotMap> FromClusterSlots(RespView reply, const RedisAddress& from,
                                          size_t max_nodes);

  // Every node that masters or replicates a range, each once, in order of appearance.
  const std::vector<RedisAddress>& nodes() const { return nodes_; }
  const std::vector<Range>& ranges() const { return ranges_; }
  // The index in nodes() of the master of `slot`, -1 when no node serves it.
  int MasterOf(int slot) const { return master_of_[static_cast<size_t>(slot)]; }
  // The index of `addr` in nodes(), -1 when absent. Constant time.
  int IndexOf(const RedisAddress& addr) const;

 private:
  // "host" '\0' "port": a node's key in index_.
  static std::string Key(const RedisAddress& addr);

  std::vector<RedisAddress> nodes_;
  std::unordered_map<std::string, int> index_;  // Key(nodes_[i]) -> i
  std::vector<Range> ranges_;
  std::array<int32_t, kClusterSlots> master_of_{};
};

}  // namespace rankd
