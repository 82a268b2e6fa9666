#include "server/events_route.h"

#include "api/event_request.h"
#include "rank/path.h"
#include "rank/stage_admission.h"
#include "redis/shard_clients.h"
#include "served/shard_log.h"
#include "server/answer.h"

namespace rankd {

EventsRoute::EventsRoute(RankShard& shard, ShardRuntime& runtime, const ServeOptions& opts)
    : shard_(shard),
      runtime_(runtime),
      opts_(opts),
      events_(runtime.loop(), static_cast<int64_t>(opts.events_flush_ms)) {}

void EventsRoute::Start() {
  // Counters and marks live on the default endpoint: the schema's families name none.
  events_.SetRedis(runtime_.redis() ? runtime_.redis()->Get("redis_default") : nullptr);
}

void EventsRoute::Install(const PlanSet& plans) {
  const SchemaPtr schema = plans.schema ? plans.schema : DemoSchema();
  std::unordered_map<std::string, TypeSeries> next;
  SeriesSet& set = shard_.stats->series;
  for (const EventType& t : schema->events)
    next[t.name] = {set.Retain(SeriesFamily::kEvents, {"accepted", t.name}),
                    set.Retain(SeriesFamily::kEvents, {"failed", t.name})};
  for (auto& [name, s] : series_) {
    set.Release(s.accepted);
    set.Release(s.failed);
  }
  series_ = std::move(next);
  set.Publish();
}

void EventsRoute::Handle(const http::Request& req, http::Responder res, TimePoint t0) {
  if (auto admitted = shard_.path->stage<AdmissionStage>().AdmitWithoutRun(); !admitted)
    return AnswerError(shard_, req, res, Route::kEvents, admitted.error(), t0, kRetryAfter);
  SchemaPtr schema = runtime_.plans()->schema ? runtime_.plans()->schema : DemoSchema();
  const int64_t now_ms = UnixMsAt(t0);
  auto events = ParseEvents(req.body, *schema, now_ms, opts_.max_events_per_request);
  if (!events) return AnswerError(shard_, req, res, Route::kEvents, events.error(), t0);
  shard_.stats->live_requests.fetch_add(1, std::memory_order_relaxed);
  Spawn(Run(std::move(*events), std::move(schema), now_ms, std::move(res),
            std::string(req.request_id), t0));
}

Coro<void> EventsRoute::Run(std::vector<Event> events, SchemaPtr schema, int64_t now_ms,
                            http::Responder res, std::string request_id, TimePoint t0) {
  Deadline deadline = t0 + std::chrono::milliseconds(opts_.rank.deadline_ms);
  // `schema` stays held here: the events point into it.
  Status st = co_await events_.Apply(events, schema, now_ms, deadline);
  shard_.stats->live_requests.fetch_sub(1, std::memory_order_relaxed);
  Count(events, static_cast<bool>(st));
  if (!st) {
    const bool busy = st.error().code == ErrorCode::kUnavailable;
    AnswerAs(shard_, "POST", request_id, res, Route::kEvents, ErrorStatus(st.error().code),
             ErrorBody(st.error()), t0,
             busy ? std::span(kRetryAfter) : std::span<const http::HeaderField>(),
             "application/json");
    co_return;
  }
  std::string body = "{\"accepted\":" + std::to_string(events.size()) + "}";
  AnswerAs(shard_, "POST", request_id, res, Route::kEvents, 200, body, t0, {}, "application/json");
  // After the answer, as the served log: a slow or dead sink drops records (counted), it
  // never delays or fails the events Redis kept.
  if (!schema->event_log_sink.empty())
    shard_.served_log->RecordEvents(schema->event_log_sink, events, now_ms);
}

void EventsRoute::Count(const std::vector<Event>& events, bool ok) {
  for (const Event& e : events) {
    auto it = series_.find(e.type->name);
    if (it == series_.end()) continue;  // a type of a schema since replaced
    (ok ? it->second.accepted : it->second.failed)->Add();
  }
}

}  // namespace rankd
