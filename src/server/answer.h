// How a shard answers the routes other than /rank's run: the answer sent and counted
// (rank/path.h's SendAnswer: metrics, access log), a console route's answer with the
// console's headers, an error as api/errors.h renders it.
//
// Threads: the shard's loop thread.
#pragma once

#include <span>
#include <string_view>

#include "api/routes.h"
#include "core/deadline.h"
#include "core/error.h"
#include "http/message.h"
#include "http/responder.h"
#include "rank/stage.h"

namespace rankd {

// Sends `body` with `status` for `req` on `route` and counts it. `t0`: when the request
// was read.
void Answer(RankShard& shard, const http::Request& req, http::Responder& res, Route route,
            int status, std::string_view body, TimePoint t0,
            std::span<const http::HeaderField> extra = {},
            std::string_view content_type = "application/json");
// The same for an answer sent after its request is gone (a scrape's).
void AnswerAs(RankShard& shard, std::string_view method, std::string_view request_id,
              http::Responder& res, Route route, int status, std::string_view body, TimePoint t0,
              std::span<const http::HeaderField> extra, std::string_view content_type);
void AnswerError(RankShard& shard, const http::Request& req, http::Responder& res, Route route,
                 const Error& e, TimePoint t0, std::span<const http::HeaderField> extra = {});

}  // namespace rankd
