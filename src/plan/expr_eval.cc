// The expression VM: runs a Program block by block (kBlockRows logical rows) and, in a
// block, instruction by instruction, each instruction one loop over the block's rows
// (expr_kernels.h). The only per-row work outside those loops is the gather of each
// referenced column through the selection.
//
// Cancellation: the run polls its CancelCheck every kCheckWork row-instructions, at an
// instruction boundary. Measured (build/, 100,000 rows, whole program incl. loads and
// scatter): `+` 8 ns a row, exp 13, pow 19, min of two string columns 73 (string
// compares through a 75,000-entry dictionary). 4096 row-instructions are then at most
// ~0.3 ms and a few µs typically, while a poll (an atomic load) costs a few ns. A regex
// counts each RE2 match it makes (~80 ns on short strings, more on long ones) as
// kRegexMatchWork and polls inside its loop. Not polled: dictionary work done once per
// run (UnifyDicts hashes both dictionaries), bounded by the dictionaries' sizes.
#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "data/vector_math.h"
#include "plan/expr_kernels.h"
#include "plan/expr_program.h"

namespace rankd::expr {
namespace {

enum class Storage { kI64, kF64, kStr, kMask, kVec };

Storage StorageOf(VType t) {
  switch (t) {
    case VType::kF64: return Storage::kF64;
    case VType::kStr: return Storage::kStr;
    case VType::kMask: return Storage::kMask;
    case VType::kVec: return Storage::kVec;
    default: return Storage::kI64;  // i64, bool (0/1) and null
  }
}

template <class T>
T* Alloc(Scratch<T>& own, size_t n) {
  n = n ? n : 1;
  if (n > own.cap) {
    own.p = std::make_unique_for_overwrite<T[]>(n);
    own.cap = n;
  }
  return own.p.get();
}

template <class T>
void ReleaseIfHuge(Scratch<T>& s) {
  if (s.cap > Frame::kKeepElements) s = {};
}

constexpr size_t kCheckWork = 4096;
constexpr size_t kRegexMatchWork = 64;

std::shared_ptr<const StringDict> OneString(std::string s) {
  auto d = std::make_shared<StringDict>();
  d->values.push_back(std::move(s));
  return d;
}

using DictPtr = std::shared_ptr<const StringDict>;

// The numeric kernels (expr_kernels.h) compiled three times, for baseline x86-64 (SSE2),
// AVX2 and x86-64-v4 (AVX-512), the dynamic loader picking one per machine (GCC function
// multiversioning, an ifunc): AVX2 doubles the vector width and has what GCC 12 needs to
// vectorise f64 compares into bytes, which stay scalar on SSE2; AVX-512 doubles it again
// and compares into mask registers. `flatten` inlines the templated kernels into each
// clone, so that they are vectorised for its target. Results are the same in every clone
// (one IEEE operation per step; -ffp-contract=off in meson.build). Measured
// on ops/bench vm (AMD EPYC, median of 3): filter 0.88 -> 0.62 of its baseline with AVX2,
// 0.74 -> 0.64 with AVX-512 added on a machine that has it; vm within noise.
// Not under TSan nor with the fuzz build's coverage callbacks (RANKD_FUZZ_COVERAGE): the
// dynamic loader runs the ifunc resolvers while relocating, before those runtimes are
// set up, and the instrumented resolver crashes (seen under TSan: SIGSEGV in a resolver
// called from _dl_relocate_object). Those builds run the baseline kernels.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(RANKD_FUZZ_COVERAGE)
#define RANKD_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "avx2", "default"), flatten))
#else
#define RANKD_VECTOR_CLONES
#endif

// check: whether non-finite results are nulled (!Instr::unchecked).
RANKD_VECTOR_CLONES void F64Arith(Op op, bool check, bool sa, bool sb, size_t n, const double* a,
                                  const uint8_t* va, const double* b, const uint8_t* vb, double* o,
                                  uint8_t* v) {
  auto run = [&]<bool Check>() {
    Dispatch2(sa, sb, [&]<bool SA, bool SB>() {
      switch (op) {
        case Op::kAdd: F64Binary<Op::kAdd, SA, SB, Check>(n, a, va, b, vb, o, v); break;
        case Op::kSub: F64Binary<Op::kSub, SA, SB, Check>(n, a, va, b, vb, o, v); break;
        case Op::kMul: F64Binary<Op::kMul, SA, SB, Check>(n, a, va, b, vb, o, v); break;
        case Op::kDiv: F64Binary<Op::kDiv, SA, SB, Check>(n, a, va, b, vb, o, v); break;
        case Op::kMin: F64Binary<Op::kMin, SA, SB, Check>(n, a, va, b, vb, o, v); break;
        case Op::kMax: F64Binary<Op::kMax, SA, SB, Check>(n, a, va, b, vb, o, v); break;
        case Op::kPow: F64Binary<Op::kPow, SA, SB, Check>(n, a, va, b, vb, o, v); break;
        default: break;
      }
    });
  };
  if (check)
    run.template operator()<true>();
  else
    run.template operator()<false>();
}

RANKD_VECTOR_CLONES void I64Arith(Op op, bool sa, bool sb, size_t n, const int64_t* a,
                                  const uint8_t* va, const int64_t* b, const uint8_t* vb,
                                  int64_t* o, uint8_t* v) {
  Dispatch2(sa, sb, [&]<bool SA, bool SB>() {
    switch (op) {
      case Op::kAdd: I64Binary<Op::kAdd, SA, SB>(n, a, va, b, vb, o, v); break;
      case Op::kSub: I64Binary<Op::kSub, SA, SB>(n, a, va, b, vb, o, v); break;
      case Op::kMul: I64Binary<Op::kMul, SA, SB>(n, a, va, b, vb, o, v); break;
      case Op::kMin: I64Binary<Op::kMin, SA, SB>(n, a, va, b, vb, o, v); break;
      case Op::kMax: I64Binary<Op::kMax, SA, SB>(n, a, va, b, vb, o, v); break;
      default: break;
    }
  });
}

// a OP b into the mask m, both operands i64 or both f64.
RANKD_VECTOR_CLONES void NumericCmp(CmpOp op, bool f64, bool sa, bool sb, size_t n, const Slot& a,
                                    const Slot& b, uint8_t* m) {
  Dispatch2(sa, sb, [&]<bool SA, bool SB>() {
    DispatchCmp(op, [&]<CmpOp C>() {
      if (f64)
        CmpKernel<C, double, SA, SB>(n, a.f, a.v, b.f, b.v, m);
      else
        CmpKernel<C, int64_t, SA, SB>(n, a.i, a.v, b.i, b.v, m);
    });
  });
}

// coalesce(a, b) into o and v; T is int64_t, double or uint32_t (string codes).
template <class T>
void CoalesceT(bool sa, bool sb, size_t n, const T* a, const uint8_t* va, const T* b,
               const uint8_t* vb, T* o, uint8_t* v) {
  Dispatch2(sa, sb, [&]<bool SA, bool SB>() { Coalesce<T, SA, SB>(n, a, va, b, vb, o, v); });
}
RANKD_VECTOR_CLONES void CoalesceI64(bool sa, bool sb, size_t n, const int64_t* a,
                                     const uint8_t* va, const int64_t* b, const uint8_t* vb,
                                     int64_t* o, uint8_t* v) {
  CoalesceT(sa, sb, n, a, va, b, vb, o, v);
}
RANKD_VECTOR_CLONES void CoalesceF64(bool sa, bool sb, size_t n, const double* a, const uint8_t* va,
                                     const double* b, const uint8_t* vb, double* o, uint8_t* v) {
  CoalesceT(sa, sb, n, a, va, b, vb, o, v);
}
RANKD_VECTOR_CLONES void CoalesceU32(bool sa, bool sb, size_t n, const uint32_t* a,
                                     const uint8_t* va, const uint32_t* b, const uint8_t* vb,
                                     uint32_t* o, uint8_t* v) {
  CoalesceT(sa, sb, n, a, va, b, vb, o, v);
}

RANKD_VECTOR_CLONES void CastI64ToF64(size_t n, const int64_t* x, double* o) { I64ToF64(n, x, o); }

// A vector register's rows as the vector functions read them (Slot::vf, vrow; `scalar`:
// its one row for every row).
struct VecRows {
  const float* vf;
  const uint32_t* vrow;
  bool scalar;
  const float* row(size_t k, uint32_t dim) const {
    return vf + (scalar ? 0 : vrow ? size_t{vrow[k]} : k) * dim;
  }
};

// dot, cosine or l2 of rows k < n of a and b into o and its validity v. Null rows hold
// zeros (a column's) or a scalar's zeros, so every row is computed and no branch on
// validity sits in the loop. Each clone sums in data/vector_math.h's fixed order: the
// same bits on every target (tests/plan/test_expr_vectors.cc checks each).
RANKD_VECTOR_CLONES void VectorRows(Op op, size_t n, uint32_t dim, VecRows a, const uint8_t* va,
                                    VecRows b, const uint8_t* vb, double* o, uint8_t* v) {
  for (size_t k = 0; k < n; ++k) {
    const float* x = a.row(k, dim);
    const float* y = b.row(k, dim);
    uint8_t valid = va[a.scalar ? 0 : k] & vb[b.scalar ? 0 : k];
    switch (op) {
      case Op::kDot: o[k] = vec::Dot(x, y, dim); break;
      case Op::kL2: o[k] = vec::L2(x, y, dim); break;
      default: {
        double c = 0;
        valid &= static_cast<uint8_t>(vec::CosineOf(vec::Cosine(x, y, dim), c));
        o[k] = c;
        break;
      }
    }
    v[k] = valid;
  }
}

class Runner {
 public:
  Runner(const Program& p, const RowSet& in, const ParamValues& params, Frame& f,
         const CancelCheck& cancelled)
      : p_(p), in_(in), params_(params), f_(f), cancelled_(cancelled) {}

