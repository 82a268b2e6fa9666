// The compiled form of an expression or predicate (private to src/plan/expr*.cc): a
// flat list of instructions over numbered registers, each register one temporary
// vector over the selected rows (values + validity) or a broadcast scalar.
//
// Threads: a Program is built once at load and immutable afterwards; RunProgram may be
// called on any thread, concurrently, with its own Frame.
#pragma once

#include <re2/re2.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/function_ref.h"
#include "data/row_set.h"
#include "plan/expr.h"
#include "plan/params.h"

namespace rankd::expr {

// Static type of a register. kNull is the type of a null constant or of a column
// unknown at load; the compiler folds it away, so no instruction reads a kNull register.
// kBool values are stored as i64 0/1 so that bool shares the i64 kernels.
// kVec: a float32 vector a row (RegInfo::dim), read only by the vector functions.
enum class VType : uint8_t { kNull, kI64, kF64, kStr, kBool, kMask, kVec };

std::string_view VTypeName(VType t);

enum class Op : uint8_t {
  kLoadColumn,  // out <- column `aux` (gathered through the selection)
  kLoadConst,   // out <- consts[aux] (scalar)
  kLoadParam,   // out <- run value `aux`: a request param or a `from` value (scalar)
  kLoadNull,    // out <- null of type out (scalar)
  kConstMask,   // out <- aux (0 or 1) (scalar mask)
  kCastF64,     // out <- f64(a), a i64 or bool
  kAdd,
  kSub,
  kMul,  // i64 (overflow -> null) or f64, by out type
  kDiv,  // f64
  kMin,
  kMax,  // i64/bool, f64 or str
  kNeg,
  kAbs,  // i64 (overflow -> null) or f64
  kLog,
  kLog1p,
  kExp,
  kSqrt,      // f64
  kPow,       // f64
  kCoalesce,  // out <- a if valid else b
  kIf,        // out <- mask a ? b : c
  kCmp,       // mask <- a cmp b (aux = CmpOp); a and b of the same storage, or a i64 and b f64
  kAnd,
  kOr,
  kNot,     // masks
  kIn,      // mask <- a in sets[aux]
  kIsNull,  // mask <- !valid(a)
  kRegex,   // mask <- regexes[aux] partially matches a
  kDot,     // f64 <- a · b, a and b vectors of one dimension (data/vector_math.h)
  kCosine,  // f64 <- cos(a, b), null when either is all zeros
  kL2,      // f64 <- |a - b|
};

enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

// A virtual register: one per value the compiler emits (never reused, so the typing is
// simple). 32 bits: an expression within the node limit emits up to a few registers
// per node (load, cast, fold step), which 16 bits did not hold.
using Reg = uint32_t;

struct Instr {
  Op op;
  Reg out = 0, a = 0, b = 0, c = 0;
  uint32_t aux = 0;
  // f64 arithmetic: non-finite results stay valid here, because every reader is an f64
  // + - * neg abs, which makes a non-finite operand a non-finite result, nulled by the
  // reader or, unchecked too, by its readers in turn (MarkUnchecked, expr_compile.cc). The
  // program computes the same values and nulls and skips the finiteness test (a narrowing
  // of 64-bit lanes to bytes, most of an f64 kernel's cost) on intermediate results.
  bool unchecked = false;
};

// Calls f(r) for each register `in` reads (none, a, a b, or a b c by its op).
template <class F>
void ForEachOperand(const Instr& in, F&& f) {
  switch (in.op) {
    case Op::kLoadColumn:
    case Op::kLoadConst:
    case Op::kLoadParam:
    case Op::kLoadNull:
    case Op::kConstMask: return;
    case Op::kIf: f(in.a), f(in.b), f(in.c); return;
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMin:
    case Op::kMax:
    case Op::kPow:
    case Op::kCoalesce:
    case Op::kCmp:
    case Op::kAnd:
    case Op::kOr:
    case Op::kDot:
    case Op::kCosine:
    case Op::kL2: f(in.a), f(in.b); return;
    default: f(in.a);
  }
}

// Whether `in`'s output borrows its operand's validity buffer instead of writing its own
// (the same rows are valid): a cast, and an unchecked f64 unary op. The operand's slot
// then stays taken while the output is read (AssignSlots).
inline bool BorrowsValidity(const Instr& in) {
  switch (in.op) {
    case Op::kCastF64: return true;
    case Op::kNeg:
    case Op::kAbs:
    case Op::kLog:
    case Op::kLog1p:
    case Op::kExp:
    case Op::kSqrt: return in.unchecked;
    default: return false;
  }
}

// Bounds on what the compiler accepts (docs/plan.md, "Expressions"), so that whatever loads
// also runs: nodes are the JSON objects of the tree (leaves, ops and predicates), depth
// the longest root-to-leaf chain of them (a lone leaf has depth 1). The compiler recurses
// once per level, and simdjson's default depth (1024) holds 2 levels per node plus the
// plan around it.
inline constexpr size_t kMaxExprNodes = 65535;
inline constexpr size_t kMaxExprDepth = 256;

struct RegInfo {
  VType type = VType::kNull;
  bool scalar = false;  // one value, broadcast to every row
  uint32_t dim = 0;     // kVec: the vectors' dimension
};

// The constant list of an `in` predicate, split by the storage it is compared in.
struct InSet {
  std::vector<int64_t> ints;         // for an i64/bool lhs: sorted, exact matches only
  std::vector<double> doubles;       // for an f64 lhs: sorted
  std::vector<std::string> strings;  // for a str lhs: sorted
};

struct ColumnRef {
  std::string name;
  VType type;        // as typed at load; a different type at run time reads as null
  uint32_t dim = 0;  // kVec: as typed at load; another dimension at run time reads as null
};

struct Program {
  std::vector<Instr> code;  // topological order: operands are computed before use
  std::vector<RegInfo> regs;
  std::vector<ColumnRef> columns;
  std::vector<Value> consts;
  std::vector<InSet> sets;
  std::vector<std::unique_ptr<RE2>> regexes;
  std::vector<VType> param_types;  // by declaration index (`from` values carry their own)
  Reg result = 0;
  // The frame slot of each register. Registers whose values are no longer read share
  // slots (AssignSlots in expr_compile.cc), so a run's memory is that of the values
  // live at once, not of every register: a 65,535-argument `+` needs 5 slots, not
  // 65,535 row-sized buffers.
  std::vector<uint32_t> slot_of;
  uint32_t num_slots = 0;
};

// A register's own buffer. A Frame keeps it between runs and reallocates only when a run
// needs more elements than it has (see Frame).
template <class T>
struct Scratch {
  std::unique_ptr<T[]> p;
  size_t cap = 0;
  T* get() const { return p.get(); }
  explicit operator bool() const { return p != nullptr; }
};

// Storage of one register while a program runs. Pointers point either into the owned
// buffers or straight into an input column (no copy when there is no selection).
struct Slot {
  const int64_t* i = nullptr;   // kI64, kBool
  const double* f = nullptr;    // kF64
  const uint32_t* c = nullptr;  // kStr: codes into dict
  const uint8_t* m = nullptr;   // kMask: 0/1, never null
  const uint8_t* v = nullptr;   // validity, 1 = valid (unused for masks)
  // kVec: row k's dim floats start at vf + (vrow ? vrow[k] : k) * dim (a column's rows
  // read in place, through the selection: no copy); a scalar's one row at vf.
  const float* vf = nullptr;
  const uint32_t* vrow = nullptr;
  std::shared_ptr<const StringDict> dict;

