#include "server/cross_site.h"

#include "core/client_text.h"

namespace rankd {

CrossSite CheckCrossSite(const http::OriginPolicy& policy, const http::Request& req,
                         http::Responder& res, Route route) {
  // The probes and scrapes: kubelet sends the pod's IP as Host, and none of them is
  // anything a page could use.
  if (route == Route::kHealthz || route == Route::kReadyz || route == Route::kMetrics)
    return CrossSite::kAllowed;
  if (!policy.HostAllowed(req.host())) return CrossSite::kMisdirected;
  if (req.origin_count == 0) return CrossSite::kAllowed;  // not a browser's: curl, servers
  switch (policy.CheckOrigin(req.origin(), req.host(), req.origin_count)) {
    case http::OriginPolicy::Verdict::kSameHost: return CrossSite::kAllowed;
    case http::OriginPolicy::Verdict::kListed:
      // Its answers, whichever they are, may be read by the page (the origin echoed:
      // there may be several listed), and say that they depend on Origin.
      res.AddHeader("Access-Control-Allow-Origin", req.origin());
      res.AddHeader("Vary", "Origin");
      if (req.method == "OPTIONS" && route != Route::kOther) return CrossSite::kPreflight;
      res.AddHeader("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, Server-Timing");
      return CrossSite::kAllowed;
    case http::OriginPolicy::Verdict::kForbidden: break;
  }
  return CrossSite::kForbidden;
}

Error CrossSiteError(CrossSite verdict, const http::Request& req) {
  if (verdict == CrossSite::kMisdirected)
    return Error{
        ErrorCode::kMisdirectedRequest,
        "Host '" + ClientText(req.host()) + "' is not a name of this server (--allowed-hosts)"};
  return Error{ErrorCode::kForbiddenOrigin,
               "Origin '" + ClientText(req.origin_count == 1 ? req.origin() : "(several)") +
                   "' may not call this server (--allowed-origins)"};
}

void AddPreflightHeaders(http::Responder& res, Route route) {
  // The route's methods, and the two headers a page sets (the token, a JSON body).
  // Cached by the browser for 10 minutes.
  res.AddHeader("Access-Control-Allow-Methods", SpecOf(route).allow);
  res.AddHeader("Access-Control-Allow-Headers", "Authorization, Content-Type");
  res.AddHeader("Access-Control-Max-Age", "600");
}

}  // namespace rankd
