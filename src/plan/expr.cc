// CompileExpr / CompilePred (expr.h): a compiled Program wrapped as CompiledExpr or
// CompiledPred, and the conversion of the VM's dense result back into row-set form
// (a physical-length column, or a selection vector).
#include "plan/expr.h"

#include <simdjson.h>

#include <bit>
#include <cassert>
#include <cstring>

#include "plan/expr_program.h"

namespace rankd {

std::string TypeText(ColumnType type, uint32_t dim) {
  if (type == ColumnType::kVec) return "vec:" + std::to_string(dim);
  return std::string(ColumnTypeName(type));
}

namespace {

using expr::Frame;
using expr::Program;
using expr::Slot;
using expr::VType;

ColumnType ToColumnType(VType t) {
  switch (t) {
    case VType::kF64: return ColumnType::kF64;
    case VType::kStr: return ColumnType::kStr;
    case VType::kBool: return ColumnType::kBool;
    default: return ColumnType::kI64;
  }
}

// Scatters the dense results of the blocks (logical rows, or one broadcast value) into a
// column of in.physical_rows() rows; rows outside the selection are null.
template <class T>
class Scatter {
 public:
  // scalar: the program's result is one value for every row.
  Scatter(const RowSet& in, PoolVector<T>& dst, bool scalar)
      : sel_(in.selection()),
        scalar_(scalar),
        dense_(!sel_ && !scalar),
        dst_(dst),
        words_((in.physical_rows() + 63) / 64, 0) {
    // Dense blocks write every row, in order: each grows the column by its own rows
    // (zeroed while they are in cache), not the whole column up front.
    if (dense_) {
      dst_.clear();
      dst_.reserve(in.physical_rows());
    } else {
      dst_.assign(in.physical_rows(), T{});
    }
  }
  template <class Src>
  void Block(size_t begin, size_t n, const Slot& s, const Src* src) {
    if (dense_) return Dense(begin, n, s.v, src);
    for (size_t k = 0; k < n; ++k) {
      size_t i = scalar_ ? 0 : k;
      uint32_t r = sel_ ? (*sel_)[begin + k] : static_cast<uint32_t>(begin + k);
      uint8_t v = s.v[i];
      dst_[r] = v ? static_cast<T>(src[i]) : T{};
      words_[r >> 6] |= uint64_t{v} << (r & 63);
      valid_ += v;
    }
  }
  // Block without a selection, of a vector result: rows begin.. in order, begin a multiple
  // of 64 (blocks start at multiples of kBlockRows). Loops without branches that GCC
  // vectorises; the validity bytes are packed 8 at a time by a multiply that gathers the
  // low bit of each byte into the top byte. Measured (ops/bench vm): ~4x faster than the
  // per-row loop above.
  template <class Src>
  void Dense(size_t begin, size_t n, const uint8_t* __restrict v, const Src* __restrict src) {
    assert(dst_.size() == begin);
    dst_.resize(begin + n);
    T* __restrict d = dst_.data() + begin;
    if constexpr (std::is_same_v<T, double> && std::is_same_v<Src, double>) {
      // A bit-select: GCC 12 does not vectorise `?:` on a byte condition over doubles.
      for (size_t k = 0; k < n; ++k) {
        const uint64_t keep = uint64_t{0} - v[k];
        d[k] = std::bit_cast<double>(std::bit_cast<uint64_t>(src[k]) & keep);
      }
    } else {
      for (size_t k = 0; k < n; ++k) d[k] = v[k] ? static_cast<T>(src[k]) : T{};
    }
    size_t valid = 0;
    for (size_t k = 0; k < n; ++k) valid += v[k];
    valid_ += valid;
    uint8_t* bits = reinterpret_cast<uint8_t*>(words_.data()) + begin / 8;
    const size_t whole = n / 8;
    for (size_t j = 0; j < whole; ++j) {
      uint64_t x;
      std::memcpy(&x, v + 8 * j, 8);
      bits[j] = static_cast<uint8_t>(((x & 0x0101010101010101ull) * 0x0102040810204080ull) >> 56);
    }
    for (size_t k = 8 * whole; k < n; ++k) bits[k / 8] |= static_cast<uint8_t>(v[k] << (k % 8));
  }
  void Finish(Validity& validity) {
    if (valid_ != dst_.size()) validity.mutable_words() = std::move(words_);
  }

