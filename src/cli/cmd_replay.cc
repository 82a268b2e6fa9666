// rankd replay --log FILE|redis-stream://ENDPOINT?stream=S [--redis NAME=URL]...
//              [--redis-max-reply-bytes N] [--plans DIR] [--max-model-bytes N]
//              [--enable-test-ops]
// Scores every model input of a served log again with the plans folder's models and
// prints one JSON line per model (served/replay.h). Exit 0: scores checked, none of a
// model with the logged sha256 differs; 1: one differs, or nothing was checked, or the
// log could not be read; 2: usage.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/cli_redis.h"
#include "cli/commands.h"
#include "core/run_sync.h"
#include "plan/loader.h"
#include "redis/shard_clients.h"
#include "served/replay.h"
#include "served/shard_log.h"
#include "served/sink_config.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// Records of a JSON-lines file; blank lines are skipped, malformed ones reported.
bool ReplayFile(const std::string& path, Replay& replay) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "rankd replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::string line;
  for (uint64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (auto st = replay.Add(line); !st)
      std::fprintf(stderr, "rankd replay: %s:%llu: skipped: %s\n", path.c_str(),
                   static_cast<unsigned long long>(n), st.error().message.c_str());
  }
  return true;
}

// Entries per XRANGE page: as many of the largest record a sink writes
// (ShardServedLog::kMaxRecordBytes, with room for the entry's id and field name) as one
// reply may hold under the client's reply limit (--redis-max-reply-bytes, 64 MiB: 63),
// at most 500. A page sized
// by count alone would fail the connection on a stream of large records.
int64_t XrangePageEntries(uint64_t max_reply_bytes) {
  constexpr uint64_t kPerEntry = ShardServedLog::kMaxRecordBytes + 4096;
  return static_cast<int64_t>(std::clamp<uint64_t>(max_reply_bytes / kPerEntry, 1, 500));
}

// XRANGE pages of the stream, oldest first, each entry's `record` field; `count` entries
// a page.
Coro<Status> ReadStream(RedisClient& client, std::string stream, int64_t count, Replay& replay) {
  std::string start = "-";
  for (;;) {
    RedisCommands cmds;
    cmds.Add(6).Arg("XRANGE").Arg(stream).Arg(start).Arg("+").Arg("COUNT").Arg(count);
    auto replies = co_await client.Batch(std::move(cmds), Clock::now() + std::chrono::seconds(30));
    if (!replies) co_return Fail(replies.error());
    RespView page = (*replies)[0];
    if (page.is_error())
      co_return Fail(Error::BadRequest("XRANGE " + stream + ": " + std::string(page.str())));
    int64_t n = 0;
    for (RespView entry : page) {
      ++n;
      auto it = entry.begin();
      if (it == entry.end()) continue;
      std::string id((*it).str());
      ++it;
      if (it != entry.end()) {
        RespView fields = *it;
        for (auto f = fields.begin(); f != fields.end(); ++f) {
          std::string_view key = (*f).str();
          if (++f == fields.end()) break;
          if (key != "record") continue;
          std::string record((*f).str());
          if (auto st = replay.Add(record); !st)
            std::fprintf(stderr, "rankd replay: %s %s: skipped: %s\n", stream.c_str(), id.c_str(),
                         st.error().message.c_str());
        }
      }
      start = "(" + id;  // the next page starts after it
    }
    if (n < count) co_return Status{};
  }
}

}  // namespace

int CmdReplay(const std::vector<std::string>& argv) {
  std::string log;
  PlanDirFlags plan_dir;  // the folder loads as the server that wrote the log loaded it
  RedisFlags redis_flags;
  ReplyLimits limits;
  std::vector<Flag> flags = RedisFlagRows(redis_flags);
  flags.push_back(TextFlag("--log", "FILE|URL", {}, log));
  flags.push_back(IntFlag("--redis-max-reply-bytes", "N",
                          "bytes one XRANGE reply may take; pages are sized to it ({})",
                          limits.max_bytes, 16, int64_t{1} << 40));
  plan_dir.AddRows(flags);
  if (!ParseCommandFlags("replay", argv, flags)) return 2;
  auto endpoints = ResolveCommandRedis("replay", redis_flags);
  if (!endpoints) return 2;
  if (log.empty()) {
    std::fprintf(stderr,
                 "rankd replay: give --log FILE or --log redis-stream://ENDPOINT?stream=S\n");
    return 2;
  }
  auto set = plan_dir.Load();
  if (!set) {
    std::fprintf(stderr, "rankd replay: %s\n", set.error().message.c_str());
    return 2;
  }
  Replay replay(set->models);
  if (log.starts_with("redis-stream://")) {
    // The same URL form as a sink's; maxlen is irrelevant here, so a dummy one.
    auto sink =
        ParseSinkFlag("replay=" + log +
                      (log.find("maxlen=") == std::string::npos
                           ? (log.find('?') == std::string::npos ? "?maxlen=1" : "&maxlen=1")
                           : ""));
    if (!sink) {
      std::fprintf(stderr, "rankd replay: --log: %s\n", sink.error().message.c_str());
      return 2;
    }
    ShardRuntime runtime("replay", /*cpu_threads=*/1);
    runtime.Start();
    RedisPools& pools = OpenCliRedis(runtime, *endpoints, 1, limits);
    RedisClient* client = pools.Get(sink->endpoint);
    if (!client) {
      std::fprintf(stderr, "rankd replay: --log: no --redis endpoint is named '%s'\n",
                   sink->endpoint.c_str());
      return 2;
    }
    Status read =
        runtime.Run(ReadStream(*client, sink->stream, XrangePageEntries(limits.max_bytes), replay));
    runtime.Stop();
    if (!read) {
      std::fprintf(stderr, "rankd replay: %s\n", read.error().message.c_str());
      return 1;
    }
  } else {
    std::string path = log.starts_with("file://") ? log.substr(7) : log;
    if (!ReplayFile(path, replay)) return 1;
  }
  std::fputs(replay.Report().c_str(), stdout);
  if (replay.ExitCode() != 0) {
    std::fprintf(stderr, "rankd replay: %llu record(s); %s\n",
                 static_cast<unsigned long long>(replay.records()),
                 replay.stats().empty() ? "no model scores to check" : "scores differ");
  }
  return replay.ExitCode();
}

const char kReplaySynopsis[] =
    "--log FILE|redis-stream://ENDPOINT?stream=S [--redis NAME=URL]... [--plans DIR]"
    " [--enable-test-ops]";

}  // namespace rankd
