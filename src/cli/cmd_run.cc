// rankd run --plan NAME: one request ({"user_id", "params"} on stdin) through the plan,
// on one loop and a small CPU pool; prints the /rank response JSON, or the error JSON
// and exits 1.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>

#include "api/errors.h"
#include "api/rank_request.h"
#include "api/rank_response.h"
#include "cli/cli_redis.h"
#include "cli/commands.h"
#include "plan/loader.h"
#include "sched/scheduler.h"

namespace rankd {

namespace {

int PrintError(const Error& e) {
  std::printf("%s\n", ErrorBody(e).c_str());
  // The operator running the command may see what a client may not.
  if (!e.detail.empty()) std::fprintf(stderr, "detail: %s\n", e.detail.c_str());
  return 1;
}

}  // namespace

int CmdRun(const std::vector<std::string>& argv) {
  RedisFlags redis_flags;
  PlanDirFlags plan_dir;
  std::string plan_name;
  int64_t deadline_ms = 0, node_timeout_ms = 0, redis_conns = 1;
  bool explain = false;
  std::vector<Flag> flags = RedisFlagRows(redis_flags);
  plan_dir.AddRows(flags);
  flags.insert(flags.end(),
               {
                   TextFlag("--plan", "NAME", {}, plan_name),
                   IntFlag("--deadline-ms", "N", {}, deadline_ms, -kAnyInt, kAnyInt),
                   IntFlag("--node-timeout-ms", "N", {}, node_timeout_ms, -kAnyInt, kAnyInt),
                   IntFlag("--redis-conns", "N", {}, redis_conns, -kAnyInt, kAnyInt),
                   SwitchFlag("--explain", {}, explain),
               });
  if (!ParseCommandFlags("run", argv, flags)) return 2;
  auto endpoints = ResolveCommandRedis("run", redis_flags);
  if (!endpoints) return 2;

  std::string body(std::istreambuf_iterator<char>(std::cin), {});
  auto req = ParseRankRequest(body, /*require_plan=*/false);
  if (!req) return PrintError(req.error());
  if (!plan_name.empty()) req->plan = plan_name;
  if (req->plan.empty()) return PrintError(Error::BadRequest("plan: give --plan NAME"));
  if (req->deadline_ms) deadline_ms = *req->deadline_ms;
  explain = explain || req->explain;

  auto plans = plan_dir.Load();
  if (!plans) return PrintError(Error::Internal("loading plans: " + plans.error().message));
  PlanPtr plan = plans->Find(req->plan);
  if (!plan)
    return PrintError(
        Error::UnknownPlan("plan: '" + req->plan + "' is not loaded from " + plan_dir.dir));

  if (auto ok = CheckUserIdType(req->user_id, plan->user_id_type, plan->name); !ok)
    return PrintError(ok.error());
  ShardRuntime runtime("run", /*cpu_threads=*/2);
  runtime.Start();
  bool uses_redis = !redis_flags.endpoints.empty();
  for (const auto& node : plan->nodes) uses_redis |= node.schema->is_io;
  if (uses_redis) OpenCliRedis(runtime, *endpoints, static_cast<int>(redis_conns));
  runtime.env().node_timeout_ms = static_cast<uint64_t>(node_timeout_ms > 0 ? node_timeout_ms : 0);
  RunRequest run{.plan = plan,
                 .user_id = req->user_id,
                 .params = std::move(req->params),
                 .deadline = std::nullopt,
                 .keep_for_log = false,
                 .cancel = {}};
  if (deadline_ms > 0) run.deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
  auto result = runtime.Run(RunPlan(runtime.env(), std::move(run)));
  runtime.Stop();  // work abandoned by a timeout ends first
  if (!result) return PrintError(result.error());
  std::string out;
  AppendRankResponse(*result, explain, out);
  std::printf("%s\n", out.c_str());
  return 0;
}

const char kRunSynopsis[] =
    "--plan NAME [--plans DIR] [--deadline-ms N] [--node-timeout-ms N] [--explain] "
    "[--enable-test-ops] [--redis NAME=URL]...  (request JSON on stdin)";

}  // namespace rankd