 private:
  const Selection* sel_;
  const bool scalar_;
  const bool dense_;  // no selection and a vector result: Dense
  PoolVector<T>& dst_;
  PoolVector<uint64_t> words_;
  size_t valid_ = 0;
};

// For each byte of 8 mask bits, the positions of its set bits in order (then zeros) and
// their count: a selection then takes 8 rows a step, writing all 8 candidates and
// advancing past the kept ones, with no per-row dependency on the output count.
struct CompactTable {
  uint8_t pos[256][8];
  uint8_t count[256];
};
constexpr CompactTable MakeCompactTable() {
  CompactTable t{};
  for (int b = 0; b < 256; ++b) {
    int c = 0;
    for (int j = 0; j < 8; ++j)
      if ((b >> j) & 1) t.pos[b][c++] = static_cast<uint8_t>(j);
    t.count[b] = static_cast<uint8_t>(c);
  }
  return t;
}
constexpr CompactTable kCompact = MakeCompactTable();

// Writes the rows k < n whose mask byte m[k] (0/1) is set, in order, to o from w, and
// returns the new end: rows[k] when rows is given, else first + k. o must have room for
// w + n entries (a step writes 8 candidates). Measured (ops/bench vm filter): ~2x faster
// than a per-row `o[w] = row; w += m[k]`.
size_t Compact(const uint8_t* __restrict m, size_t n, const uint32_t* __restrict rows,
               uint32_t first, uint32_t* __restrict o, size_t w) {
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    uint64_t x;
    std::memcpy(&x, m + k, 8);
    const uint8_t bits =
        static_cast<uint8_t>(((x & 0x0101010101010101ull) * 0x0102040810204080ull) >> 56);
    const uint8_t* pos = kCompact.pos[bits];
    if (rows) {
      for (int j = 0; j < 8; ++j) o[w + j] = rows[k + pos[j]];
    } else {
      const uint32_t base = first + static_cast<uint32_t>(k);
      for (int j = 0; j < 8; ++j) o[w + j] = base + pos[j];
    }
    w += kCompact.count[bits];
  }
  for (; k < n; ++k) {
    o[w] = rows ? rows[k] : first + static_cast<uint32_t>(k);
    w += m[k];
  }
  return w;
}

// One frame per thread, reused run after run: a run then allocates only when it needs
// more room than the runs before it (an expression is never evaluated inside another).
// The lease gives it to one run and releases its huge buffers afterwards.
class FrameLease {
 public:
  FrameLease() : f_(ThisThread()) {}
  ~FrameLease() { f_.Release(); }
  FrameLease(const FrameLease&) = delete;
  FrameLease& operator=(const FrameLease&) = delete;
  Frame& frame() { return f_; }

 private:
  static Frame& ThisThread() {
    thread_local Frame frame;
    return frame;
  }
  Frame& f_;
};

class ProgramExpr final : public CompiledExpr {
 public:
  explicit ProgramExpr(Program p) : p_(std::move(p)) {}
  ColumnType type() const override { return ToColumnType(p_.regs[p_.result].type); }

  std::optional<Column> Evaluate(const RowSet& in, const ParamValues& params,
                                 const CancelCheck& cancelled) const override {
    Column c;
    c.type = type();
    bool done = false;
    switch (c.type) {
      case ColumnType::kI64: done = Run(in, params, cancelled, c.i64, c.validity, &Slot::i); break;
      case ColumnType::kF64: done = Run(in, params, cancelled, c.f64, c.validity, &Slot::f); break;
      case ColumnType::kBool: done = Run(in, params, cancelled, c.b, c.validity, &Slot::i); break;
      case ColumnType::kStr:
        done = Run(in, params, cancelled, c.str_code, c.validity, &Slot::c, &c.dict);
        // Null rows carry code 0, which must exist.
        if (!c.dict || c.dict->values.empty())
          c.dict = std::make_shared<StringDict>(StringDict{{std::string()}});
        break;
      case ColumnType::kVec: break;  // never: a result is no vector (CompileProgram)
    }
    if (!done) return std::nullopt;
    return c;
  }

