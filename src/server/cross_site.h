// The Host and Origin checks of every request a shard routes (--allowed-hosts,
// --allowed-origins; docs/security.md): which requests a listener serves, which it refuses
// (421, 403), and the CORS headers of a listed origin's answers and preflights.
//
// Threads: any (pure functions of the request and the policy).
#pragma once

#include "api/routes.h"
#include "core/error.h"
#include "http/message.h"
#include "http/origin_policy.h"
#include "http/responder.h"

namespace rankd {

enum class CrossSite : uint8_t { kAllowed, kPreflight, kMisdirected, kForbidden };

// What `policy` says of `req` for `route`. A listed origin's answer (a preflight's too) gets
// its CORS headers through `res`.
CrossSite CheckCrossSite(const http::OriginPolicy& policy, const http::Request& req,
                         http::Responder& res, Route route);
// The error a refused request is answered (kMisdirected: 421, kForbidden: 403).
Error CrossSiteError(CrossSite verdict, const http::Request& req);
// What the browser may send next after a preflight of `route`.
void AddPreflightHeaders(http::Responder& res, Route route);

}  // namespace rankd
