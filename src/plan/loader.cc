#include "plan/loader.h"

#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/sha256.h"
#include "plan/bind.h"
#include "plan/experiments.h"
#include "plan/json_values.h"

namespace rankd {

namespace {

using namespace json;  // the DOM's types and the number tests

// Builds "file: node 'x': field: what" messages.
struct Where {
  std::string file;
  Error Err(std::string_view what) const {
    return Error::BadRequest(file + ": " + std::string(what));
  }
  Error Node(std::string_view node, std::string_view field, std::string_view what) const {
    std::string m = file + ": node '" + std::string(node) + "'";
    if (!field.empty()) m += ": " + std::string(field);
    return Error::BadRequest(m + ": " + std::string(what));
  }
};

std::string JsonKind(element e) {
  switch (e.type()) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a bool";
    case element_type::NULL_VALUE: return "null";
  }
  return "?";
}

std::optional<ColumnType> ParseType(std::string_view s) {
  if (s == "i64") return ColumnType::kI64;
  if (s == "f64") return ColumnType::kF64;
  if (s == "str") return ColumnType::kStr;
  if (s == "bool") return ColumnType::kBool;
  return std::nullopt;
}

class Loader {
 public:
  Loader(std::string_view file, const OpCatalog& ops, const ModelSet* models, SchemaPtr schema)
      : w_{std::string(file)}, ops_(ops), models_(models), schema_(std::move(schema)) {}

  Result<PlanPtr> Load(std::string_view text) {
    auto plan = std::make_shared<Plan>();
    plan->file = w_.file;
    plan->schema = schema_ ? schema_ : DemoSchema();
    plan->json = std::string(text);
    plan->sha256 = Sha256Hex(text);
    simdjson::dom::parser parser;
    element root;
    if (auto err = parser.parse(plan->json).get(root))
      return Fail(w_.Err(std::string("invalid JSON: ") + simdjson::error_message(err)));
    object obj;
    if (root.get_object().get(obj)) return Fail(w_.Err("the plan must be a JSON object"));
    if (auto s = Header(obj, *plan); !s) return Fail(s.error());
    if (auto s = Params(obj, *plan); !s) return Fail(s.error());
    if (auto s = Nodes(obj, *plan); !s) return Fail(s.error());
    if (auto s = Output(obj, *plan); !s) return Fail(s.error());
    if (auto s = Graph(*plan); !s) return Fail(s.error());
    if (auto s = Type(obj, *plan); !s) return Fail(s.error());
    if (auto s = Log(obj, *plan); !s) return Fail(s.error());
    if (auto s = Quality(obj, *plan); !s) return Fail(s.error());
    if (auto s = ServedState(obj, *plan); !s) return Fail(s.error());
    MarkRowsRead(*plan);
    return PlanPtr(std::move(plan));
  }

 private:
  Status Header(object obj, Plan& plan) {
    element v;
    if (obj["schema_version"].get(v)) return Fail(w_.Err("schema_version: missing"));
    if (!IsInt(v) || int64_t(v.get_int64()) != 1)
      return Fail(w_.Err("schema_version: expected 1, got " + simdjson::to_string(v)));
    std::string_view name;
    if (obj["name"].get(v) || v.get_string().get(name) || name.empty())
      return Fail(w_.Err("name: missing or not a non-empty string"));
    plan.name = std::string(name);
    if (!obj["models"].get(v))
      return Fail(w_.Err("models: not a plan field (GET /plans/{name} lists the models there)"));
    if (!obj["description"].get(v)) {
      std::string_view d;
      if (v.get_string().get(d)) return Fail(w_.Err("description: must be a string"));
      plan.description = std::string(d);
    }
    return {};
  }

  Status Params(object obj, Plan& plan) {
    element v;
    if (obj["params"].get(v)) return {};
    object params;
    if (v.get_object().get(params)) return Fail(w_.Err("params: must be an object"));
    for (auto [key, decl_json] : params) {
      std::string where = "params." + std::string(key);
      ParamDecl d;
      d.name = std::string(key);
      object decl;
      if (decl_json.get_object().get(decl)) return Fail(w_.Err(where + ": must be an object"));
      element t, def;
      std::string_view tname;
      if (decl["type"].get(t) || t.get_string().get(tname) || !ParseType(tname))
        return Fail(w_.Err(where + ".type: must be one of i64, f64, str, bool"));
      d.type = *ParseType(tname);
      for (auto [k, _] : decl)
        if (k != "type" && k != "default" && k != "min" && k != "max")
          return Fail(w_.Err(where + ": unknown field '" + std::string(k) + "'"));
      if (decl["default"].get(def)) return Fail(w_.Err(where + ".default: missing"));
      std::optional<Value> dv = json::Scalar(def);
      if (dv) dv = Coerce(*dv, ParamKindOf(d.type));
      if (!dv)
        return Fail(w_.Err(where + ".default: expected " + std::string(tname) + ", got " +
                           simdjson::to_string(def)));
      d.default_value = *dv;
      for (const char* bound : {"min", "max"}) {
        element b;
        if (decl[bound].get(b)) continue;
        if (d.type != ColumnType::kI64 && d.type != ColumnType::kF64)
          return Fail(w_.Err(where + "." + bound + ": only numbers have bounds"));
        if (!IsNumber(b)) return Fail(w_.Err(where + "." + bound + ": must be a number"));
        double x = IsInt(b) ? double(int64_t(b.get_int64())) : double(b.get_double());
        (std::string_view(bound) == "min" ? d.min : d.max) = x;
      }
      double num = d.type == ColumnType::kI64   ? double(std::get<int64_t>(d.default_value))
                   : d.type == ColumnType::kF64 ? std::get<double>(d.default_value)
                                                : 0;
      if ((d.min && num < *d.min) || (d.max && num > *d.max) || (d.min && d.max && *d.min > *d.max))
        return Fail(w_.Err(where + ": default " + ValueToString(d.default_value) +
                           " is outside its min/max"));
      plan.params.decls.push_back(std::move(d));
    }
    return {};
  }