 private:
  // Runs the program into `dst` (and `dict`, for strings), reading each block's result
  // through `field` of the result slot.
  template <class T, class Src>
  bool Run(const RowSet& in, const ParamValues& params, const CancelCheck& cancelled,
           PoolVector<T>& dst, Validity& validity, const Src* Slot::*field,
           std::shared_ptr<const StringDict>* dict = nullptr) const {
    FrameLease lease;
    Scatter<T> out(in, dst, p_.regs[p_.result].scalar);
    bool done = expr::RunProgram(p_, in, params, lease.frame(), cancelled,
                                 [&](size_t begin, size_t n, const Slot& s) {
                                   // Every block's string codes index the same dictionary:
                                   // dictionaries are made once per run (DictMemo).
                                   if (dict) {
                                     assert(!*dict || *dict == s.dict);
                                     *dict = s.dict;
                                   }
                                   out.Block(begin, n, s, s.*field);
                                 });
    if (done) out.Finish(validity);
    return done;
  }

  Program p_;
};

class ProgramPred final : public CompiledPred {
 public:
  explicit ProgramPred(Program p) : p_(std::move(p)) {}

  std::optional<Selection> Select(const RowSet& in, const ParamValues& params,
                                  const CancelCheck& cancelled) const override {
    FrameLease lease;
    const Selection* sel = in.selection();
    const bool scalar = p_.regs[p_.result].scalar;
    Selection out(in.size());
    size_t kept = 0;
    bool done = expr::RunProgram(p_, in, params, lease.frame(), cancelled,
                                 [&](size_t begin, size_t n, const Slot& s) {
                                   // Locals, not the captured vector and count: the loops then keep
                                   // them in registers (measured: 8% of the filter bench).
                                   const uint8_t* m = s.m;
                                   uint32_t* o = out.data();
                                   size_t w = kept;
                                   // Branch-free compaction: write every row (8 a step: Compact),
                                   // advance only past kept ones.
                                   if (sel) {
                                     const uint32_t* rows = sel->data() + begin;
                                     if (scalar)
                                       for (size_t k = 0; k < n; ++k) o[w] = rows[k], w += m[0];
                                     else
                                       w = Compact(m, n, rows, 0, o, w);
                                   } else {
                                     uint32_t row = static_cast<uint32_t>(begin);
                                     if (scalar)
                                       for (size_t k = 0; k < n; ++k)
                                         o[w] = row + static_cast<uint32_t>(k), w += m[0];
                                     else
                                       w = Compact(m, n, nullptr, row, o, w);
                                   }
                                   kept = w;
                                 });
    if (!done) return std::nullopt;
    out.resize(kept);
    return out;
  }

 private:
  Program p_;
};

// A compiled program wrapped as an expression (P = ProgramExpr) or a predicate.
template <class P, class Compiled>
Result<std::shared_ptr<const Compiled>> Wrap(Result<Program> p) {
  if (!p) return Fail(std::move(p.error()));
  return std::make_shared<const P>(std::move(*p));
}

}  // namespace

Result<std::shared_ptr<const CompiledExpr>> CompileExpr(const simdjson::dom::element& json,
                                                        const ColumnTypes& cols,
                                                        const ParamDecls& params,
                                                        std::string_view where,
                                                        const FromResolver& from) {
  return Wrap<ProgramExpr, CompiledExpr>(
      expr::CompileProgram(json, false, cols, params, where, from));
}

Result<std::shared_ptr<const CompiledPred>> CompilePred(const simdjson::dom::element& json,
                                                        const ColumnTypes& cols,
                                                        const ParamDecls& params,
                                                        std::string_view where,
                                                        const FromResolver& from) {
  return Wrap<ProgramPred, CompiledPred>(
      expr::CompileProgram(json, true, cols, params, where, from));
}

}  // namespace rankd
