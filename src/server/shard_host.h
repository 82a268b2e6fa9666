// ShardHost: the few things a Shard asks of the process that runs it (Server implements
// it). A shard knows nothing else of its owner: not the other shards, not start-up,
// reload or drain.
//
// Threads: every call comes from a shard's loop thread; implementations answer them
// from any thread (atomics, a mutex, or what was set before the shards started).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/event_loop.h"
#include "core/spsc_ring.h"
#include "rank/page_cursor.h"
#include "served/file_sink.h"

namespace rankd {

// What a scrape writes: /metrics's text exposition, or /console/api/metrics's JSON
// (metrics/console_metrics.h).
class AnnIndexes;  // ann/ann_set.h

enum class ScrapeFormat : uint8_t { kPrometheus, kConsoleJson };

class ShardHost {
 public:
  // "" when the process is ready; else why not (for /readyz).
  virtual std::string ReadinessReasons() const = 0;

  // A scrape of every shard's counters: `done` runs on `loop` with the text, later.
  // False when too many scrapes wait already on that address (metrics_address:
  // --metrics-port, else the main port): answer 503.
  using ScrapeDone = std::function<void(std::shared_ptr<const std::string>)>;
  virtual bool RequestScrape(EventLoop& loop, bool metrics_address, ScrapeFormat format,
                             ScrapeDone done) = 0;

  // Shard `shard`'s access log ring (its loop is the producer); null without --access-log.
  virtual SpscRing* access_log_ring(int shard) = 0;
  // The FileSink of each --served-log sink, by index (null for a stream sink); they
  // outlive the shards' loops.
  virtual const std::vector<FileSink*>& file_sinks() const = 0;
  // The key page cursors are signed with: immutable once the shards start.
  virtual const CursorKey& cursor_key() const = 0;
  // The process's indexes (one copy, shared read-only by the shards): set before any
  // shard starts, alive until every shard has stopped.
  virtual const AnnIndexes* ann_indexes() const = 0;

 protected:
  ~ShardHost() = default;
};

}  // namespace rankd
