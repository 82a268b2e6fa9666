#include "metrics/shard_stats.h"

namespace rankd {

namespace {

constexpr std::array<std::string_view, ShardStats::kMethods> kMethodNames = {"GET", "POST", "HEAD",
                                                                             "other"};

size_t MethodIndex(std::string_view m) {
  for (size_t i = 0; i + 1 < kMethodNames.size(); ++i)
    if (m == kMethodNames[i]) return i;
  return kMethodNames.size() - 1;
}

size_t StatusIndex(int status) {
  for (size_t i = 0; i < kCountedStatuses.size; ++i)
    if (kCountedStatuses.values[i] == status) return i;
  return kCountedStatuses.size;  // "other"
}

size_t AnswerIndex(Route route, size_t method, int status) {
  return (static_cast<size_t>(route) * ShardStats::kMethods + method) * ShardStats::kStatuses +
         StatusIndex(status);
}

}  // namespace

std::string_view SnapshotOutcomeName(SnapshotOutcome o) {
  switch (o) {
    case SnapshotOutcome::kWritten: return "written";
    case SnapshotOutcome::kWriteFailed: return "write_failed";
    case SnapshotOutcome::kOnePage: return "one_page";
    case SnapshotOutcome::kRateLimited: return "rate_limited";
    case SnapshotOutcome::kCount: break;
  }
  return "unknown";
}

ShardStats::ShardStats(int id, bool on, bool tokens) : shard(std::to_string(id)), enabled(on) {
  // Every answer a route can give shows from start. The HTTP layer's own refusals are
  // not here: they count in rankd_http_rejects_total.
  const int unauthorized = ErrorStatus(ErrorCode::kUnauthorized);
  for (size_t m = 0; m < kMethods; ++m) {
    for (size_t r = 0; tokens && r < static_cast<size_t>(Route::kCount); ++r) {
      auto route = static_cast<Route>(r);
      if (NeedsToken(route, Listener::kMain) || NeedsToken(route, Listener::kMetrics))
        http_listed.set(AnswerIndex(route, m, unauthorized));
    }
    for (const auto& route : kRoutes) {
      if (!AcceptsMethod(route, kMethodNames[m])) {
        http_listed.set(AnswerIndex(route.route, m, ErrorStatus(ErrorCode::kMethodNotAllowed)));
        continue;
      }
      for (int status : route.statuses)
        if (status != 0) http_listed.set(AnswerIndex(route.route, m, status));
    }
    http_listed.set(AnswerIndex(Route::kOther, m, ErrorStatus(ErrorCode::kNotFound)));
  }
  http_duration.reserve(static_cast<size_t>(Route::kCount));
  for (size_t r = 0; r < static_cast<size_t>(Route::kCount); ++r)
    http_duration.emplace_back(kLatencyBuckets);
}

ShardStats::HttpAnswer ShardStats::HttpAnswerOf(size_t i) {
  size_t status = i % kStatuses;
  size_t method = i / kStatuses % kMethods;
  auto route = static_cast<Route>(i / kStatuses / kMethods);
  return {RouteName(route), kMethodNames[method],
          status < kCountedStatuses.size ? std::to_string(kCountedStatuses.values[status])
                                         : std::string("other")};
}

void ShardStats::CountHttp(Route route, std::string_view method, int status, double seconds) {
  if (!enabled) return;
  ++http_requests[AnswerIndex(route, MethodIndex(method), status)];
  http_duration[static_cast<size_t>(route)].Observe(seconds);
}

}  // namespace rankd