  Status Nodes(object obj, Plan& plan) {
    element v;
    array nodes;
    if (obj["nodes"].get(v) || v.get_array().get(nodes) || nodes.size() == 0)
      return Fail(w_.Err("nodes: missing or not a non-empty array"));
    size_t i = 0;
    for (element nj : nodes) {
      std::string pos = "nodes[" + std::to_string(i++) + "]";
      object n;
      if (nj.get_object().get(n)) return Fail(w_.Err(pos + ": must be an object"));
      PlanNode node;
      element f;
      std::string_view s;
      if (n["node_id"].get(f) || f.get_string().get(s) || s.empty())
        return Fail(w_.Err(pos + ".node_id: missing or not a non-empty string"));
      node.id = std::string(s);
      if (index_.contains(node.id))
        return Fail(w_.Node(node.id, "node_id",
                            "duplicate node id (also " + std::string("nodes[") +
                                std::to_string(index_[node.id]) + "])"));
      index_[node.id] = static_cast<uint32_t>(plan.nodes.size());
      for (auto [k, _] : n)
        if (k != "node_id" && k != "op" && k != "inputs" && k != "params" && k != "optional" &&
            k != "timeout_ms")
          return Fail(w_.Node(node.id, std::string(k), "unknown node field"));
      if (n["op"].get(f) || f.get_string().get(s))
        return Fail(w_.Node(node.id, "op", "missing or not a string"));
      node.op = std::string(s);
      node.schema = ops_.FindOp(s);
      if (!node.schema) return Fail(w_.Node(node.id, "op", "unknown op '" + node.op + "'"));
      // The one flag this layer names: the error must tell the operator how a test plan
      // loads, and that it was refused on purpose.
      if (node.schema->test_only && !ops_.test_ops_enabled())
        return Fail(w_.Node(node.id, "op",
                            "plan '" + plan.name + "' uses the test-only op '" + node.op +
                                "', which loads only with --enable-test-ops"));
      if (!n["optional"].get(f)) {
        bool b;
        if (f.get_bool().get(b)) return Fail(w_.Node(node.id, "optional", "must be a bool"));
        node.optional = b;
      }
      if (!n["timeout_ms"].get(f)) {
        int64_t t;
        if (!IsInt(f)) return Fail(w_.Node(node.id, "timeout_ms", "must be an integer"));
        t = f.get_int64();
        if (t < 1 || t > 60000)
          return Fail(
              w_.Node(node.id, "timeout_ms", std::to_string(t) + " is out of bounds 1..60000"));
        node.timeout_ms = static_cast<uint64_t>(t);
      }
      plan.nodes.push_back(std::move(node));
      node_json_.push_back(n);
    }
    // Inputs, now that every id is known.
    for (size_t k = 0; k < plan.nodes.size(); ++k) {
      PlanNode& node = plan.nodes[k];
      element f;
      array inputs;
      bool has_inputs = !node_json_[k]["inputs"].get(f);
      if (has_inputs && f.get_array().get(inputs))
        return Fail(w_.Node(node.id, "inputs", "must be an array of node ids"));
      size_t j = 0;
      std::vector<element> listed;  // a default dom::array must not be iterated
      if (has_inputs)
        for (element in : inputs) listed.push_back(in);
      for (element in : listed) {
        std::string field = "inputs[" + std::to_string(j++) + "]";
        std::string_view s;
        if (in.get_string().get(s))
          return Fail(w_.Node(node.id, field, "must be a node id string"));
        auto it = index_.find(std::string(s));
        if (it == index_.end())
          return Fail(w_.Node(node.id, field, "unknown node '" + std::string(s) + "'"));
        node.inputs.push_back(it->second);
      }
      const OpSchema& op = *node.schema;
      size_t have = node.inputs.size();
      if (have < op.min_inputs || have > op.max_inputs) {
        std::string want =
            op.min_inputs == op.max_inputs ? std::to_string(op.min_inputs)
            : op.max_inputs == UINT32_MAX
                ? "at least " + std::to_string(op.min_inputs)
                : std::to_string(op.min_inputs) + " to " + std::to_string(op.max_inputs);
        return Fail(w_.Node(
            node.id, "inputs",
            "op '" + node.op + "' takes " + want + " input(s), got " + std::to_string(have)));
      }
      node.in_degree = static_cast<uint32_t>(have);
      for (uint32_t in : node.inputs) plan.nodes[in].successors.push_back(static_cast<uint32_t>(k));
    }
    return {};
  }

  Status Output(object obj, Plan& plan) {
    element v;
    object out;
    if (obj["output"].get(v) || v.get_object().get(out))
      return Fail(w_.Err("output: missing or not an object"));
    std::string_view s;
    if (out["node"].get(v) || v.get_string().get(s))
      return Fail(w_.Err("output.node: missing or not a string"));
    auto it = index_.find(std::string(s));
    if (it == index_.end())
      return Fail(w_.Err("output.node: unknown node '" + std::string(s) + "'"));
    plan.output = it->second;
    if (!out["columns"].get(v)) {
      array cols;
      if (v.get_array().get(cols))
        return Fail(w_.Err("output.columns: must be an array of strings"));
      for (element c : cols) {
        if (c.get_string().get(s))
          return Fail(w_.Err("output.columns: must be an array of strings"));
        plan.output_columns.emplace_back(s);
      }
    }
    return {};
  }

  // "log": {"sample", "sink", "columns", "candidates": {"node", "top"}} (PlanLog). After
  // Type: logged columns are checked against the output node's.
  Status Log(object obj, Plan& plan) {
    PlanLog& log = plan.log;
    for (uint32_t i = 0; i < plan.nodes.size(); ++i) {
      const PlanNode& n = plan.nodes[i];
      if (n.op == "viewer" && log.viewer < 0) log.viewer = static_cast<int32_t>(i);
    }
    element v;
    if (obj["log"].get(v)) return {};
    object lj;
    if (v.get_object().get(lj)) return Fail(w_.Err("log: must be an object"));
    for (auto [k, _] : lj)
      if (k != "sample" && k != "sink" && k != "columns" && k != "candidates")
        return Fail(w_.Err("log: unknown field '" + std::string(k) + "'"));
    log.enabled = true;
    element f;
    if (!lj["sample"].get(f)) {
      if (!IsNumber(f)) return Fail(w_.Err("log.sample: must be a number from 0 to 1"));
      log.sample = IsInt(f) ? double(int64_t(f.get_int64())) : double(f.get_double());
      if (!(log.sample >= 0 && log.sample <= 1))
        return Fail(w_.Err("log.sample: " + simdjson::to_string(f) + " is out of bounds 0..1"));
    }
    std::string_view s;
    auto sink_char = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-' || c == '.';
    };
    if (lj["sink"].get(f) || f.get_string().get(s) || s.empty() || s.size() > 64 ||
        !std::all_of(s.begin(), s.end(), sink_char))
      return Fail(w_.Err("log.sink: missing or not a sink name (1 to 64 of A-Z a-z 0-9 _ - .)"));
    log.sink = std::string(s);
    const PlanNode& out = plan.nodes[plan.output];
    if (!lj["columns"].get(f)) {
      array cols;
      if (f.get_array().get(cols) || cols.size() == 0)
        return Fail(w_.Err("log.columns: must be a non-empty array of column names"));
      for (element c : cols) {
        if (c.get_string().get(s))
          return Fail(w_.Err("log.columns: must be a non-empty array of column names"));
        if (!out.out_types.find(s))
          return Fail(w_.Err("log.columns: the output node '" + out.id + "' has no column '" +
                             std::string(s) + "'"));
        if (std::find(log.columns.begin(), log.columns.end(), s) != log.columns.end())
          return Fail(w_.Err("log.columns: '" + std::string(s) + "' is listed twice"));
        log.columns.emplace_back(s);
      }
    } else if (!plan.output_columns.empty()) {
      log.columns = plan.output_columns;
    } else {
      for (const TypedColumn& c : out.out_types.cols) log.columns.push_back(c.name);
    }
    if (!lj["candidates"].get(f)) {
      object cj;
      if (f.get_object().get(cj))
        return Fail(w_.Err("log.candidates: must be an object {\"node\", \"top\"}"));
      for (auto [k, _] : cj)
        if (k != "node" && k != "top")
          return Fail(w_.Err("log.candidates: unknown field '" + std::string(k) + "'"));
      if (cj["node"].get(v) || v.get_string().get(s))
        return Fail(w_.Err("log.candidates.node: missing or not a node id"));
      auto it = index_.find(std::string(s));
      if (it == index_.end())
        return Fail(w_.Err("log.candidates.node: unknown node '" + std::string(s) + "'"));
      log.candidates = static_cast<int32_t>(it->second);
      if (cj["top"].get(v) || !IsInt(v) || int64_t(v.get_int64()) < 1 ||
          int64_t(v.get_int64()) > 10000)
        return Fail(w_.Err("log.candidates.top: missing or not an integer from 1 to 10000"));
      log.candidates_top = static_cast<uint32_t>(int64_t(v.get_int64()));
    }
    for (uint32_t i = 0; i < plan.nodes.size(); ++i)
      if (plan.nodes[i].model.model || static_cast<int32_t>(i) == log.candidates ||
          static_cast<int32_t>(i) == log.viewer)
        log.kept.push_back(i);
    return {};
  }

