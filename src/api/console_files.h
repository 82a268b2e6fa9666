// The console's static files (console/dist/), compiled into rankd: the build turns each
// file into bytes in a generated source (src/api/embed_files.py), so serving the
// console needs no file on disk and nothing fetched from elsewhere.
//
// Threads: constants and pure functions, any thread.
#pragma once

#include <span>
#include <string_view>

#include "http/message.h"

namespace rankd {

// The extra headers of every answer of a console route: the page may load nothing but
// rankd's own files (no inline script, nothing from elsewhere), no other site may frame
// it (clickjacking: CSP's frame-ancestors, and X-Frame-Options for browsers without
// it), an injected <base> cannot redirect its relative URLs, and a browser takes each
// file for the type it is served as.
inline constexpr http::HeaderField kConsoleHeaders[] = {
    {"Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'"},
    {"X-Frame-Options", "DENY"},
    {"X-Content-Type-Options", "nosniff"}};

// The body of GET /console's redirect to the console's page.
inline constexpr std::string_view kConsoleRedirectBody = R"({"location":"/console/"})";

struct EmbeddedFile {
  std::string_view path;  // relative to console/dist/, e.g. "app.js"
  std::string_view content_type;
  std::string_view bytes;
};

// Every file of console/dist/, sorted by path (bytewise).
std::span<const EmbeddedFile> ConsoleFiles();

// The file `name` names (the request path after "/console/"); "" names index.html.
// Null when there is none. REQUIRES: `files` sorted by path.
const EmbeddedFile* FindEmbeddedFile(std::span<const EmbeddedFile> files, std::string_view name);

}  // namespace rankd
