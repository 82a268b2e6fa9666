// CompileExpr / CompilePred (expr.h): a compiled Program wrapped as CompiledExpr or
// CompiledPred, and the conversion of the VM's dense result back into row-set form
// (a physical-length column, or a selection vector).
#include "plan/expr.h"

#include <simdjson.h>

#include <cstring>

#include "plan/expr_program.h"

namespace rankd {
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

// Scatters the dense result (logical rows, or one broadcast value) into a column of
// in.physical_rows() rows; rows outside the selection are null.
template <class T, class Src>
void Scatter(const RowSet& in, const Slot& s, bool scalar, const Src* src, std::vector<T>& dst,
             Validity& validity) {
  const size_t n = in.size(), rows = in.physical_rows();
  const std::vector<uint32_t>* sel = in.selection();
  dst.assign(rows, T{});
  std::vector<uint64_t> words((rows + 63) / 64, 0);
  size_t valid = 0;
  for (size_t k = 0; k < n; ++k) {
    size_t i = scalar ? 0 : k;
    uint32_t r = sel ? (*sel)[k] : static_cast<uint32_t>(k);
    uint8_t v = s.v[i];
    dst[r] = v ? static_cast<T>(src[i]) : T{};
    words[r >> 6] |= uint64_t{v} << (r & 63);
    valid += v;
  }
  if (valid != rows) validity.mutable_words() = std::move(words);
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

  Column Evaluate(const RowSet& in, const ParamValues& params) const override {
    FrameLease lease;
    Frame& f = lease.frame();
    expr::RunProgram(p_, in, params, f);
    const Slot& s = f.slots[p_.slot_of[p_.result]];
    bool scalar = p_.regs[p_.result].scalar;
    Column c;
    c.type = type();
    switch (c.type) {
      case ColumnType::kI64: Scatter(in, s, scalar, s.i, c.i64, c.validity); break;
      case ColumnType::kF64: Scatter(in, s, scalar, s.f, c.f64, c.validity); break;
      case ColumnType::kBool: Scatter(in, s, scalar, s.i, c.b, c.validity); break;
      case ColumnType::kStr:
        Scatter(in, s, scalar, s.c, c.str_code, c.validity);
        c.dict = s.dict;
        // Null rows carry code 0, which must exist.
        if (!c.dict || c.dict->values.empty())
          c.dict = std::make_shared<StringDict>(StringDict{{std::string()}});
        break;
    }
    return c;
  }

 private:
  Program p_;
};

class ProgramPred final : public CompiledPred {
 public:
  explicit ProgramPred(Program p) : p_(std::move(p)) {}

  std::vector<uint32_t> Select(const RowSet& in, const ParamValues& params) const override {
    FrameLease lease;
    Frame& f = lease.frame();
    expr::RunProgram(p_, in, params, f);
    const uint8_t* m = f.slots[p_.slot_of[p_.result]].m;
    const size_t n = in.size();
    if (p_.regs[p_.result].scalar) {
      if (m[0] && n) return in.LogicalRows();
      return {};
    }
    // Branch-free compaction: write every row, advance only past kept ones.
    std::vector<uint32_t> out(n);
    size_t kept = 0;
    if (const std::vector<uint32_t>* sel = in.selection()) {
      const uint32_t* rows = sel->data();
      for (size_t k = 0; k < n; ++k) {
        out[kept] = rows[k];
        kept += m[k];
      }
    } else {
      for (size_t k = 0; k < n; ++k) {
        out[kept] = static_cast<uint32_t>(k);
        kept += m[k];
      }
    }
    out.resize(kept);
    return out;
  }

 private:
  Program p_;
};

}  // namespace

Result<std::shared_ptr<const CompiledExpr>> CompileExpr(const simdjson::dom::element& json,
                                                        const ColumnTypes& cols,
                                                        const ParamDecls& params,
                                                        std::string_view where) {
  Result<Program> p = expr::CompileProgram(json, false, cols, params, where);
  if (!p) return Fail(std::move(p.error()));
  return std::make_shared<const ProgramExpr>(std::move(*p));
}

Result<std::shared_ptr<const CompiledPred>> CompilePred(const simdjson::dom::element& json,
                                                        const ColumnTypes& cols,
                                                        const ParamDecls& params,
                                                        std::string_view where) {
  Result<Program> p = expr::CompileProgram(json, true, cols, params, where);
  if (!p) return Fail(std::move(p.error()));
  return std::make_shared<const ProgramPred>(std::move(*p));
}

}  // namespace rankd
