// Plan: a validated, typed, immutable DAG loaded from plans/<name>.plan.json
// (docs/plan.md). Nodes are indexed by integer; successors and in-degrees are
// precomputed so the scheduler never looks a node up by name. Shared as
// shared_ptr<const Plan>: a request keeps the snapshot it started with.
//
// Threads: immutable after load; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "plan/expr.h"
#include "plan/op_schema.h"
#include "plan/params.h"

namespace rankd {

// A task parameter given as {"param": "name"}: slot `arg` of the node's TaskArgs takes
// request parameter `decl` (index into Plan::params.decls).
struct ParamRef {
  uint32_t arg = 0;
  uint32_t decl = 0;
};

// A `model` node's model, bound at load: columns[f] is the column model feature f reads
// (numeric at that node, or a vec column whose element elements[f] it reads), fills[f]
// the value a missing one takes (NaN: none, it stays missing; the `fill` param).
struct NodeModel {
  ModelPtr model;
  std::vector<std::string> columns;
  std::vector<uint32_t> elements;
  std::vector<float> fills;
  ModelOutput output = ModelOutput::kDefault;
};

struct PlanNode {
  std::string id;
  std::string op;
  const OpSchema* schema = nullptr;  // owned by the catalog the plan was loaded with
  std::vector<uint32_t> inputs;      // node indices, in listed order (duplicates allowed)
  std::vector<uint32_t> successors;  // one entry per edge, so in_degree matches
  uint32_t in_degree = 0;            // == inputs.size()
  bool optional = false;
  std::optional<uint64_t> timeout_ms;
  TaskArgs args;                             // literals, with `refs` slots holding defaults
  std::vector<ParamRef> refs;                // resolved per request
  std::shared_ptr<const CompiledExpr> expr;  // ops with a kExprId param
  std::shared_ptr<const CompiledPred> pred;  // ops with a kPredId param
  NodeModel model;                           // ops with a kModel param
  const KeyFamily* family = nullptr;         // ops with a `family` param (Plan::schema's)
  ColumnTypes out_types;                     // typed at load
  // > 0: whoever reads this node's output reads only its first `rows_read` rows (its one
  // reader is a take of at most that many, and it is not the plan's output), so a sort
  // need only order that many. 0: every row may be read. Set at load.
  uint32_t rows_read = 0;
  // When that take's count is a request parameter: its index in Plan::params.decls, so a
  // run orders only the count this request asked for (rows_read is then the param's max,
  // or 0 without one). -1 otherwise.
  int32_t rows_read_param = -1;
  // The work of one input row, in rows of a cheap CPU task (vm, filter): the scheduler
  // runs a CPU node inline on the loop only while rows x row_cost stays small. Set at
  // load: a model's row costs a tree walk per tree.
  uint32_t row_cost = 1;
};

// The plan's "log" block (docs/served-log.md): which requests are recorded, to which
// sink, with which columns. Resolved at load.
struct PlanLog {
  bool enabled = false;  // the plan has a "log" block
  double sample = 0;     // 0..1: the share of requests recorded (a request's "log": true too)
  std::string sink;      // a --served-log name; one the server lacks counts dropped_no_sink
  std::vector<std::string> columns;  // per-item columns; default: the output's columns
  int32_t candidates = -1;           // node whose unserved rows follow the served ones; -1: none
  uint32_t candidates_top = 0;       // how many of them, at most
  // Nodes whose output a recorded request keeps until it is written: every `model` node,
  // the candidates node and the first `viewer` node, in node order.
  std::vector<uint32_t> kept;
  int32_t viewer = -1;  // the first viewer node, or -1
};

// A value the plan's {"from": node, "key": column} expressions read (docs/plan.md): the
// column's cell in the first row of `node` (a viewer), null when it has no row. A run
// binds it once, when `node` finishes, at index params.decls.size() + its index in
// Plan::from_values of the run's ParamValues.
struct FromValue {
  uint32_t node = 0;
  std::string column;
};

// The plan's "quality" block (docs/plan.md): under load, the named integer op params
// are scaled by a factor q in [min, 1] (rank/admission.h keeps q per plan and shard).
struct QualityScale {
  uint32_t node = 0;
  uint32_t arg = 0;        // slot in the node's TaskArgs
  int64_t lo = 1, hi = 0;  // the scaled value's bounds: the op's (at least 1)
  int32_t ref_decl = -1;   // the slot is {"param": decl}: scaled only when the request
                           // did not give that param (request params are never scaled)
};
struct PlanQuality {
  bool enabled = false;
  double target_p95_ms = 0;
  double min = 0.3;
  std::vector<QualityScale> scale;
};

// The plan's "served_state" block (docs/plan.md): every answer's items go into the
// user's zset of `family` (rank/stage_served_state.h writes it).
struct PlanServedState {
  bool enabled = false;
  const KeyFamily* family = nullptr;  // Plan::schema's: a zset keyed by the user_id
  std::string endpoint = "redis_default";
  int64_t max = 0;    // members kept: the newest
  int64_t ttl_s = 0;  // the key's TTL, set at every write
};

struct Plan {
  std::string name;
  std::string description;
  std::string file;    // where it was loaded from, for messages
  std::string json;    // the file's text, for GET /plans/{name} (api/route_bodies.h)
  std::string sha256;  // of the file's bytes (served-log records name the plan by it)
  ParamDecls params;
  std::vector<PlanNode> nodes;
  std::vector<uint32_t> sources;  // nodes with in_degree 0
  uint32_t output = 0;
  std::vector<std::string> output_columns;  // empty: all columns of the output node
  std::vector<ModelPtr> models;             // the models its nodes use, in node order, once each
  SchemaPtr schema;                         // what its nodes' families point into
  // The type of the request's user_id: the id type of the families its viewer and
  // seen_filter nodes read (i64 when it has neither).
  ColumnType user_id_type = ColumnType::kI64;
  PlanLog log;
  PlanQuality quality;
  std::vector<FromValue> from_values;  // each (node, column) once
  PlanServedState served_state;
  // A node searches an index (OpSchema::reads_index): a run takes the process's index
  // set when it starts (ExecEnv::ann).
  bool reads_indexes = false;

  // Index of the node named `id`, or -1. Load time and tests only (linear).
  int node_index(std::string_view id) const;
};

using PlanPtr = std::shared_ptr<const Plan>;

// The models of a plan folder (NAME.model.json), by name.
using ModelSet = std::unordered_map<std::string, ModelPtr>;

// A loaded plan folder, by plan name, with every model of the folder.
struct ExperimentSet;  // plan/experiments.h

struct PlanSet {
  std::unordered_map<std::string, PlanPtr> plans;
  ModelSet models;
  SchemaPtr schema;  // the folder's schema.json, or the built-in demo schema
  // The folder's experiments.json (never null: an empty set without the file).
  std::shared_ptr<const ExperimentSet> experiments;
  PlanPtr Find(std::string_view name) const {
    auto it = plans.find(std::string(name));
    return it == plans.end() ? nullptr : it->second;
  }
};

}  // namespace rankd
