// The routes of rankd's HTTP API, in one table: each route's path pattern (also its
// label in metrics and the access log), the methods it accepts (the Allow header of its
// 405), the statuses it answers them with, who may ask it and which listener serves it.
// The router (Shard::OnRequest, for both listeners), the metrics (which create a child
// per answer a route can give), `rankd serve --help` and docs/api.md (checked by a
// test) all read it. The errors' statuses are in api/errors.h.
//
// Adding a route: a value in Route and its row in kRoutes (same order; the
// static_assert checks), then its handler in Shard::OnRequest.
//
// Threads: constants and pure functions, any thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <tuple>

#include "api/errors.h"
#include "core/error.h"

namespace rankd {

enum class Route : uint8_t {
  kRank,
  kEvents,
  kHealthz,
  kReadyz,
  kMetrics,
  kPlans,
  kPlan,
  kSchema,
  kExperiments,
  kConsole,
  kConsoleMetrics,
  kConsoleFile,
  kOther,  // not a route: any path no row matches (404 not_found to every method)
  kCount,
};

// Who may ask a route when rankd runs with --auth-token-file: anyone (the probes), or
// only a client with a token. Without the flag every route is open.
// kMainToken: a token on the main port, none on the metrics address (/metrics).
enum class Access : uint8_t { kOpen, kToken, kMainToken };

// The two listeners: the main port (--port, every shard) and the metrics address
// (--metrics-port, shard 0).
enum class Listener : uint8_t { kMain, kMetrics };

// Which listener serves a route; on any other its path is a path no route matches.
enum class Where : uint8_t {
  kBoth,     // the probes
  kScrape,   // /metrics: the main port (which answers it 404 when there is a metrics
             // address) and the metrics address
  kApi,      // the main port; the metrics address too with --console
  kConsole,  // the metrics address with --console only
};

struct RouteSpec {
  Route route;
  // The path, or a prefix ending in a "{param}" that matches the rest of any path.
  std::string_view pattern;
  // The methods it accepts, as its 405's Allow header lists them; the first is the one
  // a 405's message names.
  std::string_view allow;
  // What it answers an accepted method with (0 = unused slot). Any other method gets
  // 405 method_not_allowed.
  std::array<int, 10> statuses;
  // With --auth-token-file, a kToken route answers 401 unauthorized (before anything
  // else) to a request without a valid token.
  Access access;
  Where where;
};

inline constexpr RouteSpec kRoutes[] = {
    {Route::kRank,
     "/rank",
     "POST",
     {200, 400, 404, 410, 422, 500, 502, 503, 504},
     Access::kToken,
     Where::kApi},
    // 400 bad_request / bad_event, 502 a Redis error reply, 503 overload or Redis down, 504.
    {Route::kEvents, "/events", "POST", {200, 400, 502, 503, 504}, Access::kToken, Where::kApi},
    {Route::kHealthz, "/healthz", "GET, HEAD", {200}, Access::kOpen, Where::kBoth},
    {Route::kReadyz, "/readyz", "GET, HEAD", {200, 503}, Access::kOpen, Where::kBoth},
    // 404 on the main port when --metrics-port moves it; 503 past --max-queued-scrapes.
    {Route::kMetrics, "/metrics", "GET, HEAD", {200, 404, 503}, Access::kMainToken, Where::kScrape},
    {Route::kPlans, "/plans", "GET, HEAD", {200}, Access::kToken, Where::kApi},
    {Route::kPlan, "/plans/{name}", "GET, HEAD", {200, 404}, Access::kToken, Where::kApi},
    {Route::kSchema, "/schema", "GET, HEAD", {200}, Access::kToken, Where::kApi},
    {Route::kExperiments, "/experiments", "GET, HEAD", {200}, Access::kToken, Where::kApi},
    // The console (docs/api.md, "The console"): a redirect to its page, the per-plan counters it
    // polls, and its files, compiled in (api/console_files.h). Before "/console/{file}":
    // the first row that matches a path wins.
    {Route::kConsole, "/console", "GET, HEAD", {301}, Access::kOpen, Where::kConsole},
    // The same counters as /metrics, so the same token rule: none on the metrics address
    // (the only one that serves it).
    {Route::kConsoleMetrics,
     "/console/api/metrics",
     "GET, HEAD",
     {200, 503},
     Access::kMainToken,
     Where::kConsole},
    {Route::kConsoleFile,
     "/console/{file}",
     "GET, HEAD",
     {200, 404},
     Access::kOpen,
     Where::kConsole},
};

constexpr bool RoutesInEnumOrder() {
  if (std::size(kRoutes) != static_cast<size_t>(Route::kOther)) return false;
  for (size_t i = 0; i < std::size(kRoutes); ++i)
    if (static_cast<size_t>(kRoutes[i].route) != i) return false;
  return true;
}
static_assert(RoutesInEnumOrder(), "kRoutes needs one row per Route before kOther, in enum order");

// REQUIRES: r is a route of kRoutes (not kOther or kCount).
constexpr const RouteSpec& SpecOf(Route r) { return kRoutes[static_cast<size_t>(r)]; }

// Whether listener `l` serves route `r`; `console`: rankd runs with --console.
constexpr bool ServedOn(Route r, Listener l, bool console) {
  if (r >= Route::kOther) return false;
  switch (SpecOf(r).where) {
    case Where::kBoth:
    case Where::kScrape: return true;
    case Where::kApi: return l == Listener::kMain || console;
    case Where::kConsole: return l == Listener::kMetrics && console;
  }
  return false;
}

// With --auth-token-file: whether `r` asked on `l` needs a token. A path no route
// matches does on the main port (a client without one learns nothing of which paths
// exist) but not on the metrics address, which never asked for one before --console
// (what it serves besides is listed in the table, and its console files are open).
constexpr bool NeedsToken(Route r, Listener l) {
  if (r >= Route::kOther) return l == Listener::kMain;
  Access a = SpecOf(r).access;
  return a == Access::kToken || (a == Access::kMainToken && l == Listener::kMain);
}

// The console's routes: their every answer carries kConsoleHeaders.
constexpr bool IsConsoleRoute(Route r) {
  return r < Route::kOther && SpecOf(r).where == Where::kConsole;
}

// The route template: "/plans/{name}", or "other" for a path no route matches.
std::string_view RouteName(Route r);
// The route `path` is for; kOther if none.
Route MatchRoute(std::string_view path);
// What `path` holds in place of its route's "{param}" (the whole path for exact routes).
std::string_view RouteParam(const RouteSpec& spec, std::string_view path);
bool AcceptsMethod(const RouteSpec& spec, std::string_view method);
// 405 method_not_allowed for `method` on `path`, e.g. "/rank accepts POST, not GET".
Error MethodNotAllowed(const RouteSpec& spec, std::string_view path, std::string_view method);

// A CORS preflight's answer (OPTIONS from an allowed origin), on any route.
inline constexpr int kPreflightStatus = 204;

// The statuses metrics count by value: every status a route lists, every error's and the
// preflight's, sorted, once each (values[0..size)). Any other status counts as "other".
struct StatusList {
  std::array<int, std::size(kRoutes) * std::tuple_size_v<decltype(RouteSpec::statuses)> +
                      kErrorCodeCount + 1>
      values{};
  size_t size = 0;
};
inline constexpr StatusList kCountedStatuses = [] {
  StatusList l;
  auto add = [&l](int s) {
    if (s != 0 &&
        std::find(l.values.begin(), l.values.begin() + l.size, s) == l.values.begin() + l.size)
      l.values[l.size++] = s;
  };
  for (const auto& r : kRoutes)
    for (int s : r.statuses) add(s);
  for (const auto& e : kApiErrors) add(e.status);
  add(kPreflightStatus);
  std::sort(l.values.begin(), l.values.begin() + l.size);
  return l;
}();

}  // namespace rankd
