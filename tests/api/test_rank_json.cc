// The /rank request parser and response writer.
#include <doctest/doctest.h>

#include <cmath>

#include "api/rank_request.h"
#include "api/rank_response.h"
#include "engine_fixture.h"

using namespace rankd;

TEST_SUITE("rank_request") {
  TEST_CASE("a full request parses") {
    auto r = ParseRankRequest(
        R"({"plan": "feed", "user_id": 42, "params": {"w": 0.5, "n": 3, "c": "US", "b": true},
          "deadline_ms": 100, "explain": true, "extra": [1]})");
    REQUIRE(r.has_value());
    CHECK(r->plan == "feed");
    CHECK(r->user_id.num == 42);
    CHECK_FALSE(r->user_id.is_str);
    REQUIRE(r->params.size() == 4);
    CHECK(std::get<double>(r->params[0].second) == 0.5);
    CHECK(std::get<int64_t>(r->params[1].second) == 3);
    CHECK(*r->deadline_ms == 100);
    CHECK(r->explain);
  }

  TEST_CASE("bad requests name the field") {
    auto msg = [](std::string_view body) {
      auto r = ParseRankRequest(body);
      REQUIRE_FALSE(r.has_value());
      return r.error();
    };
    CHECK(msg("{").code == ErrorCode::kBadRequest);
    CHECK(msg("{").message.find("invalid JSON") == 0);
    CHECK(msg("[]").message.find("object") != std::string::npos);
    CHECK(msg(R"({"user_id": 1})").message == "plan: missing");
    CHECK(msg(R"({"plan": 3, "user_id": 1})").message.find("plan:") == 0);
    CHECK(msg(R"({"plan": "p"})").message == "user_id: missing");
    CHECK(msg(R"({"plan": "p", "user_id": -1})").message.find("user_id:") == 0);
    CHECK(msg(R"({"plan": "p", "user_id": 1.5})").message.find("user_id:") == 0);
    CHECK(msg(R"({"plan": "p", "user_id": 18446744073709551615})").message.find("user_id:") == 0);
    CHECK(msg(R"({"plan": "p", "user_id": 1, "deadline_ms": 0})").message.find("deadline_ms:") ==
          0);
    CHECK(
        msg(R"({"plan": "p", "user_id": 1, "deadline_ms": 60001})").message.find("deadline_ms:") ==
        0);
    CHECK(msg(R"({"plan": "p", "user_id": 1, "explain": 1})").message.find("explain:") == 0);
    CHECK(msg(R"({"plan": "p", "user_id": 1, "params": []})").message.find("params:") == 0);
    auto p = msg(R"({"plan": "p", "user_id": 1, "params": {"x": [1]}})");
    CHECK(p.code == ErrorCode::kInvalidParam);
    CHECK(p.message.find("params.x") == 0);
  }

  TEST_CASE("page_size and cursor") {
    auto r = ParseRankRequest(R"({"plan": "p", "user_id": 1, "page_size": 20, "cursor": "abc"})");
    REQUIRE(r.has_value());
    CHECK(*r->page_size == 20);
    CHECK(*r->cursor == "abc");
    auto plain = ParseRankRequest(R"({"plan": "p", "user_id": 1})");
    REQUIRE(plain.has_value());
    CHECK_FALSE(plain->page_size.has_value());
    CHECK_FALSE(plain->cursor.has_value());
    for (const char* body : {R"({"plan": "p", "user_id": 1, "page_size": 0})",
                             R"({"plan": "p", "user_id": 1, "page_size": 501})",
                             R"({"plan": "p", "user_id": 1, "page_size": -3})",
                             R"({"plan": "p", "user_id": 1, "page_size": 18446744073709551615})"}) {
      auto bad = ParseRankRequest(body);
      REQUIRE_FALSE(bad.has_value());
      CHECK(bad.error().code == ErrorCode::kInvalidParam);
      CHECK(bad.error().message.find("page_size: must be in 1..500") == 0);
    }
    for (const char* body : {R"({"plan": "p", "user_id": 1, "page_size": 2.0})",
                             R"({"plan": "p", "user_id": 1, "page_size": "2"})"}) {
      auto bad = ParseRankRequest(body);
      REQUIRE_FALSE(bad.has_value());
      CHECK(bad.error().code == ErrorCode::kBadRequest);
      CHECK(bad.error().message.find("page_size:") == 0);
    }
    auto bad = ParseRankRequest(R"({"plan": "p", "user_id": 1, "cursor": 5})");
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().message == "cursor: must be a string");
  }

  TEST_CASE("plan is optional for rankd run") {
    CHECK(ParseRankRequest(R"({"user_id": 1})", false).has_value());
  }

}  // TEST_SUITE

TEST_SUITE("rank_response") {
  TEST_CASE("doubles: shortest round trip, non-finite as null") {
    std::string out;
    AppendJsonDouble(0.1, out);
    out += ',';
    AppendJsonDouble(3.0, out);
    out += ',';
    AppendJsonDouble(std::nan(""), out);
    out += ',';
    AppendJsonDouble(-INFINITY, out);
    out += ',';
    AppendJsonDouble(1e300, out);
    CHECK(out == "0.1,3,null,null,1e+300");
  }

  TEST_CASE("a rank response with items, nulls, degraded and explain") {
    test::Engine e;
    auto plan = test::MustLoad(R"({"schema_version": 1, "name": "p",
    "nodes": [{"node_id": "f", "op": "fixed_source", "params": {"count": 2}},
              {"node_id": "x", "op": "sleep", "params": {"fail_after_sleep": true}, "optional": true},
              {"node_id": "c", "op": "concat", "inputs": ["f", "x"]}],
    "output": {"node": "c", "columns": ["id", "score"]}})");
    auto r = e.Run(plan);
    REQUIRE(r.has_value());
    r->took_us = 5;
    std::string out;
    AppendRankResponse(*r, false, out);
    CHECK(out == R"({"plan":"p","user_id":1,"items":[{"id":1,"score":1},{"id":2,"score":2}],)"
                 R"("count":2,"took_us":5,"degraded":["x"]})");
    out.clear();
    AppendRankResponse(*r, true, out);
    CHECK(out.find(R"("nodes":[{"node_id":"f","op":"fixed_source","status":"ok","rows":2,)") !=
          std::string::npos);
    CHECK(out.find(R"({"node_id":"x","op":"sleep","status":"failed","rows":0,)") !=
          std::string::npos);
    // A node with inputs also says how many rows it read (the sum over its inputs); a
    // source does not.
    CHECK(out.find(R"({"node_id":"c","op":"concat","status":"ok","rows":2,"rows_in":2,)") !=
          std::string::npos);
    CHECK(out.find(R"("op":"fixed_source","status":"ok","rows":2,"start_us")") !=
          std::string::npos);
  }

}  // TEST_SUITE