  // PlanNode::rows_read: a node whose only reader is `take` needs to get only the first
  // `count` rows right (count is a literal, or a request param with a declared max;
  // without one, nothing is marked).
  void MarkRowsRead(Plan& plan) {
    for (uint32_t i = 0; i < plan.nodes.size(); ++i) {
      PlanNode& node = plan.nodes[i];
      if (i == plan.output || node.successors.size() != 1) continue;
      // A logged plan records the candidates node's first rows in order: all of them.
      if (static_cast<int32_t>(i) == plan.log.candidates) continue;
      const PlanNode& reader = plan.nodes[node.successors[0]];
      if (reader.op != "take") continue;
      size_t arg = reader.args.Index("count");
      double most = static_cast<double>(reader.args.I64("count"));
      for (const ParamRef& r : reader.refs) {
        if (r.arg != arg) continue;
        const ParamDecl& d = plan.params.decls[r.decl];
        most = d.max ? *d.max : 0;
        node.rows_read_param = static_cast<int32_t>(r.decl);
      }
      if (most >= 1 && most < 4294967295.0) node.rows_read = static_cast<uint32_t>(most);
    }
  }

  // Cycles (Kahn's algorithm leaves them unvisited), then dead nodes (not reaching the
  // output). Produces topo_: a topological order for typing.
  Status Graph(Plan& plan) {
    size_t n = plan.nodes.size();
    std::vector<uint32_t> indeg(n);
    for (size_t i = 0; i < n; ++i) indeg[i] = plan.nodes[i].in_degree;
    for (size_t i = 0; i < n; ++i)
      if (indeg[i] == 0) topo_.push_back(static_cast<uint32_t>(i));
    for (size_t h = 0; h < topo_.size(); ++h)
      for (uint32_t s : plan.nodes[topo_[h]].successors)
        if (--indeg[s] == 0) topo_.push_back(s);
    if (topo_.size() != n) {
      // Walk inputs among the unvisited nodes until one repeats: that loop is a cycle.
      uint32_t cur = 0;
      while (indeg[cur] == 0) ++cur;
      std::vector<uint32_t> path;
      std::vector<int> seen_at(n, -1);
      while (seen_at[cur] < 0) {
        seen_at[cur] = static_cast<int>(path.size());
        path.push_back(cur);
        for (uint32_t in : plan.nodes[cur].inputs)
          if (indeg[in] != 0) {
            cur = in;
            break;
          }
      }
      std::string cycle;
      for (size_t i = static_cast<size_t>(seen_at[cur]); i < path.size(); ++i)
        cycle = plan.nodes[path[i]].id + (cycle.empty() ? "" : " -> " + cycle);
      cycle = plan.nodes[cur].id + " -> " + cycle;
      return Fail(w_.Node(plan.nodes[cur].id, "inputs", "cycle: " + cycle));
    }
    std::vector<bool> live(n, false);
    std::vector<uint32_t> stack{plan.output};
    live[plan.output] = true;
    while (!stack.empty()) {
      uint32_t i = stack.back();
      stack.pop_back();
      for (uint32_t in : plan.nodes[i].inputs)
        if (!live[in]) live[in] = true, stack.push_back(in);
    }
    for (size_t i = 0; i < n; ++i)
      if (!live[i])
        return Fail(w_.Node(
            plan.nodes[i].id, "",
            "dead node: it does not reach the output node '" + plan.nodes[plan.output].id + "'"));
    for (size_t i = 0; i < n; ++i)
      if (plan.nodes[i].in_degree == 0) plan.sources.push_back(static_cast<uint32_t>(i));
    return {};
  }

  // In topological order: task params, compiled expr/pred, output columns.
  // "quality": {"target_p95_ms", "min", "scale": [{"node", "param"}]} (PlanQuality): each
  // named param must be an integer param of its op; its bounds become the scaled value's.
  Status Quality(object obj, Plan& plan) {
    element v;
    if (obj["quality"].get(v)) return {};
    object qj;
    if (v.get_object().get(qj))
      return Fail(w_.Err("quality: must be an object {\"target_p95_ms\", \"min\", \"scale\"}"));
    for (auto [k, _] : qj)
      if (k != "target_p95_ms" && k != "min" && k != "scale")
        return Fail(w_.Err("quality: unknown field '" + std::string(k) + "'"));
    PlanQuality& q = plan.quality;
    element f;
    if (qj["target_p95_ms"].get(f) || !IsNumber(f))
      return Fail(w_.Err("quality.target_p95_ms: missing or not a number from 1 to 60000"));
    q.target_p95_ms = IsInt(f) ? double(int64_t(f.get_int64())) : double(f.get_double());
    if (!(q.target_p95_ms >= 1 && q.target_p95_ms <= 60000))
      return Fail(w_.Err("quality.target_p95_ms: " + simdjson::to_string(f) +
                         " is out of bounds 1..60000"));
    if (!qj["min"].get(f)) {
      if (!IsNumber(f)) return Fail(w_.Err("quality.min: must be a number from 0.01 to 1"));
      q.min = IsInt(f) ? double(int64_t(f.get_int64())) : double(f.get_double());
      if (!(q.min >= 0.01 && q.min <= 1))
        return Fail(w_.Err("quality.min: " + simdjson::to_string(f) + " is out of bounds 0.01..1"));
    }
    array scale;
    if (qj["scale"].get(f) || f.get_array().get(scale) || scale.size() == 0)
      return Fail(w_.Err("quality.scale: must be a non-empty array of {\"node\", \"param\"}"));
    size_t i = 0;
    for (element e : scale) {
      std::string where = "quality.scale[" + std::to_string(i++) + "]";
      auto one = ScaleEntry(e, plan, where);
      if (!one) return Fail(one.error());
      for (const QualityScale& other : q.scale)
        if (other.node == one->node && other.arg == one->arg)
          return Fail(w_.Err(where + ": node '" + plan.nodes[one->node].id + "' param '" +
                             std::string(plan.nodes[one->node].args.spec(one->arg).name) +
                             "' is listed twice"));
      q.scale.push_back(*one);
    }
    q.enabled = true;
    return {};
  }

