// The console's files as compiled in (api/console_files.h, generated from console/dist/
// by src/api/embed_files.py) and the routes that serve them (api/routes.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "api/console_files.h"
#include "api/routes.h"

namespace {

using rankd::EmbeddedFile;
using rankd::FindEmbeddedFile;

constexpr EmbeddedFile kTable[] = {
    {"a/b.js", "text/javascript; charset=utf-8", "b"},
    {"app.js", "text/javascript; charset=utf-8", "app"},
    {"index.html", "text/html; charset=utf-8", "<!doctype html>"},
};

std::string ReadDist(const std::string& rel) {
  std::ifstream in(std::string(RANKD_SOURCE_ROOT) + "/console/dist/" + rel, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read console/dist/" << rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_SUITE("console_files") {
  TEST_CASE("a name finds its file; the empty name is the page") {
    CHECK(FindEmbeddedFile(kTable, "app.js")->bytes == "app");
    CHECK(FindEmbeddedFile(kTable, "a/b.js")->bytes == "b");
    CHECK(FindEmbeddedFile(kTable, "")->path == "index.html");
    for (const char* missing : {"app", "app.js/", "/app.js", "../app.js", "zz", "a", "A/b.js"})
      CHECK_MESSAGE(FindEmbeddedFile(kTable, missing) == nullptr, missing);
    CHECK(FindEmbeddedFile({}, "index.html") == nullptr);
  }

  TEST_CASE("the compiled files are console/dist's, sorted, with their types") {
    auto files = rankd::ConsoleFiles();
    REQUIRE(files.size() >= 3);
    CHECK(std::is_sorted(
        files.begin(), files.end(),
        [](const EmbeddedFile& a, const EmbeddedFile& b) { return a.path < b.path; }));
    for (const auto& [name, type] : {std::pair{"index.html", "text/html; charset=utf-8"},
                                     std::pair{"app.js", "text/javascript; charset=utf-8"},
                                     std::pair{"app.css", "text/css; charset=utf-8"}}) {
      const EmbeddedFile* f = FindEmbeddedFile(files, name);
      REQUIRE_MESSAGE(f != nullptr, name);
      CHECK(f->content_type == type);
      CHECK(f->bytes == ReadDist(name));
    }
  }

  TEST_CASE("the console's routes: on the metrics address with --console only") {
    using rankd::Listener;
    using rankd::Route;
    CHECK(rankd::MatchRoute("/console") == Route::kConsole);
    CHECK(rankd::MatchRoute("/console/api/metrics") == Route::kConsoleMetrics);
    CHECK(rankd::MatchRoute("/console/") == Route::kConsoleFile);
    CHECK(rankd::MatchRoute("/console/api/metrics/x") == Route::kConsoleFile);
    CHECK(rankd::MatchRoute("/consolex") == Route::kOther);
    for (Route r : {Route::kConsole, Route::kConsoleMetrics, Route::kConsoleFile}) {
      CHECK(rankd::IsConsoleRoute(r));
      CHECK_FALSE(rankd::ServedOn(r, Listener::kMain, true));
      CHECK_FALSE(rankd::ServedOn(r, Listener::kMetrics, false));
      CHECK(rankd::ServedOn(r, Listener::kMetrics, true));
    }
    CHECK(rankd::ServedOn(Route::kRank, Listener::kMetrics, true));
    CHECK_FALSE(rankd::ServedOn(Route::kRank, Listener::kMetrics, false));
    CHECK(rankd::ServedOn(Route::kHealthz, Listener::kMetrics, false));
    // The metrics in both forms follow one rule: no token on the metrics address.
    CHECK_FALSE(rankd::NeedsToken(Route::kConsoleMetrics, Listener::kMetrics));
    CHECK_FALSE(rankd::NeedsToken(Route::kConsoleFile, Listener::kMetrics));
    CHECK_FALSE(rankd::NeedsToken(Route::kMetrics, Listener::kMetrics));
    CHECK(rankd::NeedsToken(Route::kMetrics, Listener::kMain));
    CHECK(rankd::NeedsToken(Route::kOther, Listener::kMain));
  }
}  // TEST_SUITE
