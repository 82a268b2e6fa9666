// The flags of `rankd serve`: one table (serve_flags.cc) that the parser reads and
// --help prints, so the defaults shown are ServeOptions' own.
//
// Threads: the main thread, before the server starts.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "server/serve_options.h"

namespace rankd {

// What the command line asked for.
struct ServeArgs {
  ServeOptions options;
  bool help = false;
  bool version = false;
};

// Parses argv after the subcommand. Errors are bad_request naming the flag.
Result<ServeArgs> ParseServeArgs(const std::vector<std::string>& args);
// `rankd serve --help`: the routes and every flag with its default.
const std::string& ServeUsage();

}  // namespace rankd
