// The first stages of /rank: parse and bind. Parses the body (api/rank_request.h) and binds it to a
// plan of the shard's snapshot: bad_request naming the field, unknown_plan, a user id of another
// type. Fills the run and the request's own fields of the context.
//
// Threads: the shard's loop thread.
#pragma once

#include "core/error.h"
#include "rank/stage.h"

namespace rankd {

// Parses the body; the request's id, time and deadline.
class ParseStage : public StageBase {
 public:
  using StageBase::StageBase;
  Status Before(RankContext& ctx, RankInput& in);
};

// Binds the request to its plan. After the pages stage, which answers a request with a
// cursor itself (later pages run no plan).
class BindStage : public StageBase {
 public:
  using StageBase::StageBase;
  Status Before(RankContext& ctx, RankInput& in);
};

}  // namespace rankd