  bool Run(const BlockSink& sink) {
    const size_t total = in_.size();
    // The frame may come from an earlier run: keep its buffers, forget its views and memos.
    if (f_.slots.size() < p_.num_slots) f_.slots.resize(p_.num_slots);
    f_.memo.clear();
    size_t most = std::min(total, kBlockRows);
    std::memset(Alloc(f_.ones, most), 1, most ? most : 1);
    for (begin_ = 0; begin_ == 0 || begin_ < total; begin_ += kBlockRows) {
      f_.n = std::min(kBlockRows, total - begin_);
      for (pc_ = 0; pc_ < p_.code.size(); ++pc_) {
        const Instr& ins = p_.code[pc_];
        // The slot may hold an earlier block's or an earlier register's views.
        ForgetViews(S(ins.out));
        Exec(ins);
        if (stop_ || Spent(Len(ins.out))) return false;
      }
      sink(begin_, f_.n, S(p_.result));
    }
    return true;
  }

 private:
  // Counts `work` row-instructions done; every kCheckWork of them polls the cancel
  // check. True = cancelled: stop.
  bool Spent(size_t work) {
    work_ += work;
    if (work_ < kCheckWork) return false;
    work_ = 0;
    stop_ = cancelled_ && cancelled_();
    return stop_;
  }
  // The running instruction's memo for operand dictionaries a, b (and b's scalar code),
  // emptied when it was made for others.
  DictMemo& Memo(const DictPtr& a = nullptr, const DictPtr& b = nullptr, uint32_t b_code = 0) {
    DictMemo& m = f_.memo[static_cast<uint32_t>(pc_)];
    if (!m.made || m.a != a || m.b != b || m.b_code != b_code) {
      m = DictMemo{};
      m.a = a, m.b = b, m.b_code = b_code, m.made = true;
    }
    return m;
  }
  size_t Len(Reg r) const { return p_.regs[r].scalar ? 1 : f_.n; }
  Slot& S(Reg r) { return f_.slots[p_.slot_of[r]]; }
  // Register r's mask, allocated for its length and set as its value.
  uint8_t* MaskOut(Reg r) {
    Slot& out = S(r);
    uint8_t* m = Alloc(out.own_m, Len(r));
    out.m = m;
    return m;
  }
  static void ForgetViews(Slot& s) {
    s.i = nullptr;
    s.f = nullptr;
    s.c = nullptr;
    s.m = s.v = nullptr;
    s.vf = nullptr;
    s.vrow = nullptr;
    s.dict.reset();
  }
  VType T(Reg r) const { return p_.regs[r].type; }
  bool Sc(Reg r) const { return p_.regs[r].scalar; }

