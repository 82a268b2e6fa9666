// OriginPolicy: Host names and Origins as a listener judges them.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "http/origin_policy.h"

using namespace rankd::http;
using V = OriginPolicy::Verdict;

namespace {

OriginPolicy Make(std::vector<std::string> origins, std::vector<std::string> hosts, bool loopback) {
  auto p = OriginPolicy::Make(origins, hosts, loopback);
  REQUIRE(p);
  return *p;
}

}  // namespace

TEST_CASE("the default Host list: loopback names on a loopback listener, any name elsewhere") {
  OriginPolicy lo = Make({}, {}, true);
  for (const char* ok : {"localhost", "LOCALHOST:8080", "127.0.0.1:9", "[::1]:80", ""})
    CHECK_MESSAGE(lo.HostAllowed(ok), ok);
  for (const char* bad : {"evil.example", "evil.example:8080", "localhost.evil.example",
                          "127.0.0.2", "x", "[::2]", "local host", "localhost:x"})
    CHECK_MESSAGE(!lo.HostAllowed(bad), bad);
  OriginPolicy any = Make({}, {}, false);
  CHECK(any.HostAllowed("evil.example"));
  CHECK(Make({}, {"*"}, true).HostAllowed("evil.example"));
  OriginPolicy listed = Make({}, {"Rank.Example", "[::1]"}, true);
  CHECK(listed.HostAllowed("rank.example:8080"));
  CHECK(listed.HostAllowed("[::1]"));
  CHECK(!listed.HostAllowed("localhost"));  // a list replaces the default
  CHECK(IsLoopbackAddress("127.0.0.1"));
  CHECK(IsLoopbackAddress("::1"));
  CHECK(!IsLoopbackAddress("0.0.0.0"));
  CHECK(!IsLoopbackAddress("::"));
}

TEST_CASE("origins compare as scheme, lower-cased host and port, default ports filled in") {
  OriginPolicy p = Make({"https://App.Example", "http://localhost:3000"}, {}, false);
  CHECK(p.CheckOrigin("https://app.example", "rank.example", 1) == V::kListed);
  CHECK(p.CheckOrigin("HTTPS://APP.EXAMPLE:443", "rank.example", 1) == V::kListed);
  CHECK(p.CheckOrigin("http://app.example", "rank.example", 1) == V::kForbidden);
  CHECK(p.CheckOrigin("https://app.example:8443", "rank.example", 1) == V::kForbidden);
  CHECK(p.CheckOrigin("http://localhost:3000", "rank.example", 1) == V::kListed);
  CHECK(p.CheckOrigin("http://localhost", "rank.example", 1) == V::kForbidden);
  CHECK(p.CheckOrigin("https://app.example.evil", "rank.example", 1) == V::kForbidden);
  // "null" and what is no origin never match, nor does a second Origin line.
  for (const char* bad : {"null", "", "app.example", "https://app.example/", "https://",
                          "https://a@app.example", "https://app.example:0"})
    CHECK_MESSAGE(p.CheckOrigin(bad, "app.example", 1) == V::kForbidden, bad);
  CHECK(p.CheckOrigin("https://app.example", "rank.example", 2) == V::kForbidden);
}

TEST_CASE("an origin of the request's own Host is a same-origin request") {
  OriginPolicy p = Make({}, {}, false);
  CHECK(p.CheckOrigin("http://rank.example:8080", "Rank.Example:8080", 1) == V::kSameHost);
  CHECK(p.CheckOrigin("http://rank.example:8081", "rank.example:8080", 1) == V::kForbidden);
  CHECK(p.CheckOrigin("http://[::1]:8080", "[::1]:8080", 1) == V::kSameHost);
  // A Host without a port: the page's scheme's port (behind a TLS proxy, say).
  CHECK(p.CheckOrigin("https://rank.example", "rank.example", 1) == V::kSameHost);
  CHECK(p.CheckOrigin("http://rank.example", "rank.example", 1) == V::kSameHost);
  CHECK(p.CheckOrigin("http://rank.example:8080", "rank.example", 1) == V::kForbidden);
  CHECK(p.CheckOrigin("null", "rank.example", 1) == V::kForbidden);
  CHECK(p.CheckOrigin("http://rank.example", "", 1) == V::kForbidden);
}

TEST_CASE("bad list entries are start-up errors naming them") {
  std::vector<std::string> none;
  auto bad_origin = OriginPolicy::Make(std::vector<std::string>{"app.example"}, none, false);
  REQUIRE(!bad_origin);
  CHECK(bad_origin.error().message.find("'app.example'") != std::string::npos);
  CHECK(!OriginPolicy::Make(std::vector<std::string>{"https://app.example/path"}, none, false));
  auto bad_host = OriginPolicy::Make(none, std::vector<std::string>{"rank.example:80"}, false);
  REQUIRE(!bad_host);
  CHECK(bad_host.error().message.find("--allowed-hosts") != std::string::npos);
}
