// Server: the N shards of `rankd serve`, the plan set they share by snapshot, reload
// and drain. The main thread owns it; shards only read what it publishes (atomics and
// posted snapshots) and reach it only as their ShardHost (server/shard_host.h).
//
// Threads: Start, Reload, StopBeingReady, Shutdown on the main thread. ReadinessReasons
// and RequestScrape from any thread (shard loops call them); shards_ is filled before
// any shard starts and cleared only after every loop stopped.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ann/ann_set.h"
#include "cache/shard_cache.h"
#include "core/error.h"
#include "core/event_loop.h"
#include "core/thread_pool.h"
#include "metrics/metric_table.h"
#include "plan/plan.h"
#include "rank/page_cursor.h"
#include "served/file_sink.h"
#include "server/access_log.h"
#include "server/auth_tokens.h"
#include "server/index_builder.h"
#include "server/serve_options.h"
#include "server/shard_host.h"

namespace rankd {

class Shard;

class Server final : public ShardHost {
 public:
  explicit Server(ServeOptions opts);
  ~Server();

  // Loads the plans, checks the port is free, starts every shard.
  Status Start();
  // SIGHUP: loads the whole plans folder; on success every shard gets the new set, on
  // failure the old set stays and the error says why.
  Status Reload();
  // SIGHUP too, with --auth-token-file: re-reads it; on success every shard gets the new
  // tokens, on failure (unreadable, no token) the old ones stay and the log says why.
  Status ReloadAuthTokens();
  // SIGTERM/SIGINT, first step: /readyz answers 503 from now on while everything else
  // serves as before (new connections too), so that balancers checking /readyz take
  // this replica out before it stops accepting. The caller waits --drain-delay-ms, then
  // calls Shutdown.
  void StopBeingReady();
  // SIGTERM/SIGINT, last step: fail readiness, drain every shard (bounded by the drain
  // timeout), then stop Redis, CPU workers and loops.
  void Shutdown();

  // "" when ready; else why not (for /readyz).
  std::string ReadinessReasons() const override;

  // A /metrics scrape for a shard: `done` runs on `loop` with the text. Written on one
  // low-priority (nice 10) thread for the whole process, so a scrape neither queues
  // behind request CPU work nor takes a core from a shard loop; it reads the shards'
  // counters where they are (metrics/metric_table.h) and takes no lock a shard holds
  // while it serves. Scrapes that
  // arrive while one is being serialised wait together for the next one and share its
  // text: each gets a text begun after it asked, and a flood costs one serialisation
  // at a time. At most --max-queued-scrapes wait per address (the main port, the
  // metrics port): false when full (answer 503), so a flood on the client port can
  // neither grow memory nor crowd out the scrapes on the metrics port.
  // The console's JSON (format kConsoleJson) is written the same way, in the same queues.
  bool RequestScrape(EventLoop& loop, bool metrics_address, ScrapeFormat format,
                     ScrapeDone done) override;
  const ServeOptions& options() const { return opts_; }
  // Shard i's access log ring (its loop is the producer); null without --access-log.
  SpscRing* access_log_ring(int shard) override {
    return access_log_ ? &access_log_->ring(shard) : nullptr;
  }
  int port() const;  // the bound port (useful with --port 0)
  // The FileSink of each --served-log sink, by index (null for a stream sink). Set
  // before any shard starts; they outlive the shards' loops.
  const std::vector<FileSink*>& file_sinks() const override { return file_sink_ptrs_; }
  // The key page cursors are signed with (--cursor-key-file, or a random one): set
  // before the shards start, then immutable, so any thread may use it.
  const CursorKey& cursor_key() const override { return *cursor_key_; }
  const AnnIndexes* ann_indexes() const override { return &indexes_; }

 private:
  void StartIndexBuilder();  // Start, once the plans are loaded
  void RunScrapes();         // scrape thread: serialise for the waiters until none is left
  std::string ScrapeText(ScrapeFormat format);  // scrape thread

  ServeOptions opts_;
  ServerStats stats_;
  ThreadPool scrape_pool_{1, "metrics", /*nice=*/10};
  struct ScrapeWaiter {
    EventLoop* loop;
    ScrapeFormat format;
    ScrapeDone done;
  };
  std::mutex scrape_mu_;  // guards the five below (scrapes only, never /rank)
  std::vector<ScrapeWaiter> scrape_waiters_;
  size_t scrapes_waiting_[2] = {0, 0};  // by address: main port, metrics port
  bool scrape_running_ = false;
  bool scrapes_closed_ = false;  // Shutdown: no scrape from now on
  // The stats of the shards that have started (Start adds each once it has).
  std::vector<const ShardStats*> scrape_shards_;
  size_t last_scrape_size_ = 0;  // scrape thread: sizing hint for the next text exposition
  // Before shards_: destroyed (its last lines written) after every shard has stopped.
  std::unique_ptr<AccessLog> access_log_;
  std::vector<std::unique_ptr<FileSink>> file_sinks_;
  std::vector<FileSink*> file_sink_ptrs_;
  // The schema's indexes and their builder: before shards_, which search them.
  AnnIndexes indexes_;
  std::unique_ptr<IndexBuilder> index_builder_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::shared_ptr<const PlanSet> plans_;    // main thread
  std::shared_ptr<const AuthTokens> auth_;  // main thread; null without --auth-token-file
  std::shared_ptr<const CursorKey> cursor_key_;
  std::atomic<size_t> plan_count_{0};  // for readiness, from any thread
  // Every shard listens (Start has returned): until then shard 0 may answer /readyz while
  // the others are still starting. Set by the main thread, read by any.
  std::atomic<bool> started_{false};
  // Where a SIGTERM/SIGINT has got to; only moves forward.
  enum class Phase { kServing, kDrainDelay, kDraining };
  std::atomic<Phase> phase_{Phase::kServing};
};

}  // namespace rankd
