// ReadSmallFile: the whole content of a small secret or list file read at start-up or
// on SIGHUP (token files, cursor keys), refused when over `max_bytes` so that a wrong
// path (a log, a device) is never read whole. Errors are BadRequest and name the file,
// never its content: "cannot read PATH: <errno>", "PATH is over N bytes: is it the
// <what>?".
//
// Threads: any; blocking file IO, so not on a loop thread's request path.
#pragma once

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace rankd {

inline Result<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                         std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Error::BadRequest("cannot read " + path + ": " + std::strerror(errno)));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Fail(Error::BadRequest("cannot read " + path + ": read error"));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes)
    return Fail(Error::BadRequest(path + " is over " + std::to_string(max_bytes) +
                                  " bytes: is it the " + std::string(what) + "?"));
  return text;
}

}  // namespace rankd