  void Exec(const Instr& ins);
  void LoadColumn(const Instr& ins);
  void LoadScalar(Slot& out, Reg r, const Value& v);
  void Arith(const Instr& ins);
  void Unary(const Instr& ins);
  void MinMaxStr(const Instr& ins);
  void CoalesceOrIf(const Instr& ins);
  void Cmp(const Instr& ins);
  void CmpStr(const Instr& ins);
  void In(const Instr& ins);
  void Regex(const Instr& ins);
  void Vector(const Instr& ins);
  // Codes of b re-expressed in a's dictionary (extended if needed): out.dict and the
  // returned codes are valid for both. REQUIRES: a and b are str registers.
  const uint32_t* UnifyDicts(Reg a, Reg b, Slot& out, Scratch<uint32_t>& tmp);
  // A full-length copy of a scalar register (for the few kernels without scalar shapes).
  void Broadcast(Reg r, Slot& tmp, const Slot*& view);

  const Program& p_;
  const RowSet& in_;
  const ParamValues& params_;
  Frame& f_;
  const CancelCheck& cancelled_;
  size_t begin_ = 0;  // the block's first logical row
  size_t pc_ = 0;     // the running instruction
  size_t work_ = 0;   // row-instructions since the last poll
  bool stop_ = false;
};

void Runner::Exec(const Instr& ins) {
  Slot& out = S(ins.out);
  switch (ins.op) {
    case Op::kLoadColumn: return LoadColumn(ins);
    case Op::kLoadConst: return LoadScalar(out, ins.out, p_.consts[ins.aux]);
    case Op::kLoadParam:
      return LoadScalar(out, ins.out,
                        ins.aux < params_.size() ? params_[ins.aux] : Value(std::monostate{}));
    case Op::kLoadNull: return LoadScalar(out, ins.out, Value(std::monostate{}));
    case Op::kConstMask: {
      uint8_t* m = Alloc(out.own_m, 1);
      m[0] = static_cast<uint8_t>(ins.aux);
      out.m = m;
      return;
    }
    case Op::kCastF64: {
      size_t n = Len(ins.out);
      const Slot& a = S(ins.a);
      double* o = Alloc(out.own_f, n);
      CastI64ToF64(n, a.i, o);
      out.f = o;
      out.v = a.v;  // same rows valid; validity buffers are never written after creation
      return;
    }
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kPow: return Arith(ins);
    case Op::kMin:
    case Op::kMax:
      if (StorageOf(T(ins.out)) == Storage::kStr) return MinMaxStr(ins);
      return Arith(ins);
    case Op::kNeg:
    case Op::kAbs:
    case Op::kLog:
    case Op::kLog1p:
    case Op::kExp:
    case Op::kSqrt: return Unary(ins);
    case Op::kCoalesce:
    case Op::kIf: return CoalesceOrIf(ins);
    case Op::kCmp: return Cmp(ins);
    case Op::kAnd:
    case Op::kOr: {
      size_t n = Len(ins.out);
      uint8_t* m = Alloc(out.own_m, n);
      const uint8_t* a = S(ins.a).m;
      const uint8_t* b = S(ins.b).m;
      bool is_and = ins.op == Op::kAnd;
      Dispatch2(Sc(ins.a), Sc(ins.b), [&]<bool SA, bool SB>() {
        if (is_and)
          for (size_t k = 0; k < n; ++k) m[k] = a[SA ? 0 : k] & b[SB ? 0 : k];
        else
          for (size_t k = 0; k < n; ++k) m[k] = a[SA ? 0 : k] | b[SB ? 0 : k];
      });
      out.m = m;
      return;
    }
    case Op::kNot:
    case Op::kIsNull: {
      // Both invert a 0/1 byte array: `not` the operand's mask, `is_null` its validity.
      size_t n = Len(ins.out);
      uint8_t* m = Alloc(out.own_m, n);
      const uint8_t* a = ins.op == Op::kNot ? S(ins.a).m : S(ins.a).v;
      for (size_t k = 0; k < n; ++k) m[k] = a[k] ^ 1;
      out.m = m;
      return;
    }
    case Op::kIn: return In(ins);
    case Op::kRegex: return Regex(ins);
    case Op::kDot:
    case Op::kCosine:
    case Op::kL2: return Vector(ins);
  }
}

void Runner::Vector(const Instr& ins) {
  Slot& out = S(ins.out);
  const Slot& a = S(ins.a);
  const Slot& b = S(ins.b);
  const size_t n = Len(ins.out);
  double* o = Alloc(out.own_f, n);
  uint8_t* v = Alloc(out.own_v, n);
  VectorRows(ins.op, n, p_.regs[ins.a].dim, {a.vf, a.vrow, Sc(ins.a)}, a.v,
             {b.vf, b.vrow, Sc(ins.b)}, b.v, o, v);
  out.f = o;
  out.v = v;
}

void Runner::LoadColumn(const Instr& ins) {
  Slot& out = S(ins.out);
  const ColumnRef& ref = p_.columns[ins.aux];
  const size_t n = f_.n;
  const Selection* sel = in_.selection();
  const Column* col = in_.column(ref.name);
  VType t = ref.type;
  bool ok = col != nullptr;
  if (ok) {
    switch (col->type) {
      case ColumnType::kI64: ok = t == VType::kI64; break;
      case ColumnType::kF64: ok = t == VType::kF64; break;
      case ColumnType::kStr: ok = t == VType::kStr && col->dict != nullptr; break;
      case ColumnType::kBool: ok = t == VType::kBool; break;
      case ColumnType::kVec: ok = t == VType::kVec && col->dim == ref.dim; break;
    }
  }
  if (!ok) {
    // Absent at run time, or not of its load-time type: nulls, never a crash.
    uint8_t* v = Alloc(out.own_v, n);
    std::memset(v, 0, n);
    out.v = v;
    switch (StorageOf(t)) {
      case Storage::kF64:
        out.f = Alloc(out.own_f, n);
        std::fill_n(out.own_f.get(), n, 0.0);
        break;
      case Storage::kStr: {
        out.c = Alloc(out.own_c, n);
        std::fill_n(out.own_c.get(), n, 0u);
        // The same dictionary in every block (later instructions' memos key on it).
        static const DictPtr empty = OneString("");
        out.dict = empty;
        break;
      }
      case Storage::kVec: {
        // Every row is one row of zeros: n indexes, not n * dim floats.
        out.vf = Alloc(out.own_vf, ref.dim);
        std::fill_n(out.own_vf.get(), ref.dim, 0.0f);
        out.vrow = Alloc(out.own_c, n);
        std::fill_n(out.own_c.get(), n, 0u);
        break;
      }
      default:
        out.i = Alloc(out.own_i, n);
        std::fill_n(out.own_i.get(), n, int64_t{0});
        break;
    }
    return;
  }
  const size_t first = begin_;
  const uint32_t* rows = sel ? sel->data() + first : nullptr;
  // Values: alias the column when there is no selection, else gather the block's rows.
  auto gather = [&](const auto* src, auto& own) {
    using E = std::remove_cvref_t<decltype(*src)>;
    if (!rows) return src + first;
    E* dst = Alloc(own, n);
    for (size_t k = 0; k < n; ++k) dst[k] = src[rows[k]];
    return static_cast<const E*>(dst);
  };
  switch (col->type) {
    case ColumnType::kI64: out.i = gather(col->i64.data(), out.own_i); break;
    case ColumnType::kF64: out.f = gather(col->f64.data(), out.own_f); break;
    case ColumnType::kStr:
      out.c = gather(col->str_code.data(), out.own_c);
      out.dict = col->dict;
      break;
    case ColumnType::kBool: {
      int64_t* dst = Alloc(out.own_i, n);
      const uint8_t* src = col->b.data();
      if (rows)
        for (size_t k = 0; k < n; ++k) dst[k] = src[rows[k]];
      else
        for (size_t k = 0; k < n; ++k) dst[k] = src[first + k];
      out.i = dst;
      break;
    }
    case ColumnType::kVec:
      // In place: through the selection's rows, or the block's rows from `first` on.
      if (rows) {
        out.vf = col->vec.data();
        out.vrow = rows;
      } else {
        out.vf = col->vec.data() + first * col->dim;
      }
      break;
  }
  if (col->validity.all_valid()) {
    out.v = f_.ones.get();
    return;
  }
  const uint64_t* words = col->validity.words().data();
  uint8_t* v = Alloc(out.own_v, n);
  if (rows)
    for (size_t k = 0; k < n; ++k) v[k] = (words[rows[k] >> 6] >> (rows[k] & 63)) & 1;
  else
    UnpackBits(words, first, n, v);
  out.v = v;
}

void Runner::LoadScalar(Slot& out, Reg r, const Value& v) {
  const VType t = T(r);
  uint8_t* valid = Alloc(out.own_v, 1);
  valid[0] = 1;
  out.v = valid;
  switch (StorageOf(t)) {
    case Storage::kVec: {
      // A viewer's vector ({"from"}): null (zeros) unless of the dimension typed at load.
      const uint32_t dim = p_.regs[r].dim;
      float* x = Alloc(out.own_vf, dim);
      out.vf = x;
      auto* f = std::get_if<std::vector<float>>(&v);
      if (f && f->size() == dim) {
        std::copy(f->begin(), f->end(), x);
      } else {
        std::fill_n(x, dim, 0.0f);
        valid[0] = 0;
      }
      return;
    }
    case Storage::kF64: {
      double* f = Alloc(out.own_f, 1);
      out.f = f;
      if (auto* d = std::get_if<double>(&v))
        f[0] = *d;
      else if (auto* i = std::get_if<int64_t>(&v))
        f[0] = static_cast<double>(*i);
      else
        f[0] = 0, valid[0] = 0;
      return;
    }
    case Storage::kStr: {
      uint32_t* c = Alloc(out.own_c, 1);
      c[0] = 0;
      out.c = c;
      auto* s = std::get_if<std::string>(&v);
      // One dictionary per run, not per block: later instructions' memos key on it.
      DictMemo& m = Memo();
      if (!m.dict) m.dict = OneString(s ? *s : std::string());
      out.dict = m.dict;
      if (!s) valid[0] = 0;
      return;
    }
    default: {
      int64_t* i = Alloc(out.own_i, 1);
      out.i = i;
      if (t == VType::kBool) {
        if (auto* b = std::get_if<bool>(&v))
          i[0] = *b ? 1 : 0;
        else
          i[0] = 0, valid[0] = 0;
      } else if (auto* x = std::get_if<int64_t>(&v)) {
        i[0] = *x;
      } else {
        i[0] = 0, valid[0] = 0;
      }
      return;
    }
  }
}

void Runner::Arith(const Instr& ins) {
  Slot& out = S(ins.out);
  const Slot& a = S(ins.a);
  const Slot& b = S(ins.b);
  size_t n = Len(ins.out);
  uint8_t* v = Alloc(out.own_v, n);
  out.v = v;
  if (StorageOf(T(ins.out)) == Storage::kI64) {
    int64_t* o = Alloc(out.own_i, n);
    out.i = o;
    I64Arith(ins.op, Sc(ins.a), Sc(ins.b), n, a.i, a.v, b.i, b.v, o, v);
    return;
  }
  double* o = Alloc(out.own_f, n);
  out.f = o;
  F64Arith(ins.op, !ins.unchecked, Sc(ins.a), Sc(ins.b), n, a.f, a.v, b.f, b.v, o, v);
}

void Runner::Unary(const Instr& ins) {
  Slot& out = S(ins.out);
  const Slot& a = S(ins.a);
  size_t n = Len(ins.out);
  // Unchecked, the output borrows the operand's validity (BorrowsValidity); else its own.
  const bool check = !ins.unchecked;
  uint8_t* v = check ? Alloc(out.own_v, n) : nullptr;
  out.v = check ? v : a.v;
  if (StorageOf(T(ins.out)) == Storage::kI64) {  // never unchecked (f64 only)
    int64_t* o = Alloc(out.own_i, n);
    out.i = o;
    const int64_t* x = a.i;
    const uint8_t* va = a.v;
    // -INT64_MIN and |INT64_MIN| overflow: null. Negation goes through unsigned (no UB).
    if (ins.op == Op::kNeg) {
      for (size_t k = 0; k < n; ++k) {
        o[k] = static_cast<int64_t>(0 - static_cast<uint64_t>(x[k]));
        v[k] = va[k] & static_cast<uint8_t>(x[k] != INT64_MIN);
      }
    } else {
      for (size_t k = 0; k < n; ++k) {
        uint64_t neg = 0 - static_cast<uint64_t>(x[k]);
        o[k] = x[k] < 0 ? static_cast<int64_t>(neg) : x[k];
        v[k] = va[k] & static_cast<uint8_t>(x[k] != INT64_MIN);
      }
    }
    return;
  }
  double* o = Alloc(out.own_f, n);
  out.f = o;
  const double* x = a.f;
  const uint8_t* va = a.v;
  auto apply = [&](auto fn) {
    if (check) {
      for (size_t k = 0; k < n; ++k) {
        double r = fn(x[k]);
        o[k] = r;
        v[k] = va[k] & Finite(r);
      }
    } else {
      for (size_t k = 0; k < n; ++k) o[k] = fn(x[k]);
    }
  };
  // log, log1p and exp are libm calls, not vector code: a null row skips its call.
  auto call = [&](auto fn) {
    if (check) {
      for (size_t k = 0; k < n; ++k) {
        double r = va[k] ? fn(x[k]) : 0.0;
        o[k] = r;
        v[k] = va[k] & Finite(r);
      }
    } else {
      for (size_t k = 0; k < n; ++k) o[k] = va[k] ? fn(x[k]) : 0.0;
    }
  };
  switch (ins.op) {
    case Op::kNeg: apply([](double d) { return -d; }); break;
    case Op::kAbs: apply([](double d) { return std::fabs(d); }); break;
    case Op::kLog: call([](double d) { return std::log(d); }); break;
    case Op::kLog1p: call([](double d) { return std::log1p(d); }); break;
    case Op::kExp: call([](double d) { return std::exp(d); }); break;
    case Op::kSqrt: apply([](double d) { return std::sqrt(d); }); break;
    default: break;
  }
}

void Runner::Broadcast(Reg r, Slot& tmp, const Slot*& view) {
  view = &S(r);
  if (!Sc(r) || f_.n <= 1) return;
  const Slot& s = S(r);
  size_t n = f_.n;
  uint8_t* v = Alloc(tmp.own_v, n);
  std::fill_n(v, n, s.v ? s.v[0] : uint8_t{1});
  tmp.v = v;
  switch (StorageOf(T(r))) {
    case Storage::kI64:
      tmp.i = Alloc(tmp.own_i, n);
      std::fill_n(tmp.own_i.get(), n, s.i[0]);
      break;
    case Storage::kF64:
      tmp.f = Alloc(tmp.own_f, n);
      std::fill_n(tmp.own_f.get(), n, s.f[0]);
      break;
    case Storage::kStr:
      tmp.c = Alloc(tmp.own_c, n);
      std::fill_n(tmp.own_c.get(), n, s.c[0]);
      tmp.dict = s.dict;
      break;
    case Storage::kMask:
      tmp.m = Alloc(tmp.own_m, n);
      std::fill_n(tmp.own_m.get(), n, s.m[0]);
      break;
    case Storage::kVec: break;  // never: `if` takes no vectors (the compiler refuses)
  }
  view = &tmp;
}

const uint32_t* Runner::UnifyDicts(Reg ra, Reg rb, Slot& out, Scratch<uint32_t>& tmp) {
  const Slot& a = S(ra);
  const Slot& b = S(rb);
  if (a.dict == b.dict) {
    out.dict = a.dict;
    return b.c;
  }
  // Cost: O(|dict a| + |dict b|) hashing, once per run (the memo serves later blocks),
  // independent of the row count.
  DictMemo& m = Memo(a.dict, b.dict);
  if (!m.dict) {
    const auto& av = a.dict->values;
    const auto& bv = b.dict->values;
    std::unordered_map<std::string_view, uint32_t> index;
    index.reserve(av.size() + bv.size());
    for (size_t k = 0; k < av.size(); ++k) index.try_emplace(av[k], static_cast<uint32_t>(k));
    m.remap.resize(bv.size());
    std::vector<std::string_view> extra;  // views into b's dictionary, which stays put
    for (size_t k = 0; k < bv.size(); ++k) {
      auto [it, inserted] =
          index.try_emplace(bv[k], static_cast<uint32_t>(av.size() + extra.size()));
      if (inserted) extra.push_back(bv[k]);
      m.remap[k] = it->second;
    }
    if (extra.empty()) {
      m.dict = a.dict;
    } else {
      auto d = std::make_shared<StringDict>();
      d->values.reserve(av.size() + extra.size());
      d->values = av;
      for (std::string_view s : extra) d->values.push_back(s);
      m.dict = std::move(d);
    }
  }
  out.dict = m.dict;
  size_t n = Len(rb);
  uint32_t* codes = Alloc(tmp, n);
  for (size_t k = 0; k < n; ++k) codes[k] = m.remap[b.c[k]];
  return codes;
}

void Runner::MinMaxStr(const Instr& ins) {
  Slot& out = S(ins.out);
  Scratch<uint32_t> tmp;
  const uint32_t* cb = UnifyDicts(ins.a, ins.b, out, tmp);
  const Slot& a = S(ins.a);
  const Slot& b = S(ins.b);
  size_t n = Len(ins.out);
  const auto& vals = out.dict->values;
  uint32_t* o = Alloc(out.own_c, n);
  uint8_t* v = Alloc(out.own_v, n);
  bool is_min = ins.op == Op::kMin;
  bool sa = Sc(ins.a), sb = Sc(ins.b);
  for (size_t k = 0; k < n; ++k) {
    uint32_t x = a.c[sa ? 0 : k], y = cb[sb ? 0 : k];
    bool a_first = std::string_view(vals[x]) <= std::string_view(vals[y]);
    o[k] = (a_first == is_min) ? x : y;
    v[k] = a.v[sa ? 0 : k] & b.v[sb ? 0 : k];
  }
  out.c = o;
  out.v = v;
}

void Runner::CoalesceOrIf(const Instr& ins) {
  Slot& out = S(ins.out);
  size_t n = Len(ins.out);
  Storage st = StorageOf(T(ins.out));
  uint8_t* v = Alloc(out.own_v, n);
  out.v = v;
  // For str the two value operands must share a dictionary first.
  Scratch<uint32_t> remapped;
  Reg ra = ins.op == Op::kIf ? ins.b : ins.a;
  Reg rb = ins.op == Op::kIf ? ins.c : ins.b;
  const uint32_t* cb = st == Storage::kStr ? UnifyDicts(ra, rb, out, remapped) : nullptr;

  if (ins.op == Op::kCoalesce) {
    const Slot& a = S(ra);
    const Slot& b = S(rb);
    switch (st) {
      case Storage::kI64:
        out.i = Alloc(out.own_i, n);
        CoalesceI64(Sc(ra), Sc(rb), n, a.i, a.v, b.i, b.v, out.own_i.get(), v);
        break;
      case Storage::kF64:
        out.f = Alloc(out.own_f, n);
        CoalesceF64(Sc(ra), Sc(rb), n, a.f, a.v, b.f, b.v, out.own_f.get(), v);
        break;
      case Storage::kStr:
        out.c = Alloc(out.own_c, n);
        CoalesceU32(Sc(ra), Sc(rb), n, a.c, a.v, cb, b.v, out.own_c.get(), v);
        break;
      case Storage::kMask:
      case Storage::kVec: break;  // never: coalesce takes no vectors
    }
    return;
  }
  // if: broadcast scalar operands unless all three are scalar (then n == 1).
  Slot tm, ta, tb;
  const Slot *m, *a, *b;
  bool all_scalar = Sc(ins.out);
  if (all_scalar) {
    m = &S(ins.a), a = &S(ra), b = &S(rb);
  } else {
    Broadcast(ins.a, tm, m);
    Broadcast(ra, ta, a);
    Broadcast(rb, tb, b);
    if (st == Storage::kStr && Sc(rb) && tb.own_c) {
      uint32_t code = cb[0];
      std::fill_n(tb.own_c.get(), n, code);
      cb = tb.own_c.get();
    }
  }
  const uint8_t* mm = m->m;
  for (size_t k = 0; k < n; ++k) v[k] = mm[k] ? a->v[k] : b->v[k];
  switch (st) {
    case Storage::kI64: {
      int64_t* o = Alloc(out.own_i, n);
      for (size_t k = 0; k < n; ++k) o[k] = mm[k] ? a->i[k] : b->i[k];
      out.i = o;
      break;
    }
    case Storage::kF64: {
      double* o = Alloc(out.own_f, n);
      for (size_t k = 0; k < n; ++k) o[k] = mm[k] ? a->f[k] : b->f[k];
      out.f = o;
      break;
    }
    case Storage::kStr: {
      uint32_t* o = Alloc(out.own_c, n);
      for (size_t k = 0; k < n; ++k) o[k] = mm[k] ? a->c[k] : cb[k];
      out.c = o;
      break;
    }
    case Storage::kMask:
    case Storage::kVec: break;  // never: `if` takes no vectors
  }
}

void Runner::Cmp(const Instr& ins) {
  Storage sa = StorageOf(T(ins.a)), sb = StorageOf(T(ins.b));
  if (sa == Storage::kStr) return CmpStr(ins);
  const size_t n = Len(ins.out);
  uint8_t* m = MaskOut(ins.out);
  const Slot& a = S(ins.a);
  const Slot& b = S(ins.b);
  auto op = static_cast<CmpOp>(ins.aux);
  if (sa == Storage::kI64 && sb == Storage::kF64) {
    bool sca = Sc(ins.a), scb = Sc(ins.b);
    for (size_t k = 0; k < n; ++k) {
      size_t ia = sca ? 0 : k, ib = scb ? 0 : k;
      m[k] = a.v[ia] & b.v[ib] & ApplyOrder(op, OrderMixed(a.i[ia], b.f[ib]));
    }
    return;
  }
  NumericCmp(op, sa == Storage::kF64, Sc(ins.a), Sc(ins.b), n, a, b, m);
}

// Strings: against a scalar, each dictionary entry is compared once and rows look their
// code up; `==` with a single matching entry compares codes only.
void Runner::CmpStr(const Instr& ins) {
  const size_t n = Len(ins.out);
  uint8_t* m = MaskOut(ins.out);
  auto op = static_cast<CmpOp>(ins.aux);
  Reg ra = ins.a, rb = ins.b;
  if (Sc(ra) && !Sc(rb)) {
    std::swap(ra, rb);
    op = op == CmpOp::kLt   ? CmpOp::kGt
         : op == CmpOp::kGt ? CmpOp::kLt
         : op == CmpOp::kLe ? CmpOp::kGe
         : op == CmpOp::kGe ? CmpOp::kLe
                            : op;
  }
  const Slot& a = S(ra);
  const Slot& b = S(rb);
  auto order = [](std::string_view x, std::string_view y) {
    int c = x.compare(y);
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  };
  if (Sc(rb)) {
    std::string_view s = b.dict->values[b.c[0]];
    const uint8_t bv = b.v[0];
    const auto& dict = a.dict->values;
    size_t len = Len(ra);
    // Dictionary work is done once per run (memo) and only when the whole run's rows
    // (in_.size(), not the block's) outnumber a quarter of the entries: the costs of a
    // run in one block.
    DictMemo& memo = Memo(a.dict, b.dict, b.c[0]);
    if (op == CmpOp::kEq || op == CmpOp::kNe) {
      if (memo.matches < 0) {
        memo.matches = 0;
        for (size_t k = 0; k < dict.size(); ++k)
          if (dict[k] == s) memo.match = static_cast<uint32_t>(k), ++memo.matches;
      }
      if (memo.matches <= 1) {
        uint8_t want = op == CmpOp::kEq;
        const uint32_t match = memo.match;
        for (size_t k = 0; k < len; ++k)
          m[k] = a.v[k] & bv & static_cast<uint8_t>((a.c[k] == match) == want);
        return;
      }
    }
    if (dict.size() <= 4 * in_.size()) {
      std::vector<int8_t>& table = memo.table;
      if (table.size() != dict.size()) {
        table.resize(dict.size());
        for (size_t k = 0; k < dict.size(); ++k) table[k] = ApplyOrder(op, order(dict[k], s));
      }
      for (size_t k = 0; k < len; ++k) m[k] = a.v[k] & bv & static_cast<uint8_t>(table[a.c[k]]);
    } else {
      for (size_t k = 0; k < len; ++k) m[k] = a.v[k] & bv & ApplyOrder(op, order(dict[a.c[k]], s));
    }
    return;
  }
  // Two vectors.
  bool same = a.dict == b.dict;
  for (size_t k = 0; k < n; ++k) {
    bool r;
    if (same && (op == CmpOp::kEq || op == CmpOp::kNe))
      r = (a.c[k] == b.c[k]) == (op == CmpOp::kEq);
    else
      r = ApplyOrder(op, order(a.dict->values[a.c[k]], b.dict->values[b.c[k]]));
    m[k] = a.v[k] & b.v[k] & r;
  }
}

void Runner::In(const Instr& ins) {
  const size_t n = Len(ins.out);
  uint8_t* m = MaskOut(ins.out);
  const Slot& a = S(ins.a);
  const InSet& set = p_.sets[ins.aux];
  switch (StorageOf(T(ins.a))) {
    case Storage::kStr: {
      const auto& dict = a.dict->values;
      auto has = [&](std::string_view s) {
        return std::binary_search(set.strings.begin(), set.strings.end(), s);
      };
      // As in CmpStr: the table once per run, when the run's rows outnumber its cost.
      if (dict.size() <= 4 * in_.size()) {
        std::vector<int8_t>& table = Memo(a.dict).table;
        if (table.size() != dict.size()) {
          table.resize(dict.size());
          for (size_t k = 0; k < dict.size(); ++k) table[k] = has(dict[k]);
        }
        LookUp(n, a.c, a.v, table.data(), m);
      } else {
        for (size_t k = 0; k < n; ++k) m[k] = a.v[k] & static_cast<uint8_t>(has(dict[a.c[k]]));
      }
      return;
    }
    case Storage::kF64:
    case Storage::kI64: {
      // Short lists: one vectorised pass per value; long lists: binary search per row.
      auto run = [&](const auto* x, const auto& values) {
        if (values.size() <= 8) {
          std::memset(m, 0, n);
          for (auto val : values)
            for (size_t k = 0; k < n; ++k) m[k] |= static_cast<uint8_t>(x[k] == val);
          for (size_t k = 0; k < n; ++k) m[k] &= a.v[k];
        } else {
          for (size_t k = 0; k < n; ++k)
            m[k] = a.v[k] &
                   static_cast<uint8_t>(std::binary_search(values.begin(), values.end(), x[k]));
        }
      };
      if (StorageOf(T(ins.a)) == Storage::kF64)
        run(a.f, set.doubles);
      else
        run(a.i, set.ints);
      return;
    }
    case Storage::kMask:
    case Storage::kVec: return;  // never: `in` takes no vectors
  }
}

void Runner::Regex(const Instr& ins) {
  const size_t n = Len(ins.out);
  uint8_t* m = MaskOut(ins.out);
  const Slot& a = S(ins.a);
  const RE2& re = *p_.regexes[ins.aux];
  const auto& dict = a.dict->values;
  // Memo per dictionary entry, filled on demand and kept for the run's later blocks:
  // at most min(rows, entries) matches per run.
  std::vector<int8_t>& memo = Memo(a.dict).table;
  if (memo.size() != dict.size()) memo.assign(dict.size(), -1);
  for (size_t k = 0; k < n; ++k) {
    if (!a.v[k]) {
      m[k] = 0;
      continue;
    }
    int8_t& r = memo[a.c[k]];
    if (r < 0) {
      r = RE2::PartialMatch(dict[a.c[k]], re) ? 1 : 0;
      if (Spent(kRegexMatchWork)) return;  // Run sees stop_
    }
    m[k] = static_cast<uint8_t>(r);
  }
}

}  // namespace

void Frame::Release() {
  for (Slot& s : slots) {
    s.dict.reset();
    ReleaseIfHuge(s.own_i);
    ReleaseIfHuge(s.own_f);
    ReleaseIfHuge(s.own_c);
    ReleaseIfHuge(s.own_m);
    ReleaseIfHuge(s.own_v);
    ReleaseIfHuge(s.own_vf);
  }
  ReleaseIfHuge(ones);
  memo.clear();  // holds dictionaries of the last run
}

bool RunProgram(const Program& p, const RowSet& in, const ParamValues& params, Frame& f,
                const CancelCheck& cancelled, const BlockSink& sink) {
  return Runner(p, in, params, f, cancelled).Run(sink);
}

}  // namespace rankd::expr
