// The routes that read what a shard has loaded, without running a plan: /healthz,
// /readyz, /metrics (and the console's /console/api/metrics), /schema, /plans,
// /plans/{name}, /experiments and the console's files. Bodies come from api/route_bodies.h;
// scrapes are written off the loop by the ShardHost.
//
// Threads: the shard's loop thread.
#pragma once

#include "api/routes.h"
#include "http/message.h"
#include "http/responder.h"
#include "rank/stage.h"
#include "sched/shard_runtime.h"
#include "server/serve_options.h"
#include "server/shard_host.h"

namespace rankd {

class InfoRoutes {
 public:
  InfoRoutes(RankShard& shard, ShardRuntime& runtime, ShardHost& host, const ServeOptions& opts)
      : shard_(shard), runtime_(runtime), host_(host), opts_(opts) {}

  // Answers `req` for `route` (any route but /rank and kOther), which `listener` serves.
  void Handle(const http::Request& req, http::Responder& res, Route route, Listener listener);

 private:
  void HandleReadyz(const http::Request& req, http::Responder& res);
  void HandlePlans(const http::Request& req, http::Responder& res, Route route);
  // /metrics and /console/api/metrics (`route`), written off the loop by the host;
  // `listener`'s queue bounds the scrapes waiting.
  void HandleScrape(const http::Request& req, http::Responder& res, Route route, Listener listener);
  // /console/{file}: a file compiled in (api/console_files.h).
  void HandleConsoleFile(const http::Request& req, http::Responder& res);

  RankShard& shard_;
  ShardRuntime& runtime_;
  ShardHost& host_;
  const ServeOptions& opts_;
};

}  // namespace rankd
