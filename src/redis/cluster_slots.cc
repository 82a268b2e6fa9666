#include "redis/cluster_slots.h"

#include <algorithm>

namespace rankd {

namespace {

// CRC16-CCITT (XMODEM) by table: one lookup per byte.
constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> t{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b)
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    t[static_cast<size_t>(i)] = crc;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

// Two bytes a step: with h and l the high and low byte of the CRC, the CRC after bytes
// b0 b1 is T[l ^ b1] ^ P[h ^ b0] (T is linear over XOR), where P[x] is what the CRC x
// would be after one more zero byte. Two independent lookups instead of two in a chain:
// every command a cluster batch routes hashes its key.
constexpr std::array<uint16_t, 256> MakeCrc16PairTable() {
  std::array<uint16_t, 256> p{};
  for (size_t x = 0; x < 256; ++x) {
    const uint16_t t = kCrc16Table[x];
    p[x] = static_cast<uint16_t>(((t & 0xff) << 8) ^ kCrc16Table[t >> 8]);
  }
  return p;
}
constexpr std::array<uint16_t, 256> kCrc16PairTable = MakeCrc16PairTable();

Error BadSlots(std::string what) {
  return Error::Backend("bad CLUSTER SLOTS reply: " + std::move(what));
}

}  // namespace

uint16_t Crc16Xmodem(std::string_view bytes) {
  uint16_t crc = 0;
  size_t i = 0;
  for (; i + 2 <= bytes.size(); i += 2) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    const auto b1 = static_cast<unsigned char>(bytes[i + 1]);
    crc = static_cast<uint16_t>(kCrc16PairTable[(crc >> 8) ^ b0] ^ kCrc16Table[(crc & 0xff) ^ b1]);
  }
  if (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

int KeySlot(std::string_view key) {
  if (size_t open = key.find('{'); open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return Crc16Xmodem(key) & (kClusterSlots - 1);
}

std::string SlotMap::Key(const RedisAddress& addr) {
  std::string key = addr.host;
  key += '\0';
  key += std::to_string(addr.port);
  return key;
}

int SlotMap::IndexOf(const RedisAddress& addr) const {
  auto it = index_.find(Key(addr));
  return it == index_.end() ? -1 : it->second;
}

Result<SlotMap> SlotMap::FromClusterSlots(RespView reply, const RedisAddress& from,
                                          size_t max_nodes) {
  if (reply.is_error()) return Fail(BadSlots("error: " + std::string(reply.str())));
  if (!reply.is_array()) return Fail(BadSlots(std::string(RespKindName(reply.kind()))));
  SlotMap map;
  map.master_of_.fill(-1);
  auto node_of = [&](RespView n) -> Result<int> {
    const RespView host = n.At(0), port_value = n.At(1);
    if (!n.is_array() || n.size() < 2 || !host.is_string() || !port_value.is_integer())
      return Fail(BadSlots("a node is not [host, port, ...]"));
    const int64_t port = port_value.integer();
    if (port < 1 || port > 65535) return Fail(BadSlots("port " + std::to_string(port)));
    RedisAddress addr{std::string(host.str()), static_cast<int>(port)};
    if (addr.host.empty() || addr.host == "?") addr.host = from.host;
    auto [it, added] = map.index_.try_emplace(Key(addr), static_cast<int>(map.nodes_.size()));
    if (!added) return it->second;
    if (map.nodes_.size() >= max_nodes)
      return Fail(BadSlots("more than " + std::to_string(max_nodes) +
                           " nodes (--redis-max-cluster-nodes)"));
    map.nodes_.push_back(std::move(addr));
    return it->second;
  };
  // One pass over each range's elements: the reply is walked in linear time.
  for (RespView r : reply) {
    auto e = r.begin();
    const RespView first_value = r.size() >= 3 ? *e : RespView();
    const RespView last_value = r.size() >= 3 ? *++e : RespView();
    if (!r.is_array() || r.size() < 3 || !first_value.is_integer() || !last_value.is_integer())
      return Fail(BadSlots("a range is not [first, last, master, replicas...]"));
    int64_t first = first_value.integer(), last = last_value.integer();
    if (first < 0 || last < first || last >= kClusterSlots)
      return Fail(BadSlots("range " + std::to_string(first) + "-" + std::to_string(last)));
    Range range{static_cast<int>(first), static_cast<int>(last), 0, {}};
    for (size_t k = 2; k < r.size(); ++k) {
      auto i = node_of(*++e);
      if (!i) return Fail(i.error());
      if (k == 2)
        range.master = *i;
      else
        range.replicas.push_back(*i);
    }
    for (int s = range.first; s <= range.last; ++s) {
      if (map.master_of_[static_cast<size_t>(s)] >= 0)
        return Fail(BadSlots("slot " + std::to_string(s) + " claimed twice"));
      map.master_of_[static_cast<size_t>(s)] = range.master;
    }
    map.ranges_.push_back(std::move(range));
  }
  return map;
}

}  // namespace rankd
