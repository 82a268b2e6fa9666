// The stages of the /rank path, in the order their hooks run (rank/stage.h says what a
// stage is). Adding one: its file, its include here and its line in RankStages.
//
// Threads: none (types only).
#pragma once

#include "rank/stage_access_log.h"
#include "rank/stage_admission.h"
#include "rank/stage_bind.h"
#include "rank/stage_experiment.h"
#include "rank/stage_pages.h"
#include "rank/stage_plan_metrics.h"
#include "rank/stage_served_log.h"
#include "rank/stage_served_state.h"
#include "rank/stage_shadows.h"

namespace rankd {

template <class... Stages>
struct StageList {};
template <class List>
inline constexpr size_t kStageCount = 0;
template <class... Stages>
inline constexpr size_t kStageCount<StageList<Stages...>> = sizeof...(Stages);

using RankStages = StageList<  //
    ParseStage,                // the body, the request's id, time and deadline
    PagesStage,                // a later page answered from its snapshot; a first page's
    BindStage,                 // the plan asked, the user id's type
    ExperimentStage,           // the variant that runs, its counts
    PlanMetricsStage,          // the plan's series, its outcome and node counts
    AdmissionStage,            // refused past the shard's limit or the deadline left
    ServedLogStage,            // sampled into the served log, recorded after the answer
    ServedStateStage,          // the answer's items into the user's zset, after the answer
    ShadowStage,               // the experiment's shadow plans, after the answer
    AccessLogStage>;           // the access log line and failures' log lines

}  // namespace rankd
