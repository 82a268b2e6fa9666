// The one command-line flag parser of `rankd` and its subcommands. A command describes
// its flags in a table of Flag rows bound to the variables they set; ParseFlags reads
// the arguments against it and FlagUsage writes the flag lines of --help from the same
// rows, defaults included, so a flag is one row.
//
// Threads: the main thread (plain functions over caller-owned values).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace rankd {

struct Flag {
  std::string_view name;   // "--port"
  std::string_view alias;  // "-h", or empty
  std::string_view arg;    // what the value is ("N", "DIR"); empty: a switch, no value
  // The --help text: "{}" stands for the current value (the default, in a table bound to
  // default options); '\n' starts a new, indented line. Empty: listed on the last line
  // of the usage with the other flags without help (--help, --version).
  std::string_view help;
  // Takes the value (empty for a switch); errors are bad_request naming the flag.
  std::function<Status(std::string_view value)> set;
  std::function<std::string()> show;  // the value "{}" shows
};

// An integer flag into `field`, within lo..hi.
template <class T>
Flag IntFlag(std::string_view name, std::string_view arg, std::string_view help, T& field,
             int64_t lo, int64_t hi, std::string_view alias = {});
Flag TextFlag(std::string_view name, std::string_view arg, std::string_view help,
              std::string& field);
// Sets `field` to true when given.
Flag SwitchFlag(std::string_view name, std::string_view help, bool& field,
                std::string_view alias = {});
// A repeatable flag: each use appends its value to `values`, for the command to read
// once every flag is; `show` gives what "{}" shows (nothing by default).
Flag RepeatedFlag(std::string_view name, std::string_view arg, std::string_view help,
                  std::vector<std::string>& values, std::function<std::string()> show = {});

// "FLAG: 'v' is not an integer", "FLAG: N is out of bounds LO..HI" (bad_request).
Result<int64_t> ParseFlagInt(std::string_view flag, std::string_view value, int64_t lo, int64_t hi);

// Reads `args` in order: `--name value`, `--name=value`, `--switch` (a switch ignores an
// `=value`); a flag given twice keeps its last value (a repeatable row, RedisFlag, keeps
// them all). Errors: bad_request "FLAG: needs a value" or the flag's own; an argument no
// row names is not_found with that argument as the message, for the command to word:
// its name alone for `--name=value`, and any password of a Redis URL in it masked
// (MaskRedisUrl), since a mistyped flag may carry one.
Status ParseFlags(const std::vector<std::string>& args, std::span<const Flag> flags);

// One line (or more) per row: "  --name ARG" then its help at column 27.
std::string FlagUsage(std::span<const Flag> flags);

template <class T>
Flag IntFlag(std::string_view name, std::string_view arg, std::string_view help, T& field,
             int64_t lo, int64_t hi, std::string_view alias) {
  return Flag{name,
              alias,
              arg,
              help,
              [name, &field, lo, hi](std::string_view v) -> Status {
                auto n = ParseFlagInt(name, v, lo, hi);
                if (!n) return Fail(n.error());
                field = static_cast<T>(*n);
                return {};
              },
              [&field] { return std::to_string(field); }};
}

}  // namespace rankd
