// docs/api.md against the code: its route table (path, methods) and its error table
// (code, status) must list exactly what src/api/routes.h and src/api/errors.h hold,
// nothing missing and nothing extra.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "api/routes.h"

namespace {

std::string ReadApiDoc() {
  const char* env = std::getenv("RANKD_SOURCE_ROOT");
  std::string root = env && *env ? env : RANKD_SOURCE_ROOT;
  std::ifstream in(root + "/docs/api.md");
  REQUIRE_MESSAGE(in.good(), "cannot read " << root << "/docs/api.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string WithoutBackticks(std::string s) {
  std::erase(s, '`');
  return s;
}

// The body rows of the markdown table whose header line is `header`, as cells.
std::vector<std::vector<std::string>> TableRows(const std::string& doc, const std::string& header) {
  std::vector<std::vector<std::string>> rows;
  size_t at = doc.find("\n" + header + "\n");
  REQUIRE_MESSAGE(at != std::string::npos, "docs/api.md has no table headed " << header);
  std::istringstream lines(doc.substr(at + header.size() + 2));
  std::string line;
  std::getline(lines, line);  // |---|---|
  while (std::getline(lines, line) && line.starts_with('|')) {
    std::vector<std::string> cells;
    size_t pos = 1;
    for (size_t bar; (bar = line.find('|', pos)) != std::string::npos; pos = bar + 1)
      cells.push_back(Trim(line.substr(pos, bar - pos)));
    rows.push_back(std::move(cells));
  }
  return rows;
}

template <class T>
void CheckSame(const std::set<T>& doc, const std::set<T>& code, const char* what) {
  for (const auto& x : code)
    CHECK_MESSAGE(doc.count(x),
                  what << " missing from docs/api.md: " << x.first << " " << x.second);
  for (const auto& x : doc)
    CHECK_MESSAGE(code.count(x),
                  what << " in docs/api.md but not in the code: " << x.first << " " << x.second);
}

}  // namespace

TEST_SUITE("api_doc") {
  TEST_CASE("the route table lists every route with its methods") {
    std::set<std::pair<std::string, std::string>> doc, code;
    for (const auto& cells : TableRows(ReadApiDoc(), "| path | methods | answer |")) {
      REQUIRE(cells.size() >= 2);
      doc.emplace(WithoutBackticks(cells[0]), WithoutBackticks(cells[1]));
    }
    for (const auto& r : rankd::kRoutes) code.emplace(std::string(r.pattern), std::string(r.allow));
    CheckSame(doc, code, "route");
  }

  TEST_CASE("the error table lists every error code with its status") {
    std::set<std::pair<std::string, int>> doc, code;
    for (const auto& cells : TableRows(ReadApiDoc(), "| code | status | when |")) {
      REQUIRE(cells.size() >= 2);
      doc.emplace(WithoutBackticks(cells[0]), std::stoi(cells[1]));
    }
    for (const auto& e : rankd::kApiErrors) code.emplace(std::string(e.name), e.status);
    CheckSame(doc, code, "error");
  }

}  // TEST_SUITE