  // "served_state": {"family", "max", "ttl_s", "endpoint"} (PlanServedState). After Type:
  // the family must be a zset keyed by the plan's user_id type whose members are of the
  // type of the answer's ids, which the answer must carry.
  Status ServedState(object obj, Plan& plan) {
    element v;
    if (obj["served_state"].get(v)) return {};
    object sj;
    if (v.get_object().get(sj))
      return Fail(w_.Err("served_state: must be an object {\"family\", \"max\", \"ttl_s\"}"));
    for (auto [k, _] : sj)
      if (k != "family" && k != "max" && k != "ttl_s" && k != "endpoint")
        return Fail(w_.Err("served_state: unknown field '" + std::string(k) + "'"));
    PlanServedState& ss = plan.served_state;
    element f;
    std::string_view s;
    if (sj["family"].get(f) || f.get_string().get(s))
      return Fail(w_.Err("served_state.family: missing or not a family name"));
    const KeyFamily* fam = plan.schema->Find(s);
    if (!fam) return Fail(w_.Err("served_state.family: unknown family '" + std::string(s) + "'"));
    const std::string what = "served_state.family: family '" + fam->name + "'";
    if (fam->type != FamilyType::kZset)
      return Fail(w_.Err(what + " is a " + std::string(FamilyTypeName(fam->type)) +
                         "; served state is kept in a zset"));
    if (fam->id_type != plan.user_id_type)
      return Fail(w_.Err(what + " is keyed by " + std::string(ColumnTypeName(fam->id_type)) +
                         " ids but the request's user_id is " +
                         std::string(ColumnTypeName(plan.user_id_type))));
    const PlanNode& out = plan.nodes[plan.output];
    std::optional<ColumnType> id = out.out_types.find("id");
    if (!id) return Fail(w_.Err("served_state: the output node '" + out.id + "' has no id column"));
    if (fam->members_type != *id)
      return Fail(w_.Err(what + " holds " + std::string(ColumnTypeName(fam->members_type)) +
                         " members but the output's ids are " + std::string(ColumnTypeName(*id))));
    const auto& cols = plan.output_columns;
    if (!cols.empty() && std::find(cols.begin(), cols.end(), "id") == cols.end())
      return Fail(w_.Err("served_state: output.columns must list id (later pages read it)"));
    ss.family = fam;
    auto int_in = [&](const char* name, int64_t lo, int64_t hi, int64_t& into) -> Status {
      std::string where = std::string("served_state.") + name;
      if (sj[name].get(f) || !IsInt(f))
        return Fail(w_.Err(where + ": missing or not an integer from " + std::to_string(lo) +
                           " to " + std::to_string(hi)));
      into = int64_t(f.get_int64());
      if (into < lo || into > hi)
        return Fail(w_.Err(where + ": " + std::to_string(into) + " is out of bounds " +
                           std::to_string(lo) + ".." + std::to_string(hi)));
      return {};
    };
    if (auto st = int_in("max", 1, 100000, ss.max); !st) return st;
    if (auto st = int_in("ttl_s", 1, 315360000, ss.ttl_s); !st) return st;
    if (!sj["endpoint"].get(f)) {
      if (f.get_string().get(s) || s.empty())
        return Fail(w_.Err("served_state.endpoint: must be a non-empty endpoint name"));
      ss.endpoint = std::string(s);
    }
    ss.enabled = true;
    return {};
  }

  Result<QualityScale> ScaleEntry(element e, const Plan& plan, const std::string& where) {
    object sj;
    if (e.get_object().get(sj))
      return Fail(w_.Err(where + ": must be an object {\"node\", \"param\"}"));
    for (auto [k, _] : sj)
      if (k != "node" && k != "param")
        return Fail(w_.Err(where + ": unknown field '" + std::string(k) + "'"));
    element f;
    std::string_view node_id, param;
    if (sj["node"].get(f) || f.get_string().get(node_id))
      return Fail(w_.Err(where + ".node: missing or not a node id"));
    auto it = index_.find(std::string(node_id));
    if (it == index_.end())
      return Fail(w_.Err(where + ".node: unknown node '" + std::string(node_id) + "'"));
    const PlanNode& node = plan.nodes[it->second];
    if (sj["param"].get(f) || f.get_string().get(param))
      return Fail(w_.Err(where + ".param: missing or not a param name"));
    QualityScale out;
    out.node = it->second;
    size_t arg = node.args.size();
    for (size_t k = 0; k < node.args.size(); ++k)
      if (node.args.spec(k).name == param) arg = k;
    if (arg == node.args.size())
      return Fail(
          w_.Err(where + ".param: op '" + node.op + "' has no param '" + std::string(param) + "'"));
    const TaskParamSpec& spec = node.args.spec(arg);
    if (spec.kind != ParamKind::kI64)
      return Fail(w_.Err(where + ".param: '" + std::string(param) + "' of op '" + node.op +
                         "' is not an integer param (only those scale)"));
    out.arg = static_cast<uint32_t>(arg);
    out.lo = std::max<int64_t>(1, spec.min.value_or(1));
    out.hi = spec.max.value_or(INT64_MAX);
    for (const ParamRef& r : node.refs)
      if (r.arg == arg) out.ref_decl = static_cast<int32_t>(r.decl);
    return out;
  }

  Status Type(object obj, Plan& plan) {
    element v;
    object exprs, preds;
    bool has_exprs = !obj["expr_table"].get(v), has_preds = false;
    if (has_exprs && v.get_object().get(exprs))
      return Fail(w_.Err("expr_table: must be an object"));
    if (!obj["pred_table"].get(v)) {
      has_preds = true;
      if (v.get_object().get(preds)) return Fail(w_.Err("pred_table: must be an object"));
    }
    for (uint32_t idx : topo_) {
      PlanNode& node = plan.nodes[idx];
      std::vector<ColumnTypes> in_types;
      std::vector<std::string_view> in_ids;
      for (uint32_t in : node.inputs) {
        in_types.push_back(plan.nodes[in].out_types);
        in_ids.push_back(plan.nodes[in].id);
      }
      ColumnTypes none;
      const ColumnTypes& input_cols = in_types.empty() ? none : in_types[0];
      if (auto s = Args(node, idx, plan, input_cols, has_exprs ? &exprs : nullptr,
                        has_preds ? &preds : nullptr);
          !s)
        return s;
      if (auto s = BindModel(node, input_cols, plan); !s) return s;
      if (auto s = BindFamily(node, plan); !s) return s;
      SchemaArgs sa{in_types,    in_ids,      node.args,        node.expr.get(),
                    node.family, node.schema, plan.schema.get()};
      if (node.schema->reads_index) plan.reads_indexes = true;
      auto out = node.schema->output(sa);
      if (!out) return Fail(w_.Node(node.id, "", out.error().message));
      node.out_types = std::move(*out);
    }
    plan.from_values = std::move(from_values_);
    if (auto s = UserIdType(plan); !s) return s;
    if (!plan.output_columns.empty()) {
      const PlanNode& o = plan.nodes[plan.output];
      for (const auto& c : plan.output_columns)
        if (!o.out_types.find(c))
          return Fail(w_.Err("output.columns: node '" + o.id + "' has no column '" + c + "'"));
    }
    return {};
  }

