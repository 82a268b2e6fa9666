#include "server/answer.h"

#include <algorithm>
#include <array>
#include <iterator>

#include "api/console_files.h"
#include "api/errors.h"
#include "rank/path.h"

namespace rankd {

void Answer(RankShard& shard, const http::Request& req, http::Responder& res, Route route,
            int status, std::string_view body, TimePoint t0,
            std::span<const http::HeaderField> extra, std::string_view content_type) {
  AnswerAs(shard, req.method, req.request_id, res, route, status, body, t0, extra, content_type);
}

void AnswerAs(RankShard& shard, std::string_view method, std::string_view request_id,
              http::Responder& res, Route route, int status, std::string_view body, TimePoint t0,
              std::span<const http::HeaderField> extra, std::string_view content_type) {
  http::Response r;
  r.status = status;
  r.body = body;
  r.content_type = content_type;
  r.headers = extra;
  // A console route's answer has one extra header at most (Allow, WWW-Authenticate,
  // Retry-After, Location or Cache-Control); two fit.
  std::array<http::HeaderField, 2 + std::size(kConsoleHeaders)> with_console;
  if (IsConsoleRoute(route) && extra.size() <= 2) {
    auto end = std::copy(extra.begin(), extra.end(), with_console.begin());
    end = std::copy(std::begin(kConsoleHeaders), std::end(kConsoleHeaders), end);
    r.headers = {with_console.begin(), end};
  }
  SendAnswer(shard, res, method, request_id, route, r, t0);
}

void AnswerError(RankShard& shard, const http::Request& req, http::Responder& res, Route route,
                 const Error& e, TimePoint t0, std::span<const http::HeaderField> extra) {
  Answer(shard, req, res, route, ErrorStatus(e.code), ErrorBody(e), t0, extra);
}

}  // namespace rankd