  Scratch<int64_t> own_i;
  Scratch<double> own_f;
  Scratch<uint32_t> own_c;
  Scratch<uint8_t> own_m, own_v;
  Scratch<float> own_vf;
};

// What one instruction computed from its operands' dictionaries alone (not from rows),
// kept from the first block of a run for the next ones: recomputing it per block would
// cost O(dictionary size) each time. Valid for the dictionaries `a`, `b` and scalar code
// `b_code` it was made for; held, so their addresses cannot be reused by others.
struct DictMemo {
  std::shared_ptr<const StringDict> a, b;
  uint32_t b_code = 0;
  bool made = false;
  std::shared_ptr<const StringDict> dict;  // LoadScalar's one-entry dict; UnifyDicts' result
  std::vector<uint32_t> remap;             // UnifyDicts: b's codes in `dict`
  int64_t matches = -1;                    // CmpStr == / != a scalar: entries equal to it
  uint32_t match = UINT32_MAX;             //   and the last one (-1 = not computed)
  std::vector<int8_t> table;               // CmpStr, In: result per entry of a (eager);
                                           // Regex: filled on demand, -1 = not yet
};

// The registers of one block of `n` rows (scalar registers hold one value). A frame may
// serve run after run (each thread keeps one): its buffers are reused, so a run
// allocates only when it needs more than any run before it. Release drops buffers over
// kKeepElements, so one huge request does not pin its memory.
struct Frame {
  size_t n = 0;
  std::vector<Slot> slots;
  Scratch<uint8_t> ones;                        // n bytes of 1: the validity of null-free inputs
  std::unordered_map<uint32_t, DictMemo> memo;  // by instruction index, for one run

  static constexpr size_t kKeepElements = 1 << 16;
  void Release();
};

// Parses and type-checks an expr_table entry (is_pred false) or a pred_table entry
// (is_pred true) into a program whose result register is an expression value or a mask.
Result<Program> CompileProgram(const simdjson::dom::element& json, bool is_pred,
                               const ColumnTypes& cols, const ParamDecls& params,
                               std::string_view where, const FromResolver& from = {});

// A run goes over the logical rows of its input in blocks of at most kBlockRows: the
// registers then stay small (cache-resident) and no instruction works more than one
// block (<= ~0.3 ms, expr_eval.cc) between two polls of the cancel check. Each
// instruction's dispatch is paid once per block: at 4096 rows that is noise on
// `ops/bench vm` (10,000 rows, 3 blocks).
inline constexpr size_t kBlockRows = 4096;
// Blocks start on a validity word (UnpackBits, the dense scatter in expr.cc).
static_assert(kBlockRows % 64 == 0);

// Receives each block's result: logical rows [begin, begin + n) of the input, held by
// `result` (the result register; one value when the result is scalar) until the next
// block starts.
using BlockSink = FunctionRef<void(size_t begin, size_t n, const Slot& result)>;

// Runs `p` over the logical rows of `in`, block by block, handing each block to `sink`.
// Returns false, without finishing, once `cancelled` (polled between instructions every
// kCheckWork row-instructions, expr_eval.cc) says true. An empty input is one block of
// 0 rows.
bool RunProgram(const Program& p, const RowSet& in, const ParamValues& params, Frame& f,
                const CancelCheck& cancelled, const BlockSink& sink);

}  // namespace rankd::expr
