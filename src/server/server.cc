#include "server/server.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/log.h"
#include "core/timeout.h"
#include "http/listener.h"
#include "metrics/console_metrics.h"
#include "plan/loader.h"
#include "server/shard.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// The ops plans may use: the test-only ones too with --enable-test-ops.
const TaskRegistry& Tasks(const ServeOptions& o) {
  return o.enable_test_ops ? TaskRegistry::WithTestOps() : TaskRegistry::Default();
}

}  // namespace

Server::Server(ServeOptions opts) : opts_(std::move(opts)) {}

Server::~Server() { Shutdown(); }

int Server::port() const { return shards_.empty() ? 0 : shards_.front()->port(); }

Status Server::Start() {
  auto loaded = LoadPlanDir(opts_.plans, Tasks(opts_), opts_.model_limits);
  if (!loaded) {
    ++stats_.plan_reloads_error;
    return Fail(Error::BadRequest("plans: " + loaded.error().message));
  }
  ++stats_.plan_reloads_ok;
  plans_ = std::make_shared<const PlanSet>(std::move(*loaded));
  plan_count_.store(plans_->plans.size(), std::memory_order_release);
  StartIndexBuilder();
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
  if (opts_.http.port != 0) {
    if (auto free = http::CheckPortFree(opts_.http.host, opts_.http.port); !free) return free;
  }
  if (opts_.metrics_port != 0) {
    if (auto free = http::CheckPortFree(opts_.metrics_host, opts_.metrics_port); !free)
      return Fail(Error::Internal("--metrics-port: " + free.error().message));
  }
  if (opts_.rank.access_log) access_log_ = std::make_unique<AccessLog>(opts_.shards, STDOUT_FILENO);
  for (const SinkConfig& c : opts_.served_log) {
    file_sinks_.push_back(c.kind == SinkConfig::Kind::kFile ? std::make_unique<FileSink>(c)
                                                            : nullptr);
    file_sink_ptrs_.push_back(file_sinks_.back().get());
  }
  // Every shard exists before any starts: shard loops read shards_ (readiness), so the
  // vector must not change while they run.
  for (int i = 0; i < opts_.shards; ++i)
    shards_.push_back(std::make_unique<Shard>(i, opts_, *this));
  for (auto& shard : shards_) {
    if (auto st = shard->Start(plans_, auth_, opts_.http.port); !st) {
      Shutdown();
      return st;
    }
    {
      std::lock_guard lk(scrape_mu_);
      scrape_shards_.push_back(&shard->stats());
    }
    // With --port 0 the first shard picks the port and the others join it.
    if (opts_.http.port == 0) opts_.http.port = shard->port();
  }
  started_.store(true, std::memory_order_release);
  LogInfo(
      "rankd " RANKD_VERSION " serving on " + opts_.http.host + ":" + std::to_string(port()) +
      " with " + std::to_string(opts_.shards) + " shard(s), " +
      std::to_string(plans_->plans.size()) + " plan(s) from " + opts_.plans +
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

void Server::StartIndexBuilder() {
  IndexBuilder::Options o;
  for (const RedisEndpoint& e : opts_.redis)
    if (e.name == kDefaultRedisEndpointName) o.endpoint = e;
  o.redis.reply_limits = opts_.redis_reply_limits;
  o.redis.max_cluster_nodes = static_cast<size_t>(opts_.redis_max_cluster_nodes);
  o.index_dir = opts_.index_dir;
  o.max_bytes = opts_.index_max_bytes;
  index_builder_ = std::make_unique<IndexBuilder>(std::move(o), indexes_);
  // Without indexes the thread starts only when a reload declares one.
  if (!plans_->schema->indexes.empty()) index_builder_->Start(plans_->schema);
}

Status Server::Reload() {
  auto loaded = LoadPlanDir(opts_.plans, Tasks(opts_), opts_.model_limits);
  if (loaded && index_builder_) {
    // New or changed indexes are built before the plans that search them are installed.
    if (auto built = index_builder_->Prepare(loaded->schema); !built) loaded = Fail(built.error());
  }
  if (!loaded) {
    ++stats_.plan_reloads_error;
    LogError("reload rejected, keeping the previous plans: " + loaded.error().message);
    return Fail(loaded.error());
  }
  ++stats_.plan_reloads_ok;
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
  {
    std::lock_guard lk(scrape_mu_);
    scrapes_closed_ = true;
    scrape_shards_.clear();
  }
  // A scrape reads the shards and posts back to a shard's loop: finish it first.
  scrape_pool_.WaitIdle();
  for (auto& s : shards_) s->Stop();
  // Their writers post to shard loops: they stop (having written what they were given)
  // while the loops, stopped, still exist.
  file_sinks_.clear();
  file_sink_ptrs_.clear();
  shards_.clear();
  index_builder_.reset();
  access_log_.reset();  // writes the last lines
  LogInfo("stopped");
}

bool Server::RequestScrape(EventLoop& loop, bool metrics_address, ScrapeFormat format,
                           ScrapeDone done) {
  std::lock_guard lk(scrape_mu_);
  size_t& waiting = scrapes_waiting_[metrics_address ? 1 : 0];
  if (waiting >= opts_.max_queued_scrapes || scrapes_closed_) return false;
  if (!scrape_running_) {
    if (!scrape_pool_.Submit([this] { RunScrapes(); })) return false;  // shutting down
    scrape_running_ = true;
  }
  ++waiting;
  scrape_waiters_.push_back({&loop, format, std::move(done)});
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
    // Each format the batch asked for, written once.
    std::shared_ptr<const std::string> texts[2];
    for (auto& w : batch) {
      auto& text = texts[static_cast<size_t>(w.format)];
      if (!text) text = std::make_shared<const std::string>(ScrapeText(w.format));
      // A loop that is stopping refuses the callable and destroys it on its own thread
      // (EventLoop::Post), so the Responder inside never dies on this one.
      (void)w.loop->Post([done = std::move(w.done), text] { done(text); });
    }
  }
}

std::string Server::ScrapeText(ScrapeFormat format) {
  std::vector<const ShardStats*> shards;
  {
    std::lock_guard lk(scrape_mu_);
    shards = scrape_shards_;
  }
  std::string out;
  if (format == ScrapeFormat::kConsoleJson) {
    auto now = std::chrono::system_clock::now().time_since_epoch();
    WriteConsoleMetrics({&stats_, shards},
                        std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), out);
    return out;
  }
  out.reserve(last_scrape_size_ + last_scrape_size_ / 8);
  WriteMetrics({&stats_, shards}, out);
  last_scrape_size_ = out.size();
  return out;
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
  std::string why = index_builder_ ? index_builder_->NotReadyReason() : std::string();
  for (const auto& s : shards_)
    if (!s->redis_ready()) {
      if (!why.empty()) why += "; ";
      why += "shard " + std::to_string(s->id()) + " has no live connection to every Redis endpoint";
    }
  return why;
}

}  // namespace rankd
