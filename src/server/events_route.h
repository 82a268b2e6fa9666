// POST /events (docs/api.md, docs/events.md): the body checked against the schema's event
// types (api/event_request.h), all or nothing; the shard's admission as for a request
// that runs no plan; the events handed to the shard's ShardEvents, and 200
// {"accepted": N} only once Redis acknowledged every increment and mark (503 when Redis
// is unavailable: the client retries, and may count some events twice); then, when the
// schema has an event_log, one record per event into the shard's ShardServedLog.
//
// Threads: the shard's loop thread.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "events/shard_events.h"
#include "http/message.h"
#include "http/responder.h"
#include "rank/stage.h"
#include "sched/shard_runtime.h"
#include "server/serve_options.h"

namespace rankd {

class EventsRoute {
 public:
  EventsRoute(RankShard& shard, ShardRuntime& runtime, const ServeOptions& opts);

  // After the Redis pools are open.
  void Start();
  void Handle(const http::Request& req, http::Responder res, TimePoint t0);
  // A new plan snapshot: the series of its schema's event types.
  void Install(const PlanSet& plans);
  const EventWriteStats& stats() const { return events_.stats(); }

 private:
  struct TypeSeries {
    Series* accepted = nullptr;
    Series* failed = nullptr;
  };
  Coro<void> Run(std::vector<Event> events, SchemaPtr schema, int64_t now_ms, http::Responder res,
                 std::string request_id, TimePoint t0);
  void Count(const std::vector<Event>& events, bool ok);

  RankShard& shard_;
  ShardRuntime& runtime_;
  const ServeOptions& opts_;
  ShardEvents events_;
  std::unordered_map<std::string, TypeSeries> series_;  // by event type name
};

}  // namespace rankd