  // A node whose op takes `family` points at that family of the plan's schema.
  Status BindFamily(PlanNode& node, const Plan& plan) {
    const auto& specs = node.schema->params;
    auto it = std::find_if(specs.begin(), specs.end(),
                           [](const TaskParamSpec& p) { return p.name == "family"; });
    if (it == specs.end()) return {};
    const std::string& name = node.args.Str("family");
    node.family = plan.schema->Find(name);
    if (node.family == nullptr) {
      std::string known;
      for (const KeyFamily& f : plan.schema->families)
        known += (known.empty() ? "" : ", ") + f.name;
      return Fail(w_.Node(node.id, "params.family",
                          "unknown family '" + name + "' (" +
                              (plan.schema->builtin ? "the demo schema" : "schema.json") +
                              " declares: " + known + ")"));
    }
    return {};
  }

  // The plan's user_id type: that of the families its viewer and seen_filter nodes read.
  Status UserIdType(Plan& plan) {
    const PlanNode* first = nullptr;
    for (const PlanNode& n : plan.nodes) {
      if (!n.schema->keyed_by_user || n.family == nullptr) continue;
      if (first == nullptr) {
        first = &n;
        plan.user_id_type = n.family->id_type;
      } else if (n.family->id_type != plan.user_id_type) {
        return Fail(w_.Node(
            n.id, "params.family",
            "family '" + n.family->name + "' is keyed by " +
                std::string(ColumnTypeName(n.family->id_type)) + " ids but node '" + first->id +
                "' reads family '" + first->family->name + "' keyed by " +
                std::string(ColumnTypeName(plan.user_id_type)) +
                " ids: both are keyed by the request's user_id, so their id types must agree"));
      }
    }
    return {};
  }

  Status Args(PlanNode& node, uint32_t idx, const Plan& plan, const ColumnTypes& input_cols,
              object* exprs, object* preds) {
    const auto& specs = node.schema->params;
    node.args = TaskArgs(&specs);
    object given;
    element v;
    if (!node_json_[idx]["params"].get(v) && v.get_object().get(given))
      return Fail(w_.Node(node.id, "params", "must be an object"));
    std::vector<bool> set(specs.size(), false);
    if (!node_json_[idx]["params"].get(v)) {
      for (auto [key, val] : given) {
        std::string field = "params." + std::string(key);
        size_t k = 0;
        while (k < specs.size() && specs[k].name != key) ++k;
        if (k == specs.size()) {
          std::string known;
          for (const auto& s : specs) known += (known.empty() ? "" : ", ") + s.name;
          return Fail(w_.Node(node.id, field,
                              "unknown parameter of op '" + node.op +
                                  "' (known: " + (known.empty() ? "none" : known) + ")"));
        }
        set[k] = true;
        if (auto s = Arg(node, k, field, val, plan, input_cols, exprs, preds); !s) return s;
      }
    }
    for (size_t k = 0; k < specs.size(); ++k) {
      if (set[k]) continue;
      if (specs[k].required)
        return Fail(w_.Node(node.id, "params." + specs[k].name,
                            "missing; op '" + node.op + "' requires it"));
      node.args.at(k) = specs[k].default_value;
    }
    return {};
  }

  Status Arg(PlanNode& node, size_t k, const std::string& field, element val, const Plan& plan,
             const ColumnTypes& input_cols, object* exprs, object* preds) {
    const TaskParamSpec& spec = node.schema->params[k];
    if (spec.kind == ParamKind::kColumnMap) return ColumnMapArg(node, k, field, val);
    if (spec.kind == ParamKind::kStrOrMap) {
      std::string_view s;
      if (val.get_string().get(s)) return ColumnMapArg(node, k, field, val);
      node.args.at(k) = std::vector<std::string>{std::string(s)};
      return {};
    }
    if (spec.kind == ParamKind::kNumberMap) return NumberMapArg(node, k, field, val);
    object ref;
    if (!val.get_object().get(ref)) return RefArg(node, k, field, ref, plan);
    auto arg = LiteralArg(node, spec, field, val);
    if (!arg) return Fail(arg.error());
    std::string bad = CheckArg(spec, *arg);
    if (!bad.empty()) return Fail(w_.Node(node.id, field, bad));
    if (spec.kind == ParamKind::kModel) {
      const std::string& name = std::get<std::string>(*arg);
      if (!FindModel(name))
        return Fail(w_.Node(node.id, field,
                            "unknown model '" + name + "' (the plan folder has no " + name +
                                ".model.json nor " + name + ".onnx)"));
    }
    if (spec.kind == ParamKind::kExprId || spec.kind == ParamKind::kPredId) {
      object* table = spec.kind == ParamKind::kExprId ? exprs : preds;
      auto st =
          TableArg(node, spec.kind, field, std::get<std::string>(*arg), table, plan, input_cols);
      if (!st) return st;
    }
    node.args.at(k) = std::move(*arg);
    return {};
  }

  // {"param": "name"}: the param's default, checked as the argument, and a reference
  // that binds each request's value.
  Status RefArg(PlanNode& node, size_t k, const std::string& field, object ref, const Plan& plan) {
    const TaskParamSpec& spec = node.schema->params[k];
    element p;
    std::string_view pname;
    if (ref.size() != 1 || ref["param"].get(p) || p.get_string().get(pname))
      return Fail(w_.Node(node.id, field, "an object value must be {\"param\": \"<name>\"}"));
    if (!spec.allow_ref)
      return Fail(w_.Node(node.id, field, "must be a literal, not a {\"param\"} reference"));
    int d = plan.params.index_of(pname);
    if (d < 0)
      return Fail(w_.Node(node.id, field, "param '" + std::string(pname) + "' is not declared"));
    const ParamDecl& decl = plan.params.decls[static_cast<size_t>(d)];
    if (ParamKindOf(decl.type) != spec.kind)
      return Fail(w_.Node(node.id, field,
                          "param '" + decl.name + "' is " + std::string(ColumnTypeName(decl.type)) +
                              " but the parameter takes " + std::string(ParamKindName(spec.kind))));
    auto def = Coerce(decl.default_value, spec.kind);
    std::string bad = CheckArg(spec, *def);
    if (!bad.empty())
      return Fail(w_.Node(node.id, field, "param '" + decl.name + "' default: " + bad));
    node.args.at(k) = std::move(*def);
    node.refs.push_back({static_cast<uint32_t>(k), static_cast<uint32_t>(d)});
    return {};
  }

