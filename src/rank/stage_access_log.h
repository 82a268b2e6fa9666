// The last stage of /rank: the access log line of the answer (--access-log) and the log
// lines of its failures (server errors, and the details behind `degraded`).
//
// Threads: the shard's loop thread.
#pragma once

#include <string_view>

#include "api/routes.h"
#include "rank/stage.h"

namespace rankd {

class AccessLogStage : public StageBase {
 public:
  using StageBase::StageBase;
  void After(RankContext& ctx);
};

// One JSON line into the shard's access log ring, written to stdout by the server's
// writer thread; dropped and counted when the ring is full. `plan` is null outside /rank.
// REQUIRES: --access-log (shard.access_log set).
void WriteAccessLog(RankShard& shard, std::string_view request_id, Route route,
                    std::string_view method, int status, TimePoint t0, const Plan* plan,
                    const UserId& user_id);

}  // namespace rankd
