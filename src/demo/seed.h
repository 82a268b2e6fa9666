// The demo data set (docs/data.md), written through rankd's own Redis client into a Redis
// server or a Redis Cluster (its routing sends each command to the master of its key's
// slot), at the keys of the built-in demo schema's templates (plan/schema.h): users with
// profiles,
// Zipf-like follows, media, item features, recs and seen sets, user and item embeddings
// (vec:32 with a hidden low-rank structure: docs/vectors.md, "The demo"), and optionally a history
// of impression and click events written as POST /events writes them (CounterBatch and MarkBatch:
// the demo's counters families and served zsets). Deterministic for a seed (and, with events,
// --now-ms): every value comes from our own splitmix64 streams (never std:: distributions, whose
// output differs between standard libraries), one stream per user and purpose, and the
// commands are sent in a fixed order, so the same seed gives byte-identical contents.
//
// Threads: SeedDemoData blocks the calling thread (it runs a loop of its own, a CLI
// ShardRuntime, and waits for each pipelined batch); call it from a CLI thread, never
// from a loop thread.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "redis/endpoint.h"

namespace rankd {

struct SeedOptions {
  RedisEndpoint endpoint;  // host, port (or cluster seeds), AUTH, db and key prefix
  int64_t users = 10000;
  int64_t follows = 100;  // per user
  int64_t media = 20;     // items authored per user
  int64_t recs = 200;     // per user
  int64_t seen = 50;      // per user
  uint64_t seed = 1;
  int64_t events = 0;      // impressions and clicks (9:1) spread over the last keep_s (7 days)
  int64_t now_ms = 0;      // the events' "now" (Unix ms); 0: the clock's
  bool embeddings = true;  // user_emb and item_emb vectors (false: tests that need none,
                           // whose rankd then builds the demo's item index empty)
  // Of each author's items, the newest this many carry an item_emb vector (0..media): the
  // item index's build time grows faster than its size (docs/vectors.md, "The demo"), and
  // the demo's index is built before /readyz.
  int64_t embedded_media = 3;
  bool flush = false;   // FLUSHDB first (every master of a cluster); without it a
                        // non-empty database is refused
  int pipeline = 2000;  // commands per pipelined round trip
};

struct SeedSummary {
  int64_t users = 0;
  int64_t items = 0;
  int64_t follow_edges = 0;
  int64_t recs = 0;
  int64_t seen = 0;
  int64_t events = 0;
  int64_t commands = 0;
  int64_t round_trips = 0;
  double seconds = 0;
  std::string OneLine() const;  // the CLI's summary line
};

// Checks the options (invalid_param), connects (unavailable), refuses a non-empty
// database unless opts.flush (invalid_param), then writes everything.
Result<SeedSummary> SeedDemoData(const SeedOptions& opts);

// Item ids of the demo set: user u (1-based) authors items (u-1)*media+1 .. u*media,
// the first one newest. Exposed for tests.
inline int64_t DemoItemId(int64_t user, int64_t k, int64_t media) {
  return (user - 1) * media + k + 1;
}

}  // namespace rankd
