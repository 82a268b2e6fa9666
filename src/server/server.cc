#include "server/server.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/log.h"
#include "core/timeout.h"
#include "http/listener.h"
#include "plan/loader.h"
#include "redis/stats.h"
#include "server/shard.h"
#include "tasks/task.h"

namespace rankd {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric Sample(std::vector<ClientMetric::Label> labels, double v, MetricType t) {
  ClientMetric m;
  m.label = std::move(labels);
  if (t == MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  return m;
}

MetricFamily Family(std::string name, std::string help, MetricType t) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = t;
  return f;
}

// process_* metrics of the Prometheus conventions, read from /proc at scrape time.
void CollectProcess(std::vector<MetricFamily>& out) {
  long page = sysconf(_SC_PAGESIZE);
  long ticks = sysconf(_SC_CLK_TCK);
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  auto rss =
      Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge);
  rss.metric.push_back(Sample({}, static_cast<double>(resident) * page, MetricType::Gauge));
  out.push_back(std::move(rss));

  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::getline(stat, line);
  // Fields after the ")" that closes the command name: utime is the 12th, stime the 13th.
  auto close = line.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(line.substr(close + 2));
    std::string f;
    double utime = 0, stime = 0;
    for (int i = 1; rest >> f && i <= 13; ++i) {
      if (i == 12) utime = std::stod(f);
      if (i == 13) stime = std::stod(f);
    }
    auto cpu = Family("process_cpu_seconds_total",
                      "Total user and system CPU time spent in seconds.", MetricType::Counter);
    cpu.metric.push_back(
        Sample({}, (utime + stime) / static_cast<double>(ticks), MetricType::Counter));
    out.push_back(std::move(cpu));
  }

  int fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++fds;
    closedir(d);
    --fds;  // the directory stream's own fd
  }
  auto ofd = Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge);
  ofd.metric.push_back(Sample({}, fds, MetricType::Gauge));
  out.push_back(std::move(ofd));
}

// The per-node series of a cluster endpoint `ep`: each node's counters summed over the
// shards whose slot map still has it, in order of first appearance.
void AddNodeSamples(
    const std::string& ep,
    const std::vector<std::pair<std::string, std::shared_ptr<const RedisStats>>>& stats,
    MetricFamily& commands, MetricFamily& errors, MetricFamily& redirects,
    MetricFamily& refreshes) {
  struct Sums {
    std::string node;
    double commands = 0, errors = 0, moved = 0, asked = 0, retries = 0, refreshes = 0;
  };
  std::vector<Sums> sums;
  for (const auto& [name, st] : stats) {
    if (name != ep || !st->cluster) continue;
    for (const auto& n : st->Nodes()) {
      auto it =
          std::find_if(sums.begin(), sums.end(), [&](const Sums& x) { return x.node == n->node; });
      if (it == sums.end()) it = sums.insert(sums.end(), Sums{n->node});
      it->commands += Read(n->commands);
      it->errors += Read(n->errors);
      it->moved += Read(n->moved);
      it->asked += Read(n->asked);
      it->retries += Read(n->retries);
      it->refreshes += Read(n->slot_map_refreshes);
    }
  }
  for (const auto& x : sums) {
    const std::vector<ClientMetric::Label> labels = {{"endpoint", ep}, {"node", x.node}};
    commands.metric.push_back(Sample(labels, x.commands, MetricType::Counter));
    errors.metric.push_back(Sample(labels, x.errors, MetricType::Counter));
    refreshes.metric.push_back(Sample(labels, x.refreshes, MetricType::Counter));
    const std::pair<const char*, double> kinds[] = {
        {"moved", x.moved}, {"ask", x.asked}, {"retry", x.retries}};
    for (const auto& [kind, v] : kinds) {
      auto l = labels;
      l.push_back({"kind", kind});
      redirects.metric.push_back(Sample(std::move(l), v, MetricType::Counter));
    }
  }
}

// The ops plans may use: the test-only ones too with --enable-test-ops.
const TaskRegistry& Tasks(const ServeOptions& o) {
  return o.enable_test_ops ? TaskRegistry::WithTestOps() : TaskRegistry::Default();
}

}  // namespace

Server::Server(ServeOptions opts) : opts_(std::move(opts)), metrics_(opts_.metrics) {}

Server::~Server() { Shutdown(); }

int Server::port() const { return shards_.empty() ? 0 : shards_.front()->port(); }

