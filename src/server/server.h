// Server: the N shards of `rankd serve`, the plan set they share by snapshot, reload
// and drain. The main thread owns it; shards only read what it publishes (atomics and
// posted snapshots).
//
// Threads: Start, Reload, Shutdown on the main thread. plans_loaded, draining,
// ReadinessReasons and shards() from any thread (shard loops call them for /readyz).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "plan/plan.h"
#include "server/metrics.h"
#include "server/serve_options.h"

namespace rankd {

class Shard;

class Server {
 public:
  explicit Server(ServeOptions opts);
  ~Server();

  // Loads the plans, checks the port is free, starts every shard.
  Status Start();
  // SIGHUP: loads the whole plans folder; on success every shard gets the new set, on
  // failure the old set stays and the error says why.
  Status Reload();
  // SIGTERM/SIGINT: fail readiness, drain every shard (bounded by the drain timeout),
  // then stop Redis, CPU workers and loops.
  void Shutdown();

  bool draining() const { return draining_.load(std::memory_order_acquire); }
  // "" when ready; else why not (for /readyz).
  std::string ReadinessReasons() const;
  std::string MetricsText() const { return metrics_.Serialize(); }
  const ServeOptions& options() const { return opts_; }
  int port() const;  // the bound port (useful with --port 0)

 private:
  void AddCollectors();

  ServeOptions opts_;
  Metrics metrics_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::shared_ptr<const PlanSet> plans_;  // main thread
  std::atomic<bool> draining_{false};
};

}  // namespace rankd
