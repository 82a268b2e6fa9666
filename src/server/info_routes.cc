#include "server/info_routes.h"

#include <memory>
#include <string>

#include "api/console_files.h"
#include "api/route_bodies.h"
#include "core/client_text.h"
#include "server/answer.h"

namespace rankd {

void InfoRoutes::Handle(const http::Request& req, http::Responder& res, Route route,
                        Listener listener) {
  TimePoint t0 = req.read_done;
  switch (route) {
    case Route::kHealthz: return Answer(shard_, req, res, route, 200, kHealthyBody, t0);
    case Route::kReadyz: return HandleReadyz(req, res);
    case Route::kMetrics:
      // With a metrics address, /metrics does not face clients at all.
      if (listener == Listener::kMain && opts_.metrics_port != 0)
        return AnswerError(shard_, req, res, route,
                           Error::NotFound("/metrics is served on the metrics address only"), t0);
      return HandleScrape(req, res, route, listener);
    case Route::kSchema: {
      const SchemaPtr& schema = runtime_.plans()->schema;
      return Answer(shard_, req, res, route, 200, SchemaBody(schema ? *schema : *DemoSchema()), t0);
    }
    case Route::kExperiments:
      return Answer(shard_, req, res, route, 200, ExperimentsBody(*runtime_.plans()->experiments),
                    t0);
    case Route::kConsole: {
      const http::HeaderField location[] = {{"Location", "/console/"}};
      return Answer(shard_, req, res, route, 301, kConsoleRedirectBody, t0, location);
    }
    case Route::kConsoleMetrics: return HandleScrape(req, res, route, listener);
    case Route::kConsoleFile: return HandleConsoleFile(req, res);
    default: return HandlePlans(req, res, route);
  }
}

void InfoRoutes::HandleReadyz(const http::Request& req, http::Responder& res) {
  std::string why = host_.ReadinessReasons();
  if (why.empty())
    return Answer(shard_, req, res, Route::kReadyz, 200, ReadyzBody(why), req.read_done);
  Answer(shard_, req, res, Route::kReadyz, 503, ReadyzBody(why), req.read_done, kRetryAfter);
}

void InfoRoutes::HandlePlans(const http::Request& req, http::Responder& res, Route route) {
  TimePoint t0 = req.read_done;
  if (route == Route::kPlan) {
    std::string_view name = RouteParam(SpecOf(route), req.path());
    auto it = runtime_.plans()->plans.find(std::string(name));
    if (it == runtime_.plans()->plans.end())
      return AnswerError(shard_, req, res, route,
                         Error::UnknownPlan("plan '" + ClientText(name) + "' is not loaded"), t0);
    return Answer(shard_, req, res, route, 200, PlanBody(*it->second), t0);
  }
  Answer(shard_, req, res, route, 200, PlansBody(*runtime_.plans()), t0);
}

void InfoRoutes::HandleScrape(const http::Request& req, http::Responder& res, Route route,
                              Listener listener) {
  TimePoint t0 = req.read_done;
  const bool text = route == Route::kMetrics;
  // Serialising takes a few milliseconds with every plan loaded: the server does it off
  // the loops, once for every scrape waiting (every counter it reads may be read from any thread).
  auto holder = std::make_shared<http::Responder>(std::move(res));
  auto done = [this, holder, t0, route, text, method = req.method,
               request_id = req.request_id](std::shared_ptr<const std::string> body) {
    AnswerAs(shard_, method, request_id, *holder, route, 200, *body, t0, {},
             text ? "text/plain; version=0.0.4; charset=utf-8" : "application/json");
  };
  if (!host_.RequestScrape(runtime_.loop(), listener == Listener::kMetrics,
                           text ? ScrapeFormat::kPrometheus : ScrapeFormat::kConsoleJson,
                           std::move(done))) {
    ++shard_.stats->scrapes_refused;
    AnswerError(shard_, req, *holder, route,
                Error::Unavailable("too many scrapes waiting (--max-queued-scrapes " +
                                   std::to_string(opts_.max_queued_scrapes) + ")"),
                t0, kRetryAfter);
  }
}

void InfoRoutes::HandleConsoleFile(const http::Request& req, http::Responder& res) {
  TimePoint t0 = req.read_done;
  std::string_view name = RouteParam(SpecOf(Route::kConsoleFile), req.path());
  const EmbeddedFile* file = FindEmbeddedFile(ConsoleFiles(), name);
  if (!file)
    return AnswerError(shard_, req, res, Route::kConsoleFile,
                       Error::NotFound("the console has no file '" + ClientText(name) + "'"), t0);
  // Revalidated on each load: a new rankd's console replaces the old one at once.
  static constexpr http::HeaderField kNoCache[] = {{"Cache-Control", "no-cache"}};
  Answer(shard_, req, res, Route::kConsoleFile, 200, file->bytes, t0, kNoCache, file->content_type);
}

}  // namespace rankd