Status Server::Start() {
  auto loaded = LoadPlanDir(opts_.plans, Tasks(opts_), opts_.model_limits);
  if (!loaded) {
    metrics_.plan_reloads->Add({{"result", "error"}}).Increment();
    return Fail(Error::BadRequest("plans: " + loaded.error().message));
  }
  metrics_.plan_reloads->Add({{"result", "ok"}}).Increment();
  plans_ = std::make_shared<const PlanSet>(std::move(*loaded));
  plan_count_.store(plans_->plans.size(), std::memory_order_release);
  if (!opts_.auth_token_file.empty()) {
    auto tokens = AuthTokens::Load(opts_.auth_token_file);
    if (!tokens) return Fail(Error::BadRequest("--auth-token-file: " + tokens.error().message));
    auth_ = std::move(*tokens);
  }
  if (opts_.cursor_key_file.empty()) {
    cursor_key_ = CursorKey::Random();
  } else {
    auto key = CursorKey::Load(opts_.cursor_key_file);
    if (!key) return Fail(Error::BadRequest("--cursor-key-file: " + key.error().message));
    cursor_key_ = std::move(*key);
  }
  if (opts_.port != 0) {
    if (auto free = http::CheckPortFree(opts_.host, opts_.port); !free) return free;
  }
  if (opts_.metrics_port != 0) {
    if (auto free = http::CheckPortFree(opts_.metrics_host, opts_.metrics_port); !free)
      return Fail(Error::Internal("--metrics-port: " + free.error().message));
  }
  if (opts_.access_log) access_log_ = std::make_unique<AccessLog>(opts_.shards, STDOUT_FILENO);
  for (const SinkConfig& c : opts_.served_log) {
    file_sinks_.push_back(c.kind == SinkConfig::Kind::kFile ? std::make_unique<FileSink>(c)
                                                            : nullptr);
    file_sink_ptrs_.push_back(file_sinks_.back().get());
  }
  // Every shard exists before any starts: shard loops read shards_ (readiness), so the
  // vector must not change while they run.
  for (int i = 0; i < opts_.shards; ++i)
    shards_.push_back(std::make_unique<Shard>(i, opts_, *this, metrics_));
  // Collectors are in place before a shard can serve a scrape.
  AddCollectors();
  for (auto& shard : shards_) {
    if (auto st = shard->Start(plans_, auth_, opts_.port); !st) {
      Shutdown();
      return st;
    }
    {
      std::lock_guard lk(redis_stats_mu_);
      for (const auto& e : shard->redis_stats()) redis_stats_.push_back(e);
      if (auto cs = shard->cache_stats()) cache_stats_.emplace_back(shard->id(), std::move(cs));
    }
    // With --port 0 the first shard picks the port and the others join it.
    if (opts_.port == 0) opts_.port = shard->port();
  }
  started_.store(true, std::memory_order_release);
  LogInfo(
      "rankd " RANKD_VERSION " serving on " + opts_.host + ":" + std::to_string(port()) + " with " +
      std::to_string(opts_.shards) + " shard(s), " + std::to_string(plans_->plans.size()) +
      " plan(s) from " + opts_.plans +
      (auth_ ? ", " + std::to_string(auth_->size()) + " API token(s) from " + opts_.auth_token_file
             : std::string()) +
      (opts_.cursor_key_file.empty()
           ? "; page cursors signed with a random key of this process (no --cursor-key-file): "
             "they work on this replica only"
           : std::string()));
  return {};
}

Status Server::ReloadAuthTokens() {
  if (opts_.auth_token_file.empty()) return {};
  auto tokens = AuthTokens::Load(opts_.auth_token_file);
  if (!tokens) {
    LogError("--auth-token-file: keeping the " + std::to_string(auth_->size()) +
             " token(s) loaded before: " + tokens.error().message);
    return Fail(tokens.error());
  }
  auth_ = std::move(*tokens);
  for (auto& s : shards_) s->InstallAuthTokens(auth_);
  LogInfo("--auth-token-file: " + std::to_string(auth_->size()) + " token(s) from " +
          opts_.auth_token_file);
  return {};
}

Status Server::Reload() {
  auto loaded = LoadPlanDir(opts_.plans, Tasks(opts_), opts_.model_limits);
  if (!loaded) {
    metrics_.plan_reloads->Add({{"result", "error"}}).Increment();
    LogError("reload rejected, keeping the previous plans: " + loaded.error().message);
    return Fail(loaded.error());
  }
  metrics_.plan_reloads->Add({{"result", "ok"}}).Increment();
  plans_ = std::make_shared<const PlanSet>(std::move(*loaded));
  plan_count_.store(plans_->plans.size(), std::memory_order_release);
  for (auto& s : shards_) s->InstallPlans(plans_);
  LogInfo("reloaded " + std::to_string(plans_->plans.size()) + " plan(s) from " + opts_.plans);
  return {};
}