  // A literal argument of the parameter's kind (not yet range-checked).
  Result<Value> LiteralArg(const PlanNode& node, const TaskParamSpec& spec,
                           const std::string& field, element val) {
    std::string_view s;
    auto wrong = [&] {
      return Fail(
          w_.Node(node.id, field,
                  "expected " + std::string(ParamKindName(spec.kind)) + ", got " + JsonKind(val)));
    };
    switch (spec.kind) {
      case ParamKind::kI64:
        if (val.type() == element_type::UINT64)
          return Fail(w_.Node(node.id, field, simdjson::to_string(val) + " is out of range"));
        if (!IsInt(val)) return wrong();
        return Value(int64_t(val.get_int64()));
      case ParamKind::kF64:
        if (!IsNumber(val)) return wrong();
        return Value(NumberOf(val));
      case ParamKind::kBool:
        if (val.type() != element_type::BOOL) return wrong();
        return Value(bool(val.get_bool()));
      case ParamKind::kStr:
      case ParamKind::kColumn:
      case ParamKind::kExprId:
      case ParamKind::kPredId:
      case ParamKind::kModel:
        if (val.get_string().get(s)) return wrong();
        return Value(std::string(s));
      case ParamKind::kColumnMap:  // ColumnMapArg
      case ParamKind::kNumberMap:  // NumberMapArg
      case ParamKind::kStrOrMap:   // ColumnMapArg, Arg
        return wrong();
      case ParamKind::kStrList: {
        array a;
        if (val.get_array().get(a)) return wrong();
        std::vector<std::string> list;
        for (element e : a) {
          if (e.get_string().get(s)) return wrong();
          list.emplace_back(s);
        }
        return Value(std::move(list));
      }
    }
    return wrong();
  }

  // An expr or pred id: the entry of expr_table or pred_table it names, compiled against
  // the node's input columns into the node.
  Status TableArg(PlanNode& node, ParamKind kind, const std::string& field, const std::string& id,
                  object* table, const Plan& plan, const ColumnTypes& input_cols) {
    const bool is_expr = kind == ParamKind::kExprId;
    const char* tname = is_expr ? "expr" : "pred";
    element def;
    if (!table || (*table)[id].get(def))
      return Fail(w_.Node(
          node.id, field,
          std::string("unknown ") + tname + " id '" + id + "' (not in " + tname + "_table)"));
    std::string where =
        w_.file + ": node '" + node.id + "': " + field + " (" + tname + " '" + id + "')";
    FromResolver from = FromOf(node, plan);
    if (is_expr) {
      auto c = CompileExpr(def, input_cols, plan.params, where, from);
      if (!c) return Fail(Error::BadRequest(c.error().message));
      node.expr = std::move(*c);
    } else {
      auto c = CompilePred(def, input_cols, plan.params, where, from);
      if (!c) return Fail(Error::BadRequest(c.error().message));
      node.pred = std::move(*c);
    }
    return {};
  }

  // How `node`'s expressions resolve {"from": id, "key": column}: node `id` must be an
  // ancestor of `node` through inputs (so it has finished before `node` starts, and its
  // value is bound by then) and a viewer (the one op whose output is at most one row), and
  // have the column. Each (node, column) gets one slot of Plan::from_values.
  FromResolver FromOf(const PlanNode& node, const Plan& plan) {
    return [this, &node, &plan](std::string_view id, std::string_view column) -> Result<FromSlot> {
      auto it = index_.find(std::string(id));
      if (it == index_.end()) return Fail(Error::BadRequest("unknown node"));
      const uint32_t src = it->second;
      const PlanNode& read = plan.nodes[src];
      if (!Reaches(plan, src, node))
        return Fail(Error::BadRequest("node '" + read.id + "' is not an input of node '" + node.id +
                                      "', directly or through other nodes"));
      if (read.op != "viewer")
        return Fail(Error::BadRequest("node '" + read.id + "' is a '" + read.op +
                                      "' node; {\"from\"} reads a viewer node (one row)"));
      const TypedColumn* type = read.out_types.get(column);
      if (!type)
        return Fail(Error::BadRequest("node '" + read.id + "' has no column '" +
                                      std::string(column) + "' (it has " + read.out_types.names() +
                                      ")"));
      const auto base = static_cast<uint32_t>(plan.params.decls.size());
      for (size_t k = 0; k < from_values_.size(); ++k)
        if (from_values_[k].node == src && from_values_[k].column == column)
          return FromSlot{base + static_cast<uint32_t>(k), type->type, type->dim};
      from_values_.push_back({src, std::string(column)});
      return FromSlot{base + static_cast<uint32_t>(from_values_.size() - 1), type->type, type->dim};
    };
  }

  // Whether node `from` is an input of `to`, directly or through other nodes.
  static bool Reaches(const Plan& plan, uint32_t from, const PlanNode& to) {
    std::vector<uint32_t> stack(to.inputs.begin(), to.inputs.end());
    std::vector<bool> seen(plan.nodes.size(), false);
    while (!stack.empty()) {
      uint32_t i = stack.back();
      stack.pop_back();
      if (i == from) return true;
      if (seen[i]) continue;
      seen[i] = true;
      for (uint32_t in : plan.nodes[i].inputs) stack.push_back(in);
    }
    return false;
  }

  // {"feature": "column" or ["column", ...], ...}, kept as [feature, column, ...] with a
  // list's key repeated for each of its columns (ParamKind::kColumnMap).
  Status ColumnMapArg(PlanNode& node, size_t k, const std::string& field, element val) {
    object map;
    if (val.get_object().get(map))
      return Fail(
          w_.Node(node.id, field, "expected an object of column names, got " + JsonKind(val)));
    std::vector<std::string> pairs, keys;
    for (auto [key, col] : map) {
      std::string where = field + "." + std::string(key);
      if (std::find(keys.begin(), keys.end(), key) != keys.end())
        return Fail(w_.Node(node.id, where, "listed twice"));
      keys.emplace_back(key);
      array list;
      const bool is_list = !col.get_array().get(list);
      std::vector<element> cols;
      if (is_list)
        for (element c : list) cols.push_back(c);
      else
        cols.push_back(col);
      for (element c : cols) {
        std::string_view name;
        if (c.get_string().get(name) || name.empty())
          return Fail(w_.Node(node.id, where,
                              "expected a column name" +
                                  std::string(is_list ? " in the list" : "") + ", got " +
                                  JsonKind(c)));
        pairs.emplace_back(key);
        pairs.emplace_back(name);
      }
    }
    node.args.at(k) = std::move(pairs);
    return {};
  }

