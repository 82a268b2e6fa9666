// Parser and type checker of expr_table / pred_table entries (docs/plan.md), emitting the
// register program of expr_program.h. Runs at plan load only; per-row work is elsewhere.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>

#include "plan/expr_program.h"

namespace rankd::expr {

namespace dom = simdjson::dom;

std::string_view VTypeName(VType t) {
  switch (t) {
    case VType::kNull: return "null";
    case VType::kI64: return "i64";
    case VType::kF64: return "f64";
    case VType::kStr: return "str";
    case VType::kBool: return "bool";
    case VType::kMask: return "predicate";
    case VType::kVec: return "vec";
  }
  return "?";
}

namespace {

enum class ExprOp { kArith, kDiv, kMinMax, kUnary, kMath, kPow, kCoalesce, kIf, kVector };

struct OpInfo {
  std::string_view name;
  ExprOp kind;
  Op op;
  size_t min_args, max_args;
};

constexpr size_t kMany = std::numeric_limits<size_t>::max();

constexpr OpInfo kExprOps[] = {
    {"+", ExprOp::kArith, Op::kAdd, 2, kMany},
    {"-", ExprOp::kArith, Op::kSub, 2, kMany},
    {"*", ExprOp::kArith, Op::kMul, 2, kMany},
    {"/", ExprOp::kDiv, Op::kDiv, 2, kMany},
    {"min", ExprOp::kMinMax, Op::kMin, 1, kMany},
    {"max", ExprOp::kMinMax, Op::kMax, 1, kMany},
    {"neg", ExprOp::kUnary, Op::kNeg, 1, 1},
    {"abs", ExprOp::kUnary, Op::kAbs, 1, 1},
    {"log", ExprOp::kMath, Op::kLog, 1, 1},
    {"log1p", ExprOp::kMath, Op::kLog1p, 1, 1},
    {"exp", ExprOp::kMath, Op::kExp, 1, 1},
    {"sqrt", ExprOp::kMath, Op::kSqrt, 1, 1},
    {"pow", ExprOp::kPow, Op::kPow, 2, 2},
    {"coalesce", ExprOp::kCoalesce, Op::kCoalesce, 1, kMany},
    {"if", ExprOp::kIf, Op::kIf, 3, 3},
    {"dot", ExprOp::kVector, Op::kDot, 2, 2},
    {"cosine", ExprOp::kVector, Op::kCosine, 2, 2},
    {"l2", ExprOp::kVector, Op::kL2, 2, 2},
};

bool IsNumeric(VType t) { return t == VType::kI64 || t == VType::kF64 || t == VType::kBool; }

VType FromColumnType(ColumnType t) {
  switch (t) {
    case ColumnType::kI64: return VType::kI64;
    case ColumnType::kF64: return VType::kF64;
    case ColumnType::kStr: return VType::kStr;
    case ColumnType::kBool: return VType::kBool;
    case ColumnType::kVec: return VType::kVec;
  }
  return VType::kNull;
}

// What an argument of a vector function is, for messages: "column 'emb'", "from 'v' key
// 'emb'", or "an expression".
std::string Describe(dom::element e) {
  dom::object obj;
  std::string_view node, key;
  if (e.get_object().get(obj)) return "an expression";
  const bool has_key = !obj.at_key("key").get_string().get(key);
  if (!obj.at_key("from").get_string().get(node) && has_key)
    return "from '" + std::string(node) + "' key '" + std::string(key) + "'";
  if (has_key) return "column '" + std::string(key) + "'";
  return "an expression";
}

std::string Sub(const std::string& path, std::string_view part) {
  return path.empty() ? std::string(part) : path + "." + std::string(part);
}

std::string Index(std::string_view field, size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

// A JSON scalar as a Value; nullopt for arrays and objects.
std::optional<Value> ScalarValue(dom::element e) {
  switch (e.type()) {
    case dom::element_type::INT64: return Value(int64_t(e.get_int64().value_unsafe()));
    case dom::element_type::UINT64:  // above INT64_MAX: only f64 can hold it
      return Value(double(e.get_uint64().value_unsafe()));
    case dom::element_type::DOUBLE: return Value(e.get_double().value_unsafe());
    case dom::element_type::STRING: return Value(std::string(e.get_string().value_unsafe()));
    case dom::element_type::BOOL: return Value(e.get_bool().value_unsafe());
    case dom::element_type::NULL_VALUE: return Value(std::monostate{});
    default: return std::nullopt;
  }
}

VType ValueType(const Value& v) {
  switch (v.index()) {
    case 1: return VType::kI64;
    case 2: return VType::kF64;
    case 3: return VType::kStr;
    case 4: return VType::kBool;
    default: return VType::kNull;
  }
}

CmpOp Flip(CmpOp op) {
  switch (op) {
    case CmpOp::kLt: return CmpOp::kGt;
    case CmpOp::kLe: return CmpOp::kGe;
    case CmpOp::kGt: return CmpOp::kLt;
    case CmpOp::kGe: return CmpOp::kLe;
    default: return op;
  }
}

// Gives each register a frame slot, reusing the slot of a register after its last
// reader (linear scan over the straight-line code). An instruction's output never shares
// a slot with its operands (the kernels are not written for aliasing), and an output
// that borrows its operand's validity buffer (BorrowsValidity) keeps the operand's slot
// taken as long as the output is read. The result's slot is never reused. Runs after
// MarkUnchecked, which decides which unary ops borrow.
void AssignSlots(Program& p) {
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<size_t> last(p.regs.size(), 0);
  for (size_t k = 0; k < p.code.size(); ++k) ForEachOperand(p.code[k], [&](Reg r) { last[r] = k; });
  last[p.result] = kNever;
  for (size_t k = p.code.size(); k-- > 0;) {
    const Instr& in = p.code[k];
    if (BorrowsValidity(in)) last[in.a] = std::max(last[in.a], last[in.out]);
  }
  // The registers whose slot frees up after each instruction.
  std::vector<std::vector<Reg>> dies_after(p.code.size());
  for (size_t k = 0; k < p.code.size(); ++k) {
    Reg out = p.code[k].out;
    if (last[out] != kNever) dies_after[last[out]].push_back(out);
  }
  p.slot_of.assign(p.regs.size(), 0);
  p.num_slots = 0;
  std::vector<uint32_t> free;
  for (size_t k = 0; k < p.code.size(); ++k) {
    Reg out = p.code[k].out;
    if (free.empty()) {
      p.slot_of[out] = p.num_slots++;
    } else {
      p.slot_of[out] = free.back();
      free.pop_back();
    }
    for (Reg r : dies_after[k]) free.push_back(p.slot_of[r]);
  }
  if (p.num_slots == 0) p.num_slots = 1;  // the result slot of an empty program
}

// Sets Instr::unchecked on the f64 arithmetic whose every reader is an f64 + - * neg or
// abs: those turn a non-finite operand (inf, NaN) into a non-finite result whatever the
// other operand, so a non-finite value left valid is nulled by the first checked reader
// downstream, and the result register is always checked. Any other reader (min, max, /,
// pow, coalesce, if, cmp, ...) can turn a non-finite operand into a finite or non-null
// result, so its operands stay checked.
void MarkUnchecked(Program& p) {
  std::vector<uint8_t> read(p.regs.size(), 0), only_propagating(p.regs.size(), 1);
  for (const Instr& in : p.code) {
    const bool propagates = p.regs[in.out].type == VType::kF64 &&
                            (in.op == Op::kAdd || in.op == Op::kSub || in.op == Op::kMul ||
                             in.op == Op::kNeg || in.op == Op::kAbs);
    ForEachOperand(in, [&](Reg r) {
      read[r] = 1;
      if (!propagates) only_propagating[r] = 0;
    });
  }
  only_propagating[p.result] = 0;
  for (Instr& in : p.code) {
    const bool checks_finite =
        p.regs[in.out].type == VType::kF64 &&
        (in.op == Op::kAdd || in.op == Op::kSub || in.op == Op::kMul || in.op == Op::kDiv ||
         in.op == Op::kMin || in.op == Op::kMax || in.op == Op::kPow || in.op == Op::kNeg ||
         in.op == Op::kAbs || in.op == Op::kLog || in.op == Op::kLog1p || in.op == Op::kExp ||
         in.op == Op::kSqrt);
    in.unchecked = checks_finite && read[in.out] && only_propagating[in.out];
  }
}

class Compiler {
 public:
  Compiler(const ColumnTypes& cols, const ParamDecls& params, std::string_view where,
           const FromResolver& from)
      : cols_(cols), params_(params), where_(where), from_(from) {
    for (const auto& d : params.decls) p_.param_types.push_back(FromColumnType(d.type));
  }

  Result<Reg> Expr(dom::element e, const std::string& path);
  Result<Reg> Pred(dom::element e, const std::string& path);
  Result<Program> Finish(Reg result, bool is_pred);

 private:
  Error Err(const std::string& path, std::string msg) const {
    std::string m(where_);
    m += ": ";
    if (!path.empty()) m += path + ": ";
    return Error::BadRequest(m + msg);
  }
  VType Type(Reg r) const { return p_.regs[r].type; }
  bool Scalar(Reg r) const { return p_.regs[r].scalar; }
  Reg Emit(Op op, VType t, bool scalar, Reg a = 0, Reg b = 0, Reg c = 0, uint32_t aux = 0,
           uint32_t dim = 0) {
    auto out = static_cast<Reg>(p_.regs.size());  // < 4 * kMaxExprNodes + a few
    p_.regs.push_back({t, scalar, dim});
    p_.code.push_back({op, out, a, b, c, aux});
    return out;
  }
  Reg Null(VType t) { return Emit(Op::kLoadNull, t, true); }
  Reg Mask(bool v) { return Emit(Op::kConstMask, VType::kMask, true, 0, 0, 0, v ? 1 : 0); }
  // Converts register r to type t (i64/bool -> f64; bool -> i64 shares storage).
  Reg Cast(Reg r, VType t) {
    if (Type(r) == t || t != VType::kF64) return r;
    auto it = casts_.find(r);
    if (it != casts_.end()) return it->second;
    Reg out = Emit(Op::kCastF64, VType::kF64, Scalar(r), r);
    casts_.emplace(r, out);
    return out;
  }
  // ((r0 op r1) op r2) ..., each operand cast to t; r0 alone when there is one.
  Reg Fold(Op op, VType t, const std::vector<Reg>& regs) {
    Reg acc = Cast(regs[0], t);
    for (size_t k = 1; k < regs.size(); ++k) {
      Reg rhs = Cast(regs[k], t);
      acc = Emit(op, t, Scalar(acc) && Scalar(rhs), acc, rhs);
    }
    return acc;
  }
  Result<Reg> Leaf(dom::object obj, const std::string& path);
  Result<Reg> From(dom::object obj, dom::element node, const std::string& path);
  Result<Reg> Operation(dom::object obj, std::string_view op, const std::string& path);
  // An op's compiled args: Arithmetic and Choice type and emit them.
  struct OpCall {
    const OpInfo& info;
    std::string name;  // "op 'x'", for messages
    const std::string& path;
    std::vector<Reg> regs;          // the args, but an if's condition
    std::optional<Reg> cond;        // an if's condition
    std::vector<std::string> what;  // the args, described (Describe): vector functions only
  };
  Result<Reg> Arithmetic(const OpCall& c);  // + - * / neg abs, math functions, pow
  Result<Reg> Choice(const OpCall& c);      // min max, coalesce, if
  Result<Reg> Vector(const OpCall& c);      // dot, cosine, l2
  // An error when register r (at `part` of `path`) is a vector, which only the vector
  // functions take.
  std::optional<Error> NoVector(Reg r, const std::string& path, std::string_view what,
                                std::string_view part) const {
    if (Type(r) != VType::kVec) return std::nullopt;
    return Err(path, std::string(what) + " cannot take a vector (" + std::string(part) +
                         " is vec:" + std::to_string(p_.regs[r].dim) +
                         "); vectors go into dot, cosine and l2 only");
  }
  Result<Reg> Compare(dom::object obj, const std::string& path);
  Result<Reg> In(dom::object obj, const std::string& path);

  const ColumnTypes& cols_;
  const ParamDecls& params_;
  std::string_view where_;
  const FromResolver& from_;
  Program p_;
  std::map<std::string, Reg, std::less<>> column_regs_;
  std::unordered_map<Reg, Reg> casts_;
  size_t nodes_ = 0, depth_ = 0;

  friend class NodeScope;
};

// Counts one expression or predicate node while it is being compiled (depth_ is the
// length of the current chain): the limits of expr_program.h.
class NodeScope {
 public:
  explicit NodeScope(Compiler& c) : c_(c) { ++c_.nodes_, ++c_.depth_; }
  ~NodeScope() { --c_.depth_; }
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;
  // The error to return when a limit is exceeded, else nullopt.
  std::optional<Error> Check(const std::string& path) const {
    if (c_.nodes_ > kMaxExprNodes)
      return c_.Err(path, "the expression has more than " + std::to_string(kMaxExprNodes) +
                              " nodes (the limit)");
    if (c_.depth_ > kMaxExprDepth)
      return c_.Err(path, "the expression nests deeper than " + std::to_string(kMaxExprDepth) +
                              " levels (the limit)");
    return std::nullopt;
  }

 private:
  Compiler& c_;
};

Result<Reg> Compiler::Expr(dom::element e, const std::string& path) {
  NodeScope node(*this);
  if (auto err = node.Check(path)) return Fail(std::move(*err));
  dom::object obj;
  if (e.get_object().get(obj))
    return Fail(
        Err(path,
            "expected an expression object ({\"const\"|\"key\"|\"param\"|\"from\"|\"op\": ...})"));
  dom::element op;
  if (!obj.at_key("op").get(op)) {
    std::string_view name;
    if (op.get_string().get(name)) return Fail(Err(path, "\"op\" must be a string"));
    return Operation(obj, name, path);
  }
  return Leaf(obj, path);
}

Result<Reg> Compiler::Leaf(dom::object obj, const std::string& path) {
  dom::element v;
  // Before "key": a `from` leaf has one too.
  if (!obj.at_key("from").get(v)) return From(obj, v, path);
  if (!obj.at_key("const").get(v)) {
    std::optional<Value> val = ScalarValue(v);
    if (!val) return Fail(Err(path, "const must be a number, string, bool or null"));
    VType t = ValueType(*val);
    if (t == VType::kNull) return Null(VType::kNull);
    p_.consts.push_back(std::move(*val));
    return Emit(Op::kLoadConst, t, true, 0, 0, 0, static_cast<uint32_t>(p_.consts.size() - 1));
  }
  if (!obj.at_key("key").get(v)) {
    std::string_view name;
    if (v.get_string().get(name)) return Fail(Err(path, "key must be a string"));
    auto known = column_regs_.find(name);
    if (known != column_regs_.end()) return known->second;
    std::optional<ColumnType> ct = cols_.find(name);
    // A column the input lacks reads as null (of no type yet), folded away by the ops above.
    if (!ct) return Null(VType::kNull);
    VType t = FromColumnType(*ct);
    const uint32_t dim = cols_.get(name)->dim;
    p_.columns.push_back({std::string(name), t, dim});
    Reg r =
        Emit(Op::kLoadColumn, t, false, 0, 0, 0, static_cast<uint32_t>(p_.columns.size() - 1), dim);
    column_regs_.emplace(std::string(name), r);
    return r;
  }
  if (!obj.at_key("param").get(v)) {
    std::string_view name;
    if (v.get_string().get(name)) return Fail(Err(path, "param must be a string"));
    int idx = params_.index_of(name);
    if (idx < 0) return Fail(Err(path, "undeclared param '" + std::string(name) + "'"));
    return Emit(Op::kLoadParam, p_.param_types[size_t(idx)], true, 0, 0, 0, uint32_t(idx));
  }
  return Fail(Err(path, "expected one of \"const\", \"key\", \"param\", \"from\", \"op\""));
}

// {"from": node, "key": column}: a scalar bound once per run, as a param is (FromResolver).
Result<Reg> Compiler::From(dom::object obj, dom::element node, const std::string& path) {
  std::string_view node_id, column;
  if (node.get_string().get(node_id)) return Fail(Err(path, "from must be a node id string"));
  dom::element k;
  if (obj.at_key("key").get(k) || k.get_string().get(column))
    return Fail(Err(path, "from '" + std::string(node_id) + "' needs a \"key\": a column name"));
  std::string what = "from '" + std::string(node_id) + "' key '" + std::string(column) + "'";
  if (!from_) return Fail(Err(path, what + ": {\"from\"} reads another node, only in a plan"));
  Result<FromSlot> slot = from_(node_id, column);
  if (!slot) return Fail(Err(path, what + ": " + slot.error().message));
  return Emit(Op::kLoadParam, FromColumnType(slot->type), true, 0, 0, 0, slot->value, slot->dim);
}

Result<Reg> Compiler::Operation(dom::object obj, std::string_view name, const std::string& path) {
  const OpInfo* info = nullptr;
  for (const auto& o : kExprOps)
    if (o.name == name) info = &o;
  if (!info) return Fail(Err(path, "unknown op '" + std::string(name) + "'"));
  OpCall call{*info, "op '" + std::string(name) + "'", path, {}, {}};
  dom::array args;
  if (obj.at_key("args").get_array().get(args))
    return Fail(Err(path, call.name + " needs an \"args\" array"));
  size_t n = args.size();
  if (n < info->min_args || n > info->max_args) {
    std::string want = info->min_args == info->max_args
                           ? std::to_string(info->min_args)
                           : "at least " + std::to_string(info->min_args);
    return Fail(Err(path, call.name + " takes " + want + " args, got " + std::to_string(n)));
  }
  size_t i = 0;
  for (dom::element a : args) {
    std::string sub = Sub(path, Index("args", i));
    const bool is_cond = info->kind == ExprOp::kIf && i == 0;
    Result<Reg> r = is_cond ? Pred(a, sub) : Expr(a, sub);
    if (!r) return r;
    if (info->kind == ExprOp::kVector) call.what.push_back(Describe(a));
    if (is_cond)
      call.cond = *r;
    else
      call.regs.push_back(*r);
    ++i;
  }
  switch (info->kind) {
    case ExprOp::kArith:
    case ExprOp::kDiv:
    case ExprOp::kUnary:
    case ExprOp::kMath:
    case ExprOp::kPow: return Arithmetic(call);
    case ExprOp::kMinMax:
    case ExprOp::kCoalesce:
    case ExprOp::kIf: return Choice(call);
    case ExprOp::kVector: return Vector(call);
  }
  return Fail(Err(path, "internal: unhandled " + call.name));
}

// Both args vectors of one dimension, typed at load: a column the input lacks, a
// number or another dimension is a load error naming the two args, never a null at run time.
Result<Reg> Compiler::Vector(const OpCall& c) {
  for (size_t k = 0; k < 2; ++k) {
    const VType t = Type(c.regs[k]);
    if (t == VType::kVec) continue;
    const std::string is = t == VType::kNull ? "null (a column the input lacks, or a null)"
                                             : std::string(VTypeName(t));
    return Fail(Err(c.path, c.name + " needs two vectors but " + Index("args", k) + " (" +
                                c.what[k] + ") is " + is));
  }
  const uint32_t da = p_.regs[c.regs[0]].dim, db = p_.regs[c.regs[1]].dim;
  if (da != db)
    return Fail(Err(c.path, c.name + " needs vectors of one dimension but args[0] (" + c.what[0] +
                                ") is vec:" + std::to_string(da) + " and args[1] (" + c.what[1] +
                                ") is vec:" + std::to_string(db)));
  return Emit(c.info.op, VType::kF64, Scalar(c.regs[0]) && Scalar(c.regs[1]), c.regs[0], c.regs[1]);
}

Result<Reg> Compiler::Arithmetic(const OpCall& c) {
  const std::vector<Reg>& regs = c.regs;
  bool any_null = false, any_f64 = false;
  for (size_t k = 0; k < regs.size(); ++k) {
    VType t = Type(regs[k]);
    if (!IsNumeric(t) && t != VType::kNull)
      return Fail(Err(c.path, c.name + " needs numbers but " + Index("args", k) + " is " +
                                  std::string(VTypeName(t))));
    any_null |= t == VType::kNull;
    any_f64 |= t == VType::kF64;
  }
  const ExprOp kind = c.info.kind;
  VType t =
      (kind == ExprOp::kArith || kind == ExprOp::kUnary) && !any_f64 ? VType::kI64 : VType::kF64;
  if (any_null) return Null(t);
  if (regs.size() == 1) {
    Reg a = Cast(regs[0], t);
    return Emit(c.info.op, t, Scalar(a), a);
  }
  return Fold(c.info.op, t, regs);
}

Result<Reg> Compiler::Choice(const OpCall& c) {
  const std::vector<Reg>& regs = c.regs;
  // Which arg index a reg came from, for messages ("if" shifts by one).
  const size_t first = c.cond ? 1 : 0;
  bool any_null = false, any_f64 = false, any_str = false, all_bool = true, any_value = false;
  bool all_scalar = !c.cond || Scalar(*c.cond);
  for (size_t k = 0; k < regs.size(); ++k)
    if (auto err = NoVector(regs[k], c.path, c.name, Index("args", k + first)))
      return Fail(std::move(*err));
  for (Reg r : regs) {
    VType t = Type(r);
    any_null |= t == VType::kNull;
    any_f64 |= t == VType::kF64;
    any_str |= t == VType::kStr;
    if (t != VType::kNull) {
      any_value = true;
      all_bool &= t == VType::kBool;
    }
    all_scalar &= Scalar(r);
  }
  if (any_str) {
    for (size_t k = 0; k < regs.size(); ++k) {
      VType t = Type(regs[k]);
      if (t != VType::kStr && t != VType::kNull)
        return Fail(Err(c.path, c.name + " cannot mix str and " + std::string(VTypeName(t)) + " (" +
                                    Index("args", k + first) + ")"));
    }
  }
  VType t = !any_value ? VType::kNull
            : any_str  ? VType::kStr
            : all_bool ? VType::kBool
            : any_f64  ? VType::kF64
                       : VType::kI64;
  if (c.info.kind == ExprOp::kMinMax) {
    if (any_null) return Null(t);
    return Fold(c.info.op, t, regs);
  }
  if (t == VType::kNull) return Null(VType::kNull);
  if (c.info.kind == ExprOp::kCoalesce) {
    std::optional<Reg> acc;
    for (Reg r : regs) {
      if (Type(r) == VType::kNull) continue;  // never the first non-null
      Reg rhs = Cast(r, t);
      acc = acc ? Emit(Op::kCoalesce, t, Scalar(*acc) && Scalar(rhs), *acc, rhs) : rhs;
    }
    return *acc;
  }
  Reg then_r = Type(regs[0]) == VType::kNull ? Null(t) : Cast(regs[0], t);
  Reg else_r = Type(regs[1]) == VType::kNull ? Null(t) : Cast(regs[1], t);
  return Emit(Op::kIf, t, all_scalar, *c.cond, then_r, else_r);
}

Result<Reg> Compiler::Pred(dom::element e, const std::string& path) {
  NodeScope node(*this);
  if (auto err = node.Check(path)) return Fail(std::move(*err));
  dom::object obj;
  std::string_view op;
  if (e.get_object().get(obj) || obj.at_key("op").get_string().get(op))
    return Fail(Err(path, "expected a predicate object with a string \"op\""));

  if (op == "cmp") return Compare(obj, path);
  if (op == "in") return In(obj, path);
  if (op == "and" || op == "or") {
    dom::array args;
    if (obj.at_key("args").get_array().get(args) || args.size() == 0)
      return Fail(Err(path, "op '" + std::string(op) + "' needs a non-empty \"args\" array"));
    std::optional<Reg> acc;
    size_t i = 0;
    for (dom::element a : args) {
      Result<Reg> r = Pred(a, Sub(path, Index("args", i++)));
      if (!r) return r;
      acc = acc ? Emit(op == "and" ? Op::kAnd : Op::kOr, VType::kMask, Scalar(*acc) && Scalar(*r),
                       *acc, *r)
                : *r;
    }
    return *acc;
  }
  dom::element arg;
  if (op == "not" || op == "is_null") {
    if (obj.at_key("arg").get(arg))
      return Fail(Err(path, "op '" + std::string(op) + "' needs an \"arg\""));
    if (op == "not") {
      Result<Reg> r = Pred(arg, Sub(path, "arg"));
      if (!r) return r;
      return Emit(Op::kNot, VType::kMask, Scalar(*r), *r);
    }
    Result<Reg> r = Expr(arg, Sub(path, "arg"));
    if (!r) return r;
    if (Type(*r) == VType::kNull) return Mask(true);
    return Emit(Op::kIsNull, VType::kMask, Scalar(*r), *r);
  }
  if (op == "regex") {
    std::string_view pattern;
    if (obj.at_key("pattern").get_string().get(pattern))
      return Fail(Err(path, "op 'regex' needs a string \"pattern\""));
    if (obj.at_key("lhs").get(arg)) return Fail(Err(path, "op 'regex' needs an \"lhs\""));
    RE2::Options options;
    options.set_log_errors(false);
    auto re = std::make_unique<RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
    if (!re->ok())
      return Fail(Err(path, "bad regex pattern '" + std::string(pattern) + "': " + re->error()));
    Result<Reg> r = Expr(arg, Sub(path, "lhs"));
    if (!r) return r;
    VType t = Type(*r);
    if (t == VType::kNull) return Mask(false);
    if (t != VType::kStr)
      return Fail(Err(path, "op 'regex' needs a str lhs, got " + std::string(VTypeName(t))));
    p_.regexes.push_back(std::move(re));
    return Emit(Op::kRegex, VType::kMask, Scalar(*r), *r, 0, 0,
                static_cast<uint32_t>(p_.regexes.size() - 1));
  }
  return Fail(Err(path, "unknown predicate op '" + std::string(op) + "'"));
}

Result<Reg> Compiler::Compare(dom::object obj, const std::string& path) {
  std::string_view cmp;
  if (obj.at_key("cmp").get_string().get(cmp))
    return Fail(Err(path, "op 'cmp' needs a string \"cmp\""));
  CmpOp c;
  if (cmp == "==")
    c = CmpOp::kEq;
  else if (cmp == "!=")
    c = CmpOp::kNe;
  else if (cmp == "<")
    c = CmpOp::kLt;
  else if (cmp == "<=")
    c = CmpOp::kLe;
  else if (cmp == ">")
    c = CmpOp::kGt;
  else if (cmp == ">=")
    c = CmpOp::kGe;
  else
    return Fail(Err(path, "unknown cmp '" + std::string(cmp) + "' (== != < <= > >=)"));
  dom::element lhs, rhs;
  if (obj.at_key("lhs").get(lhs) || obj.at_key("rhs").get(rhs))
    return Fail(Err(path, "op 'cmp' needs \"lhs\" and \"rhs\""));
  Result<Reg> a = Expr(lhs, Sub(path, "lhs"));
  if (!a) return a;
  Result<Reg> b = Expr(rhs, Sub(path, "rhs"));
  if (!b) return b;
  if (auto err = NoVector(*a, path, "op 'cmp'", "lhs")) return Fail(std::move(*err));
  if (auto err = NoVector(*b, path, "op 'cmp'", "rhs")) return Fail(std::move(*err));
  VType ta = Type(*a), tb = Type(*b);
  // A null operand, or a string against a number, is false: predicates are two-valued.
  if (ta == VType::kNull || tb == VType::kNull) return Mask(false);
  if ((ta == VType::kStr) != (tb == VType::kStr)) return Mask(false);
  Reg ra = *a, rb = *b;
  // Mixed numbers run as (i64, f64): exact, without rounding the i64 side.
  if (ta == VType::kF64 && tb != VType::kF64) {
    std::swap(ra, rb);
    c = Flip(c);
  }
  return Emit(Op::kCmp, VType::kMask, Scalar(ra) && Scalar(rb), ra, rb, 0, uint32_t(c));
}

Result<Reg> Compiler::In(dom::object obj, const std::string& path) {
  dom::element lhs;
  dom::array values;
  if (obj.at_key("lhs").get(lhs)) return Fail(Err(path, "op 'in' needs an \"lhs\""));
  if (obj.at_key("values").get_array().get(values))
    return Fail(Err(path, "op 'in' needs a \"values\" array"));
  Result<Reg> r = Expr(lhs, Sub(path, "lhs"));
  if (!r) return r;
  if (auto err = NoVector(*r, path, "op 'in'", "lhs")) return Fail(std::move(*err));
  VType t = Type(*r);
  InSet set;
  size_t i = 0;
  for (dom::element v : values) {
    // A value is a JSON scalar or a {"const": V} node.
    dom::element inner = v;
    dom::object o;
    if (!v.get_object().get(o) && o.at_key("const").get(inner))
      return Fail(Err(Sub(path, Index("values", i)), "expected a constant"));
    std::optional<Value> val = ScalarValue(inner);
    if (!val) return Fail(Err(Sub(path, Index("values", i)), "expected a constant"));
    ++i;
    // Values that can never equal the lhs (null, other kind, inexact) are dropped.
    if (t == VType::kStr) {
      if (auto* s = std::get_if<std::string>(&*val)) set.strings.push_back(*s);
    } else if (t == VType::kF64) {
      if (auto* d = std::get_if<double>(&*val)) set.doubles.push_back(*d);
      if (auto* b = std::get_if<bool>(&*val)) set.doubles.push_back(*b ? 1.0 : 0.0);
      if (auto* n = std::get_if<int64_t>(&*val)) {
        double d = static_cast<double>(*n);
        if (d < 9223372036854775808.0 && static_cast<int64_t>(d) == *n) set.doubles.push_back(d);
      }
    } else {
      if (auto* n = std::get_if<int64_t>(&*val)) set.ints.push_back(*n);
      if (auto* b = std::get_if<bool>(&*val)) set.ints.push_back(*b ? 1 : 0);
      if (auto* d = std::get_if<double>(&*val)) {
        if (*d >= -9223372036854775808.0 && *d < 9223372036854775808.0 && std::trunc(*d) == *d)
          set.ints.push_back(static_cast<int64_t>(*d));
      }
    }
  }
  if (t == VType::kNull) return Mask(false);
  auto sort_unique = [](auto& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  sort_unique(set.ints);
  sort_unique(set.doubles);
  sort_unique(set.strings);
  p_.sets.push_back(std::move(set));
  return Emit(Op::kIn, VType::kMask, Scalar(*r), *r, 0, 0,
              static_cast<uint32_t>(p_.sets.size() - 1));
}

Result<Program> Compiler::Finish(Reg result, bool is_pred) {
  if (!is_pred && Type(result) == VType::kNull) result = Null(VType::kI64);
  if (Type(result) == VType::kVec)
    return Fail(Err("", "the result is a vector (vec:" + std::to_string(p_.regs[result].dim) +
                            "); an expression's result is a number, str or bool: compare "
                            "vectors with dot, cosine or l2"));
  p_.result = result;
  // Re-emit the code in post-order from the result: each instruction right after its
  // operands' code, the first operand's subtree first. The compiler emits all of an
  // op's arguments before folding them, so a 65,534-argument `+` had every argument
  // live at once; in post-order the fold consumes each one as it is made, and
  // AssignSlots then needs a few slots, not one row-sized buffer per argument.
  // Instructions the result does not reach (operands of folded-away nulls, which are
  // still type-checked) are dropped. An explicit stack: a fold chain is as deep as
  // its argument count.
  std::vector<uint32_t> def(p_.regs.size(), 0);
  for (size_t k = 0; k < p_.code.size(); ++k) def[p_.code[k].out] = static_cast<uint32_t>(k);
  std::vector<bool> seen(p_.regs.size(), false);
  std::vector<Instr> kept;
  struct Visit {
    Reg r;
    size_t next;  // operands of r's instruction already pushed
  };
  std::vector<Visit> stack{{result, 0}};
  seen[result] = true;
  while (!stack.empty()) {
    Visit& top = stack.back();
    const Instr& in = p_.code[def[top.r]];
    Reg ops[3];
    size_t n = 0;
    ForEachOperand(in, [&](Reg r) { ops[n++] = r; });
    if (top.next < n) {
      Reg o = ops[top.next++];
      if (!seen[o]) {
        seen[o] = true;
        stack.push_back({o, 0});  // may move `top`: not used after this
      }
      continue;
    }
    kept.push_back(in);
    stack.pop_back();
  }
  p_.code = std::move(kept);
  MarkUnchecked(p_);
  AssignSlots(p_);
  return std::move(p_);
}

}  // namespace

Result<Program> CompileProgram(const dom::element& json, bool is_pred, const ColumnTypes& cols,
                               const ParamDecls& params, std::string_view where,
                               const FromResolver& from) {
  Compiler c(cols, params, where, from);
  Result<Reg> r = is_pred ? c.Pred(json, "") : c.Expr(json, "");
  if (!r) return Fail(std::move(r.error()));
  return c.Finish(*r, is_pred);
}

}  // namespace rankd::expr