void Server::StopBeingReady() {
  if (phase_.load(std::memory_order_acquire) == Phase::kServing)
    phase_.store(Phase::kDrainDelay, std::memory_order_release);
}

void Server::Shutdown() {
  if (shards_.empty()) return;
  phase_.store(Phase::kDraining, std::memory_order_release);
  LogInfo("draining: no new connections; finishing requests already read");
  for (auto& s : shards_) s->Drain();
  auto until = Clock::now() + std::chrono::milliseconds(opts_.drain_timeout_ms);
  auto all_drained = [&] {
    for (auto& s : shards_)
      if (!s->drained()) return false;
    return true;
  };
  while (!all_drained() && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!all_drained()) {
    LogWarn("drain timeout (" + std::to_string(opts_.drain_timeout_ms) +
            " ms) passed: closing what is left");
    for (auto& s : shards_) s->CloseNow();
    auto hard = Clock::now() + std::chrono::seconds(2);
    while (!all_drained() && Clock::now() < hard)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  scrape_pool_.WaitIdle();  // a scrape posts back to its shard's loop: finish it first
  for (auto& s : shards_) s->Stop();
  // Their writers post to shard loops: they stop (having written what they were given)
  // while the loops, stopped, still exist.
  file_sinks_.clear();
  file_sink_ptrs_.clear();
  shards_.clear();
  access_log_.reset();  // writes the last lines
  LogInfo("stopped");
}

bool Server::RequestScrape(EventLoop& loop, bool metrics_address, ScrapeDone done) {
  std::lock_guard lk(scrape_mu_);
  size_t& waiting = scrapes_waiting_[metrics_address ? 1 : 0];
  if (waiting >= opts_.max_queued_scrapes) return false;
  if (!scrape_running_) {
    if (!scrape_pool_.Submit([this] { RunScrapes(); })) return false;  // shutting down
    scrape_running_ = true;
  }
  ++waiting;
  scrape_waiters_.push_back({&loop, std::move(done)});
  return true;
}

void Server::RunScrapes() {
  std::vector<ScrapeWaiter> batch;
  for (;;) {
    batch.clear();
    {
      std::lock_guard lk(scrape_mu_);
      if (scrape_waiters_.empty()) {
        scrape_running_ = false;
        return;
      }
      batch.swap(scrape_waiters_);
      scrapes_waiting_[0] = scrapes_waiting_[1] = 0;
    }
    auto text = std::make_shared<const std::string>(MetricsText());
    // A loop that is stopping refuses the callable and destroys it on its own thread
    // (EventLoop::Post), so the Responder inside never dies on this one.
    for (auto& w : batch) (void)w.loop->Post([done = std::move(w.done), text] { done(text); });
  }
}

std::string Server::ReadinessReasons() const {
  switch (phase_.load(std::memory_order_acquire)) {
    case Phase::kServing: break;
    case Phase::kDrainDelay:
      return "draining: still serving until --drain-delay-ms ends, then closing";
    case Phase::kDraining: return "draining: closed to new connections, finishing requests";
  }
  if (!started_.load(std::memory_order_acquire)) return "starting: not every shard listens yet";
  if (plan_count_.load(std::memory_order_acquire) == 0) return "no plans loaded";
  std::string why;
  for (const auto& s : shards_)
    if (!s->redis_ready()) {
      if (!why.empty()) why += "; ";
      why += "shard " + std::to_string(s->id()) + " has no live connection to every Redis endpoint";
    }
  return why;
}

void Server::AddCollectors() {
  metrics_.AddCollector(CollectProcess);
  metrics_.AddCollector([](std::vector<MetricFamily>& out) {
    auto f = Family("rankd_late_completions_total",
                    "Work that finished after its timeout race was lost (result discarded)",
                    MetricType::Counter);
    f.metric.push_back(
        Sample({}, static_cast<double>(LateCompletions().load()), MetricType::Counter));
    out.push_back(std::move(f));
  });
  // The shards' caches (docs/cache.md), per shard.
  metrics_.AddCollector([this](std::vector<MetricFamily>& out) {
    std::vector<std::pair<int, std::shared_ptr<const CacheStats>>> stats;
    {
      std::lock_guard lk(redis_stats_mu_);
      stats = cache_stats_;
    }
    if (stats.empty()) return;
    struct Def {
      const char* name;
      const char* help;
      MetricType type;
      double (*read)(const CacheStats&);
    };
    static constexpr Def kDefs[] = {
        {"rankd_cache_hits_total", "Keys served from the shard's cache", MetricType::Counter,
         [](const CacheStats& s) { return static_cast<double>(Read(s.hits)); }},
        {"rankd_cache_misses_total", "Keys of caching nodes asked of Redis", MetricType::Counter,
         [](const CacheStats& s) { return static_cast<double>(Read(s.misses)); }},
        {"rankd_cache_evictions_total", "Cache entries dropped for the byte budget",
         MetricType::Counter,
         [](const CacheStats& s) { return static_cast<double>(Read(s.evictions)); }},
        {"rankd_cache_invalidations_total",
         "Keys Redis invalidated, plus one per flush of the whole cache", MetricType::Counter,
         [](const CacheStats& s) { return static_cast<double>(Read(s.invalidations)); }},
        {"rankd_cache_expirations_total", "Cache entries dropped past their TTL",
         MetricType::Counter,
         [](const CacheStats& s) { return static_cast<double>(Read(s.expirations)); }},
        {"rankd_cache_entries", "Entries in the shard's cache", MetricType::Gauge,
         [](const CacheStats& s) { return static_cast<double>(s.entries.load()); }},
        {"rankd_cache_bytes", "Bytes the shard's cache charges against its budget",
         MetricType::Gauge,
         [](const CacheStats& s) { return static_cast<double>(s.bytes.load()); }},
    };
    for (const Def& d : kDefs) {
      auto f = Family(d.name, d.help, d.type);
      for (const auto& [shard, st] : stats)
        f.metric.push_back(Sample({{"shard", std::to_string(shard)}}, d.read(*st), d.type));
      out.push_back(std::move(f));
    }
  });
  // Redis: the pools' atomics, summed over shards per endpoint. The list grows while
  // shards start, so a scrape copies it under a lock (scrapes only, never /rank).
  metrics_.AddCollector([this](std::vector<MetricFamily>& out) {
    std::vector<std::pair<std::string, std::shared_ptr<const RedisStats>>> stats;
    {
      std::lock_guard lk(redis_stats_mu_);
      stats = redis_stats_;
    }
    std::vector<std::string> endpoints;
    for (const auto& [ep, st] : stats)
      if (std::find(endpoints.begin(), endpoints.end(), ep) == endpoints.end())
        endpoints.push_back(ep);
    auto commands =
        Family("rankd_redis_commands_total", "Redis commands sent", MetricType::Counter);
    auto batches = Family("rankd_redis_batches_total",
                          "Pipelined Redis batches (one round trip each)", MetricType::Counter);
    auto errors = Family("rankd_redis_errors_total", "Redis failures by kind", MetricType::Counter);
    auto late = Family("rankd_redis_late_replies_total", "Replies that came after their deadline",
                       MetricType::Counter);
    auto conns = Family("rankd_redis_connections", "Redis connections by state", MetricType::Gauge);
    auto values =
        Family("rankd_redis_bad_values_total",
               "Values read from Redis that became null or were dropped, by family and kind",
               MetricType::Counter);
    ForEachFamilyValueStats([&](const std::string& family, const FamilyValueStats& v) {
      const std::pair<const char*, double> kinds[] = {
          {"missing_field", Read(v.missing_field)},
          {"unparsable_field", Read(v.unparsable_field)},
          {"bad_id", Read(v.bad_id)},
          {"bad_json", Read(v.bad_json)}};
      for (const auto& [kind, n] : kinds)
        values.metric.push_back(
            Sample({{"family", family}, {"kind", kind}}, n, MetricType::Counter));
    });
    auto lat = Family("rankd_redis_batch_duration_seconds",
                      "Time from sending a batch to its last reply", MetricType::Histogram);
    // Redis Cluster endpoints only: single servers keep their series as they were.
    auto redirects = Family("rankd_redis_cluster_redirects_total",
                            "Redis Cluster replies that sent a command elsewhere or again, by kind",
                            MetricType::Counter);
    auto refreshes = Family("rankd_redis_cluster_slot_map_refreshes_total",
                            "Redis Cluster slot maps fetched and installed", MetricType::Counter);
    // Per cluster node, while the node is in the slot map.
    auto node_commands = Family("rankd_redis_cluster_node_commands_total",
                                "Redis commands sent to each cluster node", MetricType::Counter);
    auto node_errors =
        Family("rankd_redis_cluster_node_errors_total",
               "Failed batches and error replies (not redirects) of each cluster node",
               MetricType::Counter);
    auto node_redirects =
        Family("rankd_redis_cluster_node_redirects_total",
               "Redirect and retry replies of each cluster node, by kind", MetricType::Counter);
    auto node_refreshes =
        Family("rankd_redis_cluster_node_slot_map_refreshes_total",
               "Redis Cluster slot maps fetched from each node and installed", MetricType::Counter);
    for (const auto& ep : endpoints) {
      double cmd = 0, bat = 0, err_reply = 0, unavailable = 0, deadline = 0, connect_fail = 0,
             disconnects = 0, live = 0, lte = 0, sum_us = 0, backend = 0, bad_replies = 0,
             unknown_redirects = 0;
      uint64_t count = 0;
      std::array<uint64_t, RedisStats::kLatencyBoundsUs.size() + 1> buckets{};
      for (const auto& [name, st] : stats) {
        if (name != ep) continue;
        cmd += Read(st->commands);
        bat += Read(st->batches);
        err_reply += Read(st->error_replies);
        unavailable += Read(st->failed_unavailable);
        deadline += Read(st->failed_deadline);
        backend += Read(st->failed_backend);
        bad_replies += Read(st->bad_replies);
        unknown_redirects += Read(st->unknown_redirects);
        connect_fail += Read(st->connect_failures);
        disconnects += Read(st->disconnects);
        live += static_cast<double>(st->connections_live.load(std::memory_order_relaxed));
        lte += Read(st->late_replies);
        sum_us += Read(st->latency_sum_us);
        count += Read(st->latency_count);
        for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += Read(st->latency_buckets[i]);
      }
      commands.metric.push_back(Sample({{"endpoint", ep}}, cmd, MetricType::Counter));
      batches.metric.push_back(Sample({{"endpoint", ep}}, bat, MetricType::Counter));
      const std::pair<const char*, double> error_kinds[] = {
          {"error_reply", err_reply},  {"unavailable", unavailable},
          {"deadline", deadline},      {"backend", backend},
          {"bad_reply", bad_replies},  {"connect_failed", connect_fail},
          {"disconnect", disconnects}, {"unknown_redirect", unknown_redirects}};
      for (const auto& [kind, v] : error_kinds)
        errors.metric.push_back(Sample({{"endpoint", ep}, {"kind", kind}}, v, MetricType::Counter));
      late.metric.push_back(Sample({{"endpoint", ep}}, lte, MetricType::Counter));
      conns.metric.push_back(
          Sample({{"endpoint", ep}, {"state", "live"}}, live, MetricType::Gauge));
      ClientMetric h;
      h.label = {{"endpoint", ep}};
      h.histogram.sample_count = count;
      h.histogram.sample_sum = sum_us / 1e6;
      uint64_t cum = 0;
      for (size_t i = 0; i < buckets.size(); ++i) {
        cum += buckets[i];
        ClientMetric::Bucket b;
        b.cumulative_count = cum;
        b.upper_bound = i < RedisStats::kLatencyBoundsUs.size()
                            ? static_cast<double>(RedisStats::kLatencyBoundsUs[i]) / 1e6
                            : std::numeric_limits<double>::infinity();
        h.histogram.bucket.push_back(b);
      }
      lat.metric.push_back(std::move(h));
      double moved = 0, asked = 0, retried = 0, refreshed = 0;
      bool cluster = false;
      for (const auto& [name, st] : stats) {
        if (name != ep || !st->cluster) continue;
        cluster = true;
        moved += Read(st->moved);
        asked += Read(st->asked);
        retried += Read(st->cluster_retries);
        refreshed += Read(st->slot_map_refreshes);
      }
      if (!cluster) continue;
      const std::pair<const char*, double> redirect_kinds[] = {
          {"moved", moved}, {"ask", asked}, {"retry", retried}};
      for (const auto& [kind, v] : redirect_kinds)
        redirects.metric.push_back(
            Sample({{"endpoint", ep}, {"kind", kind}}, v, MetricType::Counter));
      refreshes.metric.push_back(Sample({{"endpoint", ep}}, refreshed, MetricType::Counter));
      AddNodeSamples(ep, stats, node_commands, node_errors, node_redirects, node_refreshes);
    }
    for (auto* f : {&commands, &batches, &errors, &late, &conns, &values, &lat})
      out.push_back(std::move(*f));
    for (auto* f :
         {&redirects, &refreshes, &node_commands, &node_errors, &node_redirects, &node_refreshes})
      if (!f->metric.empty()) out.push_back(std::move(*f));
  });
}

}  // namespace rankd
