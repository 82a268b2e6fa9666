#include "api/routes.h"

#include <string>

namespace rankd {

namespace {

// The fixed part of a pattern: all of it, or what comes before its "{param}".
std::string_view Prefix(const RouteSpec& spec) {
  return spec.pattern.substr(0, spec.pattern.find('{'));
}

bool HasParam(const RouteSpec& spec) { return spec.pattern.ends_with('}'); }

}  // namespace

std::string_view RouteName(Route r) {
  return r < Route::kOther ? SpecOf(r).pattern : std::string_view("other");
}

Route MatchRoute(std::string_view path) {
  for (const auto& spec : kRoutes)
    if (HasParam(spec) ? path.starts_with(Prefix(spec)) : path == spec.pattern) return spec.route;
  return Route::kOther;
}

std::string_view RouteParam(const RouteSpec& spec, std::string_view path) {
  return HasParam(spec) ? path.substr(Prefix(spec).size()) : path;
}

bool AcceptsMethod(const RouteSpec& spec, std::string_view method) {
  std::string_view rest = spec.allow;
  while (!rest.empty()) {
    size_t comma = rest.find(", ");
    if (rest.substr(0, comma) == method) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  return false;
}

Error MethodNotAllowed(const RouteSpec& spec, std::string_view path, std::string_view method) {
  std::string_view first = spec.allow.substr(0, spec.allow.find(','));
  return {ErrorCode::kMethodNotAllowed,
          std::string(path) + " accepts " + std::string(first) + ", not " + std::string(method)};
}

}  // namespace rankd
