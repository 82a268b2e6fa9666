// Expressions and predicates of a plan (expr_table, pred_table: docs/plan.md), type-checked and
// compiled once at plan load into programs that evaluate a whole column at a time: no
// per-row tree walk, allocation or virtual call.
//
// Threads: compiled programs are immutable; Evaluate/Select may run on any thread,
// concurrently.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/row_set.h"
#include "plan/params.h"

// Only declared here: simdjson.h is a very large header, and every file that sees a
// plan would otherwise compile it. The files that parse JSON include it themselves.
namespace simdjson::dom {
class element;
}  // namespace simdjson::dom

namespace rankd {

// A column as typed at load: its name, type and, for a vector, its dimension.
struct TypedColumn {
  std::string name;
  ColumnType type = ColumnType::kI64;
  uint32_t dim = 0;  // kVec: 1..kMaxVecDim; 0 otherwise
  friend bool operator==(const TypedColumn&, const TypedColumn&) = default;
};
// "f64", or "vec:64" for a vector: for messages.
std::string TypeText(ColumnType type, uint32_t dim);

// The columns visible at a node (its input's schema), for load-time typing.
struct ColumnTypes {
  std::vector<TypedColumn> cols;
  std::optional<ColumnType> find(std::string_view name) const {
    const TypedColumn* c = get(name);
    return c ? std::optional<ColumnType>(c->type) : std::nullopt;
  }
  // The column `name` with its dimension, or nullptr.
  const TypedColumn* get(std::string_view name) const {
    for (const TypedColumn& c : cols)
      if (c.name == name) return &c;
    return nullptr;
  }
  // "id, score, author" (or "no columns"): for messages.
  std::string names() const {
    std::string out;
    for (const TypedColumn& c : cols) out += (out.empty() ? "" : ", ") + c.name;
    return out.empty() ? "no columns" : out;
  }
};

// Polled by a long evaluation at least every ~0.3 ms of work (expr_eval.cc
// kCheckWork); true means nobody needs the result any more and the evaluation stops.
// An empty check is never polled. The plan layer knows no tokens or threads: the task
// passes what to ask (TaskContext::cancelled).
using CancelCheck = std::function<bool()>;

class CompiledExpr {
 public:
  virtual ~CompiledExpr() = default;
  // The result type, fixed at load: a column's type never depends on the request.
  virtual ColumnType type() const = 0;
  // Evaluates every logical row of `in`, block by block, polling `cancelled` in between;
  // nullopt once it said true. The result has in.physical_rows() rows; rows outside the
  // selection are null.
  virtual std::optional<Column> Evaluate(const RowSet& in, const ParamValues& params,
                                         const CancelCheck& cancelled = {}) const = 0;
};

class CompiledPred {
 public:
  virtual ~CompiledPred() = default;
  // The physical indices of the logical rows of `in` where the predicate is true, in
  // logical order (ready to be the selection vector of the filtered row set). Polls
  // `cancelled` like Evaluate; nullopt once it said true.
  virtual std::optional<Selection> Select(const RowSet& in, const ParamValues& params,
                                          const CancelCheck& cancelled = {}) const = 0;
};

// Where a {"from": "<node_id>", "key": "<column>"} leaf reads its value: index `value` of
// the run's ParamValues (after the declared params, see plan/params.h), of type `type`.
struct FromSlot {
  uint32_t value = 0;
  ColumnType type = ColumnType::kI64;
  uint32_t dim = 0;  // kVec: the column's dimension
};
// How the plan loader resolves a `from` leaf of the node being compiled: the slot, or an
// error whose message says what is wrong with the reference (the compiler adds where).
// The plan layer decides which nodes may be read (plan/loader.cc); the compiler only
// emits a load of that slot, a scalar bound once per run like a request parameter.
using FromResolver =
    std::function<Result<FromSlot>(std::string_view node_id, std::string_view column)>;

// Compiles the expression `json` (an expr_table entry) for a node whose input has the
// columns `cols`. `where` locates it for messages, e.g.
// "plans/feed.plan.json: node 's': param 'expr' (expr 'e0')"; errors name it and the
// offending part (unknown op, arity, undeclared param, arithmetic on strings, ...).
// Without `from`, a {"from"} leaf is a load error.
Result<std::shared_ptr<const CompiledExpr>> CompileExpr(const simdjson::dom::element& json,
                                                        const ColumnTypes& cols,
                                                        const ParamDecls& params,
                                                        std::string_view where,
                                                        const FromResolver& from = {});

// Same for a predicate (a pred_table entry). Regex patterns are compiled here (RE2),
// never per row; a bad pattern is a load error.
Result<std::shared_ptr<const CompiledPred>> CompilePred(const simdjson::dom::element& json,
                                                        const ColumnTypes& cols,
                                                        const ParamDecls& params,
                                                        std::string_view where,
                                                        const FromResolver& from = {});

}  // namespace rankd
