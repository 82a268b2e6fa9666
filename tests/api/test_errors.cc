// The error table's bodies, and the answer rankd's listeners give an error.
#include <doctest/doctest.h>

#include <string>

#include "api/errors.h"

using namespace rankd;

TEST_CASE("error bodies follow the API and escape the message") {
  CHECK(ErrorBody(Error::BadRequest("bad \"x\"\n\\")) ==
        "{\"error\":{\"code\":\"bad_request\",\"message\":\"bad \\\"x\\\"\\n\\\\\"}}");
  CHECK(ErrorBody(Error{ErrorCode::kHeadersTooLarge, "a\x01"}) ==
        "{\"error\":{\"code\":\"headers_too_large\",\"message\":\"a\\u0001\"}}");
  // Invalid UTF-8 in a message (it may quote client bytes) never reaches the body.
  CHECK(ErrorBody(Error::NotFound("no route for /\xff")) ==
        "{\"error\":{\"code\":\"not_found\",\"message\":\"no route for /\\ufffd\"}}");
}

TEST_CASE("RenderError answers with the table's status and the error body") {
  Error e = Error::Unavailable("busy");
  http::ErrorResponse r = RenderError(e);
  CHECK(r.status == 503);
  CHECK(r.body == ErrorBody(e));
  CHECK(r.content_type == "application/json");
  CHECK(RenderError(Error{ErrorCode::kPayloadTooLarge, "x"}).status == 413);
}