  // {"column": number, ...}, kept as [column, number, ...] (ParamKind::kNumberMap).
  Status NumberMapArg(PlanNode& node, size_t k, const std::string& field, element val) {
    object map;
    if (val.get_object().get(map))
      return Fail(w_.Node(node.id, field, "expected an object of numbers, got " + JsonKind(val)));
    std::vector<std::string> pairs;
    for (auto [key, num] : map) {
      std::string where = field + "." + std::string(key);
      for (size_t i = 0; i < pairs.size(); i += 2)
        if (pairs[i] == key) return Fail(w_.Node(node.id, where, "listed twice"));
      if (!IsNumber(num) || !std::isfinite(NumberOf(num)))
        return Fail(w_.Node(node.id, where, "expected a finite number, got " + JsonKind(num)));
      char text[32];
      auto r = std::to_chars(text, text + sizeof text, NumberOf(num));
      pairs.emplace_back(key);
      pairs.emplace_back(text, r.ptr);
    }
    node.args.at(k) = std::move(pairs);
    return {};
  }

  const ModelPtr* FindModel(std::string_view name) const {
    if (!models_) return nullptr;
    auto it = models_->find(std::string(name));
    return it == models_->end() ? nullptr : &it->second;
  }

  // An op with a kModel param reads its model's features from columns of its input:
  // each must be there and numeric (PlanNode::model).
  Status BindModel(PlanNode& node, const ColumnTypes& input_cols, Plan& plan) {
    const auto& specs = node.schema->params;
    auto is_model = [](const TaskParamSpec& p) { return p.kind == ParamKind::kModel; };
    if (std::none_of(specs.begin(), specs.end(), is_model)) return {};
    const std::string& name = node.args.Str("model");
    const ModelPtr& model = *FindModel(name);  // Arg checked it
    const std::vector<std::string>& pairs = node.args.StrList("features");
    const std::vector<std::string>& features = model->features();
    std::string what = "model '" + name + "'";
    if (model->is_network()) {
      if (auto s = BindNetwork(node, input_cols, *model, what); !s) return s;
      return UseModel(node, plan, model);
    }
    for (size_t i = 2; i < pairs.size(); i += 2)
      if (pairs[i] == pairs[i - 2])
        return Fail(w_.Node(node.id, "params.features." + pairs[i],
                            what + " is a tree model: a feature reads one column"));
    for (size_t i = 0; i < pairs.size(); i += 2)
      if (std::find(features.begin(), features.end(), pairs[i]) == features.end())
        return Fail(w_.Node(
            node.id, "params.features." + pairs[i],
            what + " has no feature '" + pairs[i] + "' (it has " + JoinNames(features) + ")"));
    NodeModel bound;
    for (const std::string& f : features) {
      std::string col = f;
      for (size_t i = 0; i < pairs.size(); i += 2)
        if (pairs[i] == f) col = pairs[i + 1];
      std::string reads = what + " feature '" + f + "' reads column '" + col + "'";
      std::optional<ColumnType> t = input_cols.find(col);
      if (!t)
        return Fail(
            w_.Node(node.id, "params.features",
                    reads + ", which the input does not have (it has " + input_cols.names() + ")"));
      if (*t == ColumnType::kStr || *t == ColumnType::kVec)
        return Fail(w_.Node(node.id, "params.features",
                            reads + ", which is " + std::string(ColumnTypeName(*t)) +
                                ": a model feature needs i64, f64 or bool"));
      bound.columns.push_back(std::move(col));
    }
    bound.elements.assign(bound.columns.size(), 0);
    bound.output =
        node.args.Str("output") == "margin" ? ModelOutput::kMargin : ModelOutput::kDefault;
    node.model = std::move(bound);
    if (auto s = BindFill(node, what); !s) return s;
    // About 16 tree walks cost what one row of vm does (docs/engine.md).
    node.row_cost = static_cast<uint32_t>(std::clamp<size_t>(model->num_trees() / 16, 1, 1u << 20));
    return UseModel(node, plan, model);
  }

  static Status UseModel(PlanNode& node, Plan& plan, const ModelPtr& model) {
    node.model.model = model;
    if (std::find(plan.models.begin(), plan.models.end(), model) == plan.models.end())
      plan.models.push_back(model);
    return {};
  }

