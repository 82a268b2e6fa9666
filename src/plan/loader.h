// Plan loader: plans/<name>.plan.json (docs/plan.md) -> validated, typed, immutable Plan.
// Every rejection is an Error (code bad_request) whose message names the plan file, the
// node and the field, e.g. "plans/feed.plan.json: node 't': params.count: 0 is out of
// bounds 1..10000". A folder loads all or nothing.
//
// Threads: any thread (no shared state; the catalog is only read). Plan loading is
// meant to run off the shard loops (start-up, SIGHUP reload).
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "plan/op_schema.h"
#include "plan/plan.h"

namespace rankd {

// `file` is used in messages and kept in Plan::file. `models`: what `model` nodes may
// name (none when null). `schema`: the families Redis-reading nodes may read (null: the
// built-in demo schema).
Result<PlanPtr> LoadPlanText(std::string_view text, std::string_view file, const OpCatalog& ops,
                             const ModelSet* models = nullptr, SchemaPtr schema = nullptr);
Result<PlanPtr> LoadPlanFile(const std::string& path, const OpCatalog& ops,
                             const ModelSet* models = nullptr, SchemaPtr schema = nullptr);
// The folder's schema.json, parsed (the built-in demo schema when there is none): what
// LoadPlanDir starts with, and all that a command reading Redis by the schema alone needs
// (`rankd counters`).
Result<SchemaPtr> LoadSchemaDir(const std::string& dir);
// The folder's schema.json (the built-in demo schema when there is none), every
// *.model.json of `dir` (the model's name is the file name without the suffix),
// then every *.plan.json (a plan's name must match its file name), then experiments.json
// (plan/experiments.h; none: no experiments). One bad plan, model or experiment rejects
// the whole set; an empty folder is an empty set.
Result<PlanSet> LoadPlanDir(const std::string& dir, const OpCatalog& ops,
                            const ModelLimits& model_limits = {});

// What LoadPlanDir would read, summarised: the name, size, modification time and inode
// of every *.plan.json and *.model.json of `dir` and of its schema.json and
// experiments.json (symlinks followed, so a
// Kubernetes ConfigMap update, which swaps a symlink, changes it). Equal fingerprints: nothing to
// reload. Cheap (one stat per file), for polling.
std::string PlanDirFingerprint(const std::string& dir);

}  // namespace rankd
