#include "cli/cli_flags.h"

#include "core/parse_int.h"
#include "redis/endpoint.h"

namespace rankd {

namespace {
constexpr size_t kHelpColumn = 27;
}  // namespace

Flag TextFlag(std::string_view name, std::string_view arg, std::string_view help,
              std::string& field) {
  return Flag{name,
              {},
              arg,
              help,
              [&field](std::string_view v) -> Status {
                field = std::string(v);
                return {};
              },
              [&field] { return field; }};
}

Flag SwitchFlag(std::string_view name, std::string_view help, bool& field, std::string_view alias) {
  return Flag{name,
              alias,
              {},
              help,
              [&field](std::string_view) -> Status {
                field = true;
                return {};
              },
              [&field] { return std::string(field ? "on" : "off"); }};
}

Flag RepeatedFlag(std::string_view name, std::string_view arg, std::string_view help,
                  std::vector<std::string>& values, std::function<std::string()> show) {
  return Flag{name,
              {},
              arg,
              help,
              [&values](std::string_view v) -> Status {
                values.emplace_back(v);
                return {};
              },
              show ? std::move(show) : [] { return std::string(); }};
}

Result<int64_t> ParseFlagInt(std::string_view flag, std::string_view value, int64_t lo,
                             int64_t hi) {
  std::optional<int64_t> n = ParseStrictInt<int64_t>(value);
  if (!n)
    return Fail(
        Error::BadRequest(std::string(flag) + ": '" + std::string(value) + "' is not an integer"));
  if (*n < lo || *n > hi)
    return Fail(Error::BadRequest(std::string(flag) + ": " + std::to_string(*n) +
                                  " is out of bounds " + std::to_string(lo) + ".." +
                                  std::to_string(hi)));
  return *n;
}

Status ParseFlags(const std::vector<std::string>& args, std::span<const Flag> flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view name = args[i];
    std::string_view inline_value;
    bool has_inline = false;
    if (size_t eq = name.find('='); name.starts_with("--") && eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& f : flags)
      if (name == f.name || (!f.alias.empty() && name == f.alias)) flag = &f;
    if (!flag) return Fail(Error::NotFound(MaskRedisUrl(name)));
    std::string_view value = inline_value;
    if (!flag->arg.empty() && !has_inline) {
      if (i + 1 >= args.size())
        return Fail(Error::BadRequest(std::string(name) + ": needs a value"));
      value = args[++i];
    }
    if (auto st = flag->set(flag->arg.empty() ? std::string_view() : value); !st) return st;
  }
  return {};
}

std::string FlagUsage(std::span<const Flag> flags) {
  std::string out, bare;
  for (const Flag& f : flags) {
    if (f.help.empty()) {
      bare += bare.empty() ? "  " : ", ";
      bare += f.name;
      continue;
    }
    std::string head = "  " + std::string(f.name);
    if (!f.arg.empty()) head += " " + std::string(f.arg);
    out += head;
    if (head.size() + 2 > kHelpColumn)
      out += "\n" + std::string(kHelpColumn, ' ');
    else
      out += std::string(kHelpColumn - head.size(), ' ');
    std::string help(f.help);
    if (size_t at = help.find("{}"); at != std::string::npos) help.replace(at, 2, f.show());
    for (size_t pos = 0, nl; (nl = help.find('\n', pos)) != std::string::npos;
         pos = nl + 1 + kHelpColumn)
      help.insert(nl + 1, kHelpColumn, ' ');
    out += help + "\n";
  }
  if (!bare.empty()) out += bare + "\n";
  return out;
}

}  // namespace rankd