  // An ONNX model: `features` maps each of its inputs to the columns that fill it, in
  // order (a vec:D column gives D values); an int64 input takes one i64 column.
  Status BindNetwork(PlanNode& node, const ColumnTypes& input_cols, const Model& model,
                     const std::string& what) {
    const std::vector<std::string>& pairs = node.args.StrList("features");
    const auto& inputs = model.network().inputs();
    std::string names;
    for (const NetInput& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
    if (node.args.Str("output") == "margin")
      return Fail(w_.Node(node.id, "params.output",
                          what + " is an ONNX model: it has one output, so output 'margin' "
                                 "does not apply (leave output out, or 'default')"));
    for (size_t i = 0; i < pairs.size(); i += 2)
      if (std::none_of(inputs.begin(), inputs.end(),
                       [&](const NetInput& in) { return in.name == pairs[i]; }))
        return Fail(w_.Node(node.id, "params.features." + pairs[i],
                            what + " has no input '" + pairs[i] + "' (it has " + names + ")"));
    NodeModel bound;
    for (const NetInput& in : inputs) {
      const std::string where = "params.features." + in.name;
      const std::string input = what + " input '" + in.name + "'";
      size_t width = 0, columns = 0;
      std::string parts;
      for (size_t i = 0; i < pairs.size(); i += 2) {
        if (pairs[i] != in.name) continue;
        const std::string& col = pairs[i + 1];
        const TypedColumn* t = input_cols.get(col);
        if (!t)
          return Fail(w_.Node(node.id, where,
                              input + " reads column '" + col +
                                  "', which the input does not have (it has " + input_cols.names() +
                                  ")"));
        const bool ok = in.index ? t->type == ColumnType::kI64 : t->type != ColumnType::kStr;
        if (!ok)
          return Fail(
              w_.Node(node.id, where,
                      input + " reads column '" + col + "', which is " +
                          std::string(ColumnTypeName(t->type)) +
                          (in.index ? ": an int64 input takes one i64 column"
                                    : ": a float input takes i64, f64, bool or vec columns")));
        const uint32_t d = t->type == ColumnType::kVec ? t->dim : 1;
        for (uint32_t e = 0; e < d; ++e) {
          bound.columns.push_back(col);
          bound.elements.push_back(t->type == ColumnType::kVec ? e : 0);
        }
        width += d;
        ++columns;
        parts += (parts.empty() ? "" : ", ") + col + (d > 1 ? ": " + std::to_string(d) : "");
      }
      if (columns == 0)
        return Fail(w_.Node(
            node.id, "params.features",
            input + " has no columns (features must map each of " + names + " to its columns)"));
      if (in.index && columns != 1)
        return Fail(
            w_.Node(node.id, where, input + " is int64 row numbers: it takes one i64 column"));
      if (width != in.width)
        return Fail(w_.Node(node.id, where,
                            input + " is [N, " + std::to_string(in.width) +
                                "] but its columns give " + std::to_string(width) + " values (" +
                                parts + ")"));
    }
    bound.output = ModelOutput::kDefault;
    node.model = std::move(bound);
    if (auto s = BindFill(node, what); !s) return s;
    // About 512 multiply-adds of a dense layer (a few hundred cycles in the kernel) cost
    // what one row of vm does; an estimate of the same kind as the trees' 16 walks
    // (docs/engine.md), so that a small MLP over a page of candidates stays on the loop.
    size_t work = 0;
    for (const NetStep& s : model.network().steps())
      work += s.kind == NetStep::Kind::kDense ? s.w.size() / 512 + 1 : 1;
    node.row_cost = static_cast<uint32_t>(std::clamp<size_t>(work, 1, 1u << 20));
    return {};
  }

  // The `fill` param: the value each listed column's missing cells take; every listed
  // column must be one the model reads.
  Status BindFill(PlanNode& node, const std::string& what) {
    const std::vector<std::string>& fill = node.args.StrList("fill");
    NodeModel& bound = node.model;
    bound.fills.assign(bound.columns.size(), std::numeric_limits<float>::quiet_NaN());
    for (size_t i = 0; i < fill.size(); i += 2) {
      bool read = false;
      const float value = static_cast<float>(std::strtod(fill[i + 1].c_str(), nullptr));
      if (!std::isfinite(value))
        return Fail(w_.Node(node.id, "params.fill." + fill[i], fill[i + 1] + " is beyond float32"));
      for (size_t f = 0; f < bound.columns.size(); ++f)
        if (bound.columns[f] == fill[i]) bound.fills[f] = value, read = true;
      if (!read)
        return Fail(w_.Node(node.id, "params.fill." + fill[i],
                            what + " reads no column '" + fill[i] + "' at this node"));
    }
    return {};
  }

  static std::string JoinNames(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  Where w_;
  const OpCatalog& ops_;
  const ModelSet* models_;
  SchemaPtr schema_;
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<object> node_json_;
  std::vector<uint32_t> topo_;
  std::vector<FromValue> from_values_;  // Plan::from_values, as Type finds them
};

}  // namespace

Result<PlanPtr> LoadPlanText(std::string_view text, std::string_view file, const OpCatalog& ops,
                             const ModelSet* models, SchemaPtr schema) {
  return Loader(file, ops, models, std::move(schema)).Load(text);
}

Result<PlanPtr> LoadPlanFile(const std::string& path, const OpCatalog& ops, const ModelSet* models,
                             SchemaPtr schema) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Error::BadRequest(path + ": cannot read the file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return LoadPlanText(ss.str(), path, ops, models, std::move(schema));
}

namespace {

constexpr std::string_view kPlanSuffix = ".plan.json";
constexpr std::string_view kModelSuffix = ".model.json";
constexpr std::string_view kOnnxSuffix = ".onnx";
constexpr std::string_view kSchemaFile = "schema.json";
constexpr std::string_view kExperimentsFile = "experiments.json";

// The files of `dir` named *<suffix> (with a non-empty stem), sorted: the order they
// load in.
std::vector<std::string> FolderFiles(const std::string& dir, std::string_view suffix,
                                     std::error_code& ec) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() > suffix.size() && name.ends_with(suffix))
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string PlanDirFingerprint(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files = FolderFiles(dir, kPlanSuffix, ec);
  if (ec) return "unlistable: " + ec.message();
  for (std::string_view suffix : {kModelSuffix, kOnnxSuffix}) {
    std::vector<std::string> models = FolderFiles(dir, suffix, ec);
    if (ec) return "unlistable: " + ec.message();
    files.insert(files.end(), models.begin(), models.end());
  }
  files.push_back((std::filesystem::path(dir) / kSchemaFile).string());
  files.push_back((std::filesystem::path(dir) / kExperimentsFile).string());
  std::string out;
  for (const auto& f : files) {
    struct stat st {};
    out += f;
    if (::stat(f.c_str(), &st) != 0) {
      out += " gone\n";
      continue;
    }
    out += ' ' + std::to_string(st.st_size) + ' ' + std::to_string(st.st_mtim.tv_sec) + '.' +
           std::to_string(st.st_mtim.tv_nsec) + ' ' + std::to_string(st.st_ino) + '\n';
  }
  return out;
}

Result<SchemaPtr> LoadSchemaDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string schema_path = (fs::path(dir) / kSchemaFile).string();
  if (!fs::exists(schema_path, ec)) return DemoSchema();
  std::ifstream in(schema_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) return Fail(Error::BadRequest(schema_path + ": cannot read the file"));
  return ParseSchema(ss.str(), schema_path);
}

Result<PlanSet> LoadPlanDir(const std::string& dir, const OpCatalog& ops,
                            const ModelLimits& model_limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files = FolderFiles(dir, kPlanSuffix, ec);
  std::vector<std::string> model_files = FolderFiles(dir, kModelSuffix, ec);
  std::vector<std::string> onnx_files = FolderFiles(dir, kOnnxSuffix, ec);
  model_files.insert(model_files.end(), onnx_files.begin(), onnx_files.end());
  if (ec) return Fail(Error::BadRequest(dir + ": cannot list the plans folder: " + ec.message()));
  PlanSet set;
  // The schema first: plans are typed by it.
  auto schema = LoadSchemaDir(dir);
  if (!schema) return Fail(schema.error());
  set.schema = std::move(*schema);
  // Models next: plans bind to them. Every model of the folder is checked, used or not;
  // first that no two files give one name (NAME.model.json and NAME.onnx).
  std::unordered_map<std::string, std::string> by_name;
  for (const auto& f : model_files) {
    std::string stem = fs::path(f).filename().string();
    stem.resize(stem.size() - (stem.ends_with(kOnnxSuffix) ? kOnnxSuffix : kModelSuffix).size());
    auto [at, added] = by_name.emplace(stem, f);
    if (!added)
      return Fail(Error::BadRequest(at->second + " and " + f + ": two models named '" + stem +
                                    "' (keep one of them in the plans folder)"));
  }
  for (const auto& f : model_files) {
    auto model = LoadModelFile(f, model_limits);
    if (!model) return Fail(model.error());
    set.models.emplace((*model)->name(), std::move(*model));
  }
  for (const auto& f : files) {
    auto plan = LoadPlanFile(f, ops, &set.models, set.schema);
    if (!plan) return Fail(plan.error());
    std::string stem = fs::path(f).filename().string();
    stem.resize(stem.size() - kPlanSuffix.size());
    if ((*plan)->name != stem)
      return Fail(Error::BadRequest(f + ": name: plan '" + (*plan)->name +
                                    "' must be in a file named " + (*plan)->name + ".plan.json"));
    set.plans.emplace((*plan)->name, std::move(*plan));
  }
  // Experiments last: they name plans.
  const std::string experiments_path = (fs::path(dir) / kExperimentsFile).string();
  set.experiments = NoExperiments();
  if (fs::exists(experiments_path, ec)) {
    std::ifstream in(experiments_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in && !in.eof())
      return Fail(Error::BadRequest(experiments_path + ": cannot read the file"));
    auto experiments = ParseExperiments(ss.str(), experiments_path, set.plans);
    if (!experiments) return Fail(experiments.error());
    set.experiments = std::move(*experiments);
  }
  return set;
}

}  // namespace rankd
