#include "redis/shard_clients.h"

#include "redis/cluster_pool.h"
#include "redis/server_pool.h"

namespace rankd {

RedisPools::RedisPools(EventLoop& loop, const std::vector<RedisEndpoint>& endpoints,
                       RedisClientOptions opts)
    : loop_(loop) {
  loop_.AssertInLoopThread();
  pools_.reserve(endpoints.size());
  for (const auto& ep : endpoints) {
    if (ep.is_cluster())
      pools_.push_back(std::make_unique<RedisClusterPool>(loop, ep, opts));
    else
      pools_.push_back(std::make_unique<RedisPool>(loop, ep, opts));
  }
  // If the loop stops first, close while its handles and timers still work.
  loop.AddShutdownHook([this, alive = alive_] {
    if (*alive) Close();
  });
}

RedisPools::~RedisPools() {
  Close();
  *alive_ = false;
}

RedisClient* RedisPools::Get(std::string_view name) const {
  for (const auto& p : pools_)
    if (p->endpoint().name == name) return p.get();
  return nullptr;
}

int RedisPools::IndexOf(std::string_view name) const {
  for (size_t i = 0; i < pools_.size(); ++i)
    if (pools_[i]->endpoint().name == name) return static_cast<int>(i);
  return -1;
}

bool RedisPools::Ready() const {
  loop_.AssertInLoopThread();
  if (closed_) return false;
  for (size_t i = 0; i < pools_.size(); ++i)
    if (!pools_[i]->live() && !(i < exempt_.size() && exempt_[i])) return false;
  return true;
}

void RedisPools::SetReadyExempt(const std::vector<std::string>& names) {
  loop_.AssertInLoopThread();
  exempt_.assign(pools_.size(), false);
  for (const auto& n : names)
    if (int i = IndexOf(n); i >= 0) exempt_[static_cast<size_t>(i)] = true;
}

std::string RedisPools::NotReadyReason() const {
  loop_.AssertInLoopThread();
  if (closed_) return "redis: closed";
  std::string out;
  for (size_t i = 0; i < pools_.size(); ++i) {
    const auto& p = pools_[i];
    if (p->live() || (i < exempt_.size() && exempt_[i])) continue;
    if (!out.empty()) out += "; ";
    out += "redis endpoint " + p->endpoint().Label() + ": " + p->NotLiveReason();
  }
  return out;
}

void RedisPools::ForEachStats(
    const std::function<void(const std::string&, std::shared_ptr<const RedisStats>)>& fn) const {
  for (const auto& p : pools_) fn(p->endpoint().name, p->shared_stats());
}

void RedisPools::Close() {
  if (closed_) return;  // also when destroyed after the loop has stopped
  loop_.AssertInLoopThread();
  closed_ = true;
  for (auto& p : pools_) p->Close();
}

}  // namespace rankd
