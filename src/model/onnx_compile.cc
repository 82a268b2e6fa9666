// CompileOnnx (onnx_graph.h): an OnnxGraph checked node by node, in dependency order,
// into a Network's steps; then adjacent affine steps and activations fused into the
// dense layers around them, and the dense weights packed.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <unordered_map>

#include "model/onnx_graph.h"

namespace rankd {
namespace {

// A Gather table's row numbers travel as float32, exact up to 2^24.
constexpr int64_t kMaxTableRows = int64_t{1} << 24;

std::string ShapeText(const std::vector<int64_t>& dims, bool batch) {
  std::string out = "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d) out += ", ";
    out += batch && d == 0 ? "N" : std::to_string(dims[d]);
  }
  return out + "]";
}

// What a name stands for: a constant tensor, or a computed value [N, ...].
struct Val {
  const OnnxTensor* constant = nullptr;
  uint32_t id = 0;            // computed: the value id
  bool index = false;         // computed from an int64 input: only Gather reads it
  std::vector<int64_t> dims;  // computed: dims[0] is the batch
  size_t Width() const {
    size_t w = 1;
    for (size_t d = 1; d < dims.size(); ++d) w *= static_cast<size_t>(dims[d]);
    return w;
  }
};

// A step while compiling: dense weights still row-major [out][in].
struct Draft {
  NetStep step;
  bool dead = false;
};

class Compiler {
 public:
  Compiler(const OnnxGraph& g, const std::string& file, size_t max_values)
      : g_(g), file_(file), max_values_(max_values) {}

  Result<Network> Run() {
    if (auto s = Inputs(); !s) return Fail(s.error());
    for (const auto& [name, t] : g_.initializers) {
      Val v;
      v.constant = &t;
      vals_[name] = std::move(v);
    }
    auto order = Order();
    if (!order) return Fail(order.error());
    for (size_t k : *order)
      if (auto s = Node(g_.nodes[k]); !s) return Fail(s.error());
    if (g_.outputs.size() != 1)
      return Bad("the graph has " + std::to_string(g_.outputs.size()) + " outputs (one is needed)");
    const std::string& out_name = g_.outputs[0].name;
    auto it = vals_.find(out_name);
    if (it == vals_.end()) return Bad("output '" + out_name + "' is not computed by any node");
    const Val& out = it->second;
    if (out.constant || out.index || out.Width() != 1 || out.dims.size() > 2)
      return Bad("output '" + out_name + "' is " +
                 (out.constant ? std::string("a constant")
                               : ShapeText(out.dims, true) + (out.index ? " int64" : "")) +
                 " (a float32 [N] or [N, 1] is needed)");
    Fuse(out.id);
    std::vector<NetStep> steps;
    for (Draft& d : drafts_) {
      if (d.dead) continue;
      if (d.step.kind == NetStep::Kind::kDense) {
        const size_t m = widths_[d.step.out], k = widths_[d.step.in[0]];
        std::vector<float> packed(PackedDenseSize(m, k));
        PackDense(d.step.w.data(), m, k, packed.data());
        d.step.w = std::move(packed);
      }
      steps.push_back(std::move(d.step));
    }
    return Network(std::move(inputs_), std::move(widths_), std::move(steps), out.id);
  }

 private:
  std::unexpected<Error> Bad(const std::string& what) const {
    return Fail(Error::BadRequest(file_ + ": " + what));
  }
  std::unexpected<Error> Bad(const OnnxNode& n, const std::string& what) const {
    return Bad("node '" + n.name + "' (" + n.op + "): " + what);
  }

  Result<uint32_t> NewValue(const OnnxNode* n, size_t width) {
    values_total_ += width;
    if (width == 0 || values_total_ > max_values_) {
      std::string what = width == 0 ? "a tensor with no values a row"
                                    : "the values of a row exceed the limit of " +
                                          std::to_string(max_values_) + " floats";
      return n ? Bad(*n, what) : Bad(what);
    }
    widths_.push_back(static_cast<uint32_t>(width));
    return static_cast<uint32_t>(widths_.size() - 1);
  }

  Status Inputs() {
    for (const OnnxValueInfo& in : g_.inputs) {
      Val v;
      const bool float_input = in.is_float && in.dims.size() == 2 && in.dims[1] > 0;
      const bool index_input = !in.is_float && in.dims.size() == 1;
      if (!float_input && !index_input)
        return Bad("input '" + in.name + "': " + (in.is_float ? "float32 " : "int64 ") +
                   ShapeText(in.dims, false) +
                   " is not supported (float32 [N, F] with a fixed F, or int64 [N])");
      v.index = index_input;
      v.dims = index_input ? std::vector<int64_t>{-1} : std::vector<int64_t>{-1, in.dims[1]};
      auto id = NewValue(nullptr, v.Width());
      if (!id) return Fail(id.error());
      v.id = *id;
      if (in.dims[0] > 0) batch_values_.push_back(in.dims[0]);
      inputs_.push_back({in.name, index_input, static_cast<uint32_t>(v.Width()), v.id});
      if (!vals_.emplace(in.name, std::move(v)).second)
        return Bad("input '" + in.name + "' is listed twice");
    }
    if (inputs_.empty()) return Bad("the graph has no inputs");
    return {};
  }

  // The nodes in an order where each runs after the nodes whose outputs it reads (Kahn's
  // algorithm); a cycle or an undefined input is an error naming a node.
  Result<std::vector<size_t>> Order() {
    std::unordered_map<std::string, size_t> producer;
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& o : g_.nodes[k].outputs) {
        if (o.empty()) continue;
        if (vals_.count(o) || !producer.emplace(o, k).second)
          return Bad(g_.nodes[k], "output '" + o + "' is defined twice");
      }
    std::vector<size_t> pending(g_.nodes.size(), 0);
    std::vector<std::vector<size_t>> readers(g_.nodes.size());
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& in : g_.nodes[k].inputs) {
        if (in.empty() || vals_.count(in)) continue;
        auto p = producer.find(in);
        if (p == producer.end()) return Bad(g_.nodes[k], "input '" + in + "' is not defined");
        ++pending[k];
        readers[p->second].push_back(k);
      }
    std::vector<size_t> order;
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      if (pending[k] == 0) order.push_back(k);
    for (size_t i = 0; i < order.size(); ++i)
      for (size_t r : readers[order[i]])
        if (--pending[r] == 0) order.push_back(r);
    if (order.size() != g_.nodes.size())
      for (size_t k = 0; k < g_.nodes.size(); ++k)
        if (pending[k] > 0) return Bad(g_.nodes[k], "the graph has a cycle through this node");
    return order;
  }

  // --- operands ----------------------------------------------------------------------

  Result<const Val*> In(const OnnxNode& n, size_t i) {
    if (i >= n.inputs.size() || n.inputs[i].empty())
      return Bad(n, "input " + std::to_string(i) + " is missing");
    return &vals_.at(n.inputs[i]);
  }
  bool Has(const OnnxNode& n, size_t i) const {
    return i < n.inputs.size() && !n.inputs[i].empty();
  }

  // A computed float32 value.
  Result<const Val*> Computed(const OnnxNode& n, size_t i) {
    auto v = In(n, i);
    if (!v) return v;
    if ((*v)->constant)
      return Bad(n, "input '" + n.inputs[i] + "' is a constant where a computed tensor is needed");
    if ((*v)->index)
      return Bad(n, "input '" + n.inputs[i] + "' is int64 row numbers: only Gather reads them");
    return v;
  }

  // A constant float32 tensor, every value finite.
  Result<const OnnxTensor*> Weights(const OnnxNode& n, size_t i) {
    auto v = In(n, i);
    if (!v) return Fail(v.error());
    const OnnxTensor* t = (*v)->constant;
    if (!t || !t->is_float)
      return Bad(n, "input '" + n.inputs[i] + "' must be a constant float32 tensor");
    for (size_t e = 0; e < t->f.size(); ++e)
      if (!std::isfinite(t->f[e]))
        return Bad(n, "input '" + n.inputs[i] + "' holds a NaN or infinite value (element " +
                          std::to_string(e) + ")");
    return t;
  }

  Result<const OnnxTensor*> Ints(const OnnxNode& n, size_t i) {
    auto v = In(n, i);
    if (!v) return Fail(v.error());
    const OnnxTensor* t = (*v)->constant;
    if (!t || t->is_float)
      return Bad(n, "input '" + n.inputs[i] + "' must be a constant int64 tensor (a static shape)");
    return t;
  }

  int64_t AttrInt(const OnnxNode& n, std::string_view name, int64_t def) const {
    const OnnxAttr* a = n.Attr(name);
    return a && a->type == OnnxAttr::Type::kInt ? a->i : def;
  }
  float AttrFloat(const OnnxNode& n, std::string_view name, float def) const {
    const OnnxAttr* a = n.Attr(name);
    return a && a->type == OnnxAttr::Type::kFloat ? a->f : def;
  }

  // Names the node's single output (extra optional outputs must be unused).
  Status Define(const OnnxNode& n, Val v) {
    if (n.outputs.empty() || n.outputs[0].empty()) return Bad(n, "the node has no output");
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (!n.outputs[i].empty()) return Bad(n, "only the first output is supported");
    vals_[n.outputs[0]] = std::move(v);
    return {};
  }

  Status Emit(const OnnxNode& n, NetStep step, std::vector<int64_t> dims) {
    Val v;
    v.dims = std::move(dims);
    auto id = NewValue(&n, v.Width());
    if (!id) return Fail(id.error());
    v.id = step.out = *id;
    drafts_.push_back({std::move(step), false});
    return Define(n, std::move(v));
  }

  // --- operators ---------------------------------------------------------------------

  Status Node(const OnnxNode& n) {
    const std::string& op = n.op;
    if (op == "Gemm" || op == "MatMul") return Dense(n);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return Arith(n);
    if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh" || op == "Clip")
      return Activate(n);
    if (op == "Concat") return Concat(n);
    if (op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") return Shape(n);
    if (op == "Identity") {
      auto v = In(n, 0);
      if (!v) return Fail(v.error());
      return Define(n, **v);
    }
    if (op == "Constant") return Constant(n);
    if (op == "BatchNormalization") return BatchNorm(n);
    if (op == "Gather") return Gather(n);
    return Bad(n,
               "operator not supported (rankd runs Gemm, MatMul, Add, Sub, Mul, Div, Relu, "
               "LeakyRelu, Sigmoid, Tanh, Clip, Concat, Flatten, Reshape, Squeeze, "
               "Unsqueeze, Constant, Identity, BatchNormalization, Gather)");
  }

  Status Dense(const OnnxNode& n) {
    const bool gemm = n.op == "Gemm";
    auto a = Computed(n, 0);
    if (!a) return Fail(a.error());
    auto b = Weights(n, 1);
    if (!b) return Fail(b.error());
    const Val& x = **a;
    const OnnxTensor& w = **b;
    if (x.dims.size() != 2)
      return Bad(n, "input A is " + ShapeText(x.dims, true) + " (a [N, K] is needed)");
    if (gemm && AttrInt(n, "transA", 0) != 0) return Bad(n, "transA = 1 is not supported");
    const bool trans_b = gemm && AttrInt(n, "transB", 0) != 0;
    const bool vector_b = !gemm && w.dims.size() == 1;
    if (w.dims.size() != 2 && !vector_b)
      return Bad(n, "input B is " + ShapeText(w.dims, false) + " (a [K, M] matrix is needed)");
    const size_t k = static_cast<size_t>(x.dims[1]);
    const size_t bk = static_cast<size_t>(trans_b ? w.dims[1] : w.dims[0]);
    const size_t m = vector_b ? 1 : static_cast<size_t>(trans_b ? w.dims[0] : w.dims[1]);
    if (bk != k)
      return Bad(n, "mismatched shapes: input A is " + ShapeText(x.dims, true) + ", B is " +
                        ShapeText(w.dims, false) + (trans_b ? " (transposed)" : ""));
    const float alpha = gemm ? AttrFloat(n, "alpha", 1.0f) : 1.0f;
    const float beta = gemm ? AttrFloat(n, "beta", 1.0f) : 1.0f;
    NetStep s;
    s.kind = NetStep::Kind::kDense;
    s.in = {x.id};
    s.w.resize(m * k);
    for (size_t o = 0; o < m; ++o)
      for (size_t i = 0; i < k; ++i)
        s.w[o * k + i] = alpha * (trans_b ? w.f[o * k + i] : w.f[i * m + o]);
    s.b.assign(m, 0.0f);
    if (gemm && Has(n, 2)) {
      auto c = Weights(n, 2);
      if (!c) return Fail(c.error());
      const OnnxTensor& bias = **c;
      const bool row = bias.f.size() == m &&
                       (bias.dims.size() == 1 || (bias.dims.size() == 2 && bias.dims[0] == 1));
      if (!row && bias.f.size() != 1)
        return Bad(n, "input C is " + ShapeText(bias.dims, false) +
                          " (a [M] or [1, M] bias, or a scalar, is needed; M = " +
                          std::to_string(m) + ")");
      for (size_t o = 0; o < m; ++o) s.b[o] = beta * bias.f[row ? o : 0];
    }
    return Emit(
        n, std::move(s),
        vector_b ? std::vector<int64_t>{-1} : std::vector<int64_t>{-1, static_cast<int64_t>(m)});
  }

  // A constant broadcast over a computed value's dimensions (numpy's rule, right-aligned),
  // one number per feature of a row.
  Result<std::vector<float>> PerFeature(const OnnxNode& n, const OnnxTensor& c, const Val& x) {
    const size_t rank = x.dims.size();
    if (c.dims.size() > rank || (c.dims.size() == rank && rank > 0 && c.dims[0] != 1))
      return Bad(n, "mismatched shapes: the constant is " + ShapeText(c.dims, false) +
                        " and the tensor " + ShapeText(x.dims, true) +
                        " (it may not grow the tensor)");
    // The constant's stride along each of x's dims (0 where it broadcasts).
    std::vector<size_t> stride(rank, 0);
    size_t s = 1;
    for (size_t j = 0; j < c.dims.size(); ++j) {
      const size_t cd = c.dims.size() - 1 - j, xd = rank - 1 - j;
      if (c.dims[cd] != 1 && (xd == 0 || c.dims[cd] != x.dims[xd]))
        return Bad(n, "mismatched shapes: the constant " + ShapeText(c.dims, false) +
                          " does not broadcast to " + ShapeText(x.dims, true));
      stride[xd] = c.dims[cd] == 1 ? 0 : s;
      s *= static_cast<size_t>(c.dims[cd]);
    }
    std::vector<float> out(x.Width());
    for (size_t p = 0; p < out.size(); ++p) {
      size_t rest = p, at = 0;
      for (size_t d = rank; d-- > 1;) {
        const size_t dim = static_cast<size_t>(x.dims[d]);
        at += (rest % dim) * stride[d];
        rest /= dim;
      }
      out[p] = c.f[at];
    }
    return out;
  }

  Status Arith(const OnnxNode& n) {
    auto a = In(n, 0), b = In(n, 1);
    if (!a) return Fail(a.error());
    if (!b) return Fail(b.error());
    const bool const_first = (*a)->constant != nullptr;
    if (const_first == ((*b)->constant != nullptr))
      return Bad(n, const_first ? "both operands are constants (fold them before exporting)"
                                : "both operands are computed tensors (one must be a constant)");
    const size_t xi = const_first ? 1 : 0;
    auto x = Computed(n, xi);
    if (!x) return Fail(x.error());
    auto c = Weights(n, 1 - xi);
    if (!c) return Fail(c.error());
    auto per = PerFeature(n, **c, **x);
    if (!per) return Fail(per.error());
    NetStep s;
    s.kind = NetStep::Kind::kAffine;
    s.in = {(*x)->id};
    std::vector<float>& v = *per;
    if (n.op == "Add") {
      s.b = std::move(v);
    } else if (n.op == "Sub") {
      if (const_first) {
        s.w.assign(v.size(), -1.0f);  // c - x = (-x) + c, exactly
        s.b = std::move(v);
      } else {
        for (float& e : v) e = -e;
        s.b = std::move(v);
      }
    } else if (n.op == "Mul") {
      s.w = std::move(v);
    } else {  // Div
      if (const_first) return Bad(n, "dividing a constant by a computed tensor is not supported");
      for (float& e : v) {
        if (e == 0.0f) return Bad(n, "division by a constant zero");
        e = 1.0f / e;
      }
      s.w = std::move(v);
    }
    return Emit(n, std::move(s), (*x)->dims);
  }

  Status Activate(const OnnxNode& n) {
    auto x = Computed(n, 0);
    if (!x) return Fail(x.error());
    NetStep s;
    s.kind = NetStep::Kind::kAffine;
    s.in = {(*x)->id};
    if (n.op == "Relu") s.act.kind = Activation::kRelu;
    if (n.op == "Sigmoid") s.act.kind = Activation::kSigmoid;
    if (n.op == "Tanh") s.act.kind = Activation::kTanh;
    if (n.op == "LeakyRelu") s.act = {Activation::kLeakyRelu, AttrFloat(n, "alpha", 0.01f), 0};
    if (n.op == "Clip") {
      s.act = {Activation::kClip, -std::numeric_limits<float>::infinity(),
               std::numeric_limits<float>::infinity()};
      for (size_t i = 1; i <= 2; ++i) {
        if (!Has(n, i)) continue;
        auto t = Weights(n, i);
        if (!t) return Fail(t.error());
        if ((*t)->f.size() != 1) return Bad(n, "min and max must be scalars");
        (i == 1 ? s.act.a : s.act.b) = (*t)->f[0];
      }
      if (!(s.act.a <= s.act.b)) return Bad(n, "min is above max");
    }
    return Emit(n, std::move(s), (*x)->dims);
  }

  static Result<size_t> Axis(int64_t axis, size_t rank) {
    const int64_t r = static_cast<int64_t>(rank);
    if (axis < -r || axis >= r) return Fail(Error::BadRequest(""));
    return static_cast<size_t>(axis < 0 ? axis + r : axis);
  }

  Status Concat(const OnnxNode& n) {
    if (n.inputs.empty()) return Bad(n, "no inputs");
    auto first = Computed(n, 0);
    if (!first) return Fail(first.error());
    const std::vector<int64_t> dims0 = (*first)->dims;
    auto axis = Axis(AttrInt(n, "axis", 0), dims0.size());
    if (!axis || *axis == 0)
      return Bad(n, "axis " + std::to_string(AttrInt(n, "axis", 0)) +
                        " is not supported (concatenate past the batch dimension)");
    for (size_t d = 1; d < *axis; ++d)
      if (dims0[d] != 1)
        return Bad(n, "concatenating along axis " + std::to_string(*axis) + " of " +
                          ShapeText(dims0, true) + " interleaves rows: not supported");
    NetStep s;
    s.kind = NetStep::Kind::kConcat;
    std::vector<int64_t> dims = dims0;
    dims[*axis] = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      auto v = Computed(n, i);
      if (!v) return Fail(v.error());
      const auto& d = (*v)->dims;
      bool same = d.size() == dims0.size();
      for (size_t j = 1; same && j < d.size(); ++j) same = j == *axis || d[j] == dims0[j];
      if (!same)
        return Bad(n, "mismatched shapes: " + ShapeText(d, true) + " and " +
                          ShapeText(dims0, true) + " along axis " + std::to_string(*axis));
      dims[*axis] += d[*axis];
      s.in.push_back((*v)->id);
    }
    return Emit(n, std::move(s), std::move(dims));
  }

  // Flatten, Reshape, Squeeze, Unsqueeze: a new shape for the same values, row by row.
  Status Shape(const OnnxNode& n) {
    auto in = In(n, 0);
    if (!in) return Fail(in.error());
    if ((*in)->constant) return Bad(n, "reshaping a constant is not supported");
    Val v = **in;
    const std::vector<int64_t>& d = v.dims;
    const int64_t width = static_cast<int64_t>(v.Width());
    std::vector<int64_t> out;
    if (n.op == "Flatten") {
      auto axis = Axis(AttrInt(n, "axis", 1), d.size() + 1);
      if (!axis || *axis != 1) return Bad(n, "only axis 1 is supported (the batch stays apart)");
      out = {-1, width};
    } else if (n.op == "Reshape") {
      if (AttrInt(n, "allowzero", 0) != 0) return Bad(n, "allowzero = 1 is not supported");
      auto shape = Ints(n, 1);
      if (!shape) return Fail(shape.error());
      const std::vector<int64_t>& t = (*shape)->i;
      const bool batch_first = !t.empty() && (t[0] == -1 || t[0] == 0 ||
                                              std::find(batch_values_.begin(), batch_values_.end(),
                                                        t[0]) != batch_values_.end());
      if (!batch_first)
        return Bad(n, "the new shape " + ShapeText(t, false) +
                          " must keep the batch first (-1, 0 or the exported batch size)");
      out = {-1};
      int64_t known = 1;
      int infer = t[0] == -1 ? 1 : 0;
      size_t infer_at = 0;
      for (size_t j = 1; j < t.size(); ++j) {
        int64_t e = t[j] == 0 && j < d.size() ? d[j] : t[j];
        if (e == -1) {
          ++infer;
          infer_at = j;
        } else if (e <= 0) {
          return Bad(
              n, "the new shape " + ShapeText(t, false) + " has dimension " + std::to_string(t[j]));
        } else {
          if (e > width)
            return Bad(n, "mismatched shapes: " + ShapeText(d, true) + " does not reshape to " +
                              ShapeText(t, false));
          known *= e;
          if (known > width) break;
        }
        out.push_back(e);
      }
      if (infer > 1 || (infer == 1 && t[0] == -1 && t.size() > 1 && known != width))
        return Bad(
            n, "the new shape " + ShapeText(t, false) + " leaves the batch or a dimension unknown");
      if (infer == 1 && t[0] != -1) {
        if (known == 0 || width % known != 0)
          return Bad(n, "mismatched shapes: " + ShapeText(d, true) + " does not reshape to " +
                            ShapeText(t, false));
        out[infer_at] = width / known;
        known = width;
      }
      if (known != width)
        return Bad(n, "mismatched shapes: " + ShapeText(d, true) + " does not reshape to " +
                          ShapeText(t, false));
    } else {
      std::vector<int64_t> axes;
      if (const OnnxAttr* a = n.Attr("axes"); a && a->type == OnnxAttr::Type::kInts) axes = a->ints;
      if (Has(n, 1)) {
        auto t = Ints(n, 1);
        if (!t) return Fail(t.error());
        axes = (*t)->i;
      }
      const bool squeeze = n.op == "Squeeze";
      const size_t rank = squeeze ? d.size() : d.size() + axes.size();
      std::vector<bool> at(rank, false);
      for (int64_t a : axes) {
        auto axis = Axis(a, rank);
        if (!axis || *axis == 0 || at[*axis])
          return Bad(n, "axis " + std::to_string(a) +
                            " is not supported (out of range, repeated, or the batch)");
        at[*axis] = true;
      }
      if (squeeze) {
        for (size_t j = 0; j < d.size(); ++j) {
          const bool drop = j > 0 && (axes.empty() ? d[j] == 1 : at[j]);
          if (drop && d[j] != 1)
            return Bad(
                n, "dimension " + std::to_string(j) + " of " + ShapeText(d, true) + " is not 1");
          if (!drop) out.push_back(d[j]);
        }
      } else {
        if (axes.empty()) return Bad(n, "no axes given");
        size_t from = 0;
        for (size_t j = 0; j < rank; ++j) out.push_back(at[j] ? 1 : d[from++]);
      }
    }
    v.dims = std::move(out);
    if (v.index && v.dims.size() != 1) return Bad(n, "an int64 input may only keep the shape [N]");
    return Define(n, std::move(v));
  }

  Status Constant(const OnnxNode& n) {
    OnnxTensor& t = owned_.emplace_back();
    const OnnxAttr* a = n.attrs.size() == 1 ? &n.attrs[0] : nullptr;
    if (!a) return Bad(n, "a Constant needs exactly one attribute");
    if (a->name == "value" && a->type == OnnxAttr::Type::kTensor)
      t = a->tensor;
    else if (a->name == "value_float" && a->type == OnnxAttr::Type::kFloat)
      t.f = {a->f};
    else if (a->name == "value_floats" && a->type == OnnxAttr::Type::kFloats)
      t.f = a->floats, t.dims = {static_cast<int64_t>(a->floats.size())};
    else if (a->name == "value_int" && a->type == OnnxAttr::Type::kInt)
      t.is_float = false, t.i = {a->i};
    else if (a->name == "value_ints" && a->type == OnnxAttr::Type::kInts)
      t.is_float = false, t.i = a->ints, t.dims = {static_cast<int64_t>(a->ints.size())};
    else
      return Bad(n, "attribute '" + a->name + "' is not supported");
    Val v;
    v.constant = &t;
    return Define(n, std::move(v));
  }

  Status BatchNorm(const OnnxNode& n) {
    if (AttrInt(n, "training_mode", 0) != 0) return Bad(n, "training_mode = 1 is not supported");
    auto x = Computed(n, 0);
    if (!x) return Fail(x.error());
    const Val& in = **x;
    if (in.dims.size() < 2)
      return Bad(n, "input X is " + ShapeText(in.dims, true) + " (a [N, C, ...] is needed)");
    const size_t channels = static_cast<size_t>(in.dims[1]);
    const OnnxTensor* p[4];
    for (size_t i = 0; i < 4; ++i) {
      auto t = Weights(n, i + 1);
      if (!t) return Fail(t.error());
      if ((*t)->f.size() != channels)
        return Bad(n, "mismatched shapes: input '" + n.inputs[i + 1] + "' has " +
                          std::to_string((*t)->f.size()) + " values for " +
                          std::to_string(channels) + " channels");
      p[i] = *t;
    }
    const double eps = AttrFloat(n, "epsilon", 1e-5f);
    const size_t inner = in.Width() / channels;
    NetStep s;
    s.kind = NetStep::Kind::kAffine;
    s.in = {in.id};
    s.w.resize(in.Width());
    s.b.resize(in.Width());
    for (size_t c = 0; c < channels; ++c) {
      const double var = p[3]->f[c] + eps;
      if (!(var > 0))
        return Bad(
            n, "the variance of channel " + std::to_string(c) + " plus epsilon is not positive");
      const double scale = p[0]->f[c] / std::sqrt(var);
      const double shift = p[1]->f[c] - p[2]->f[c] * scale;
      for (size_t j = 0; j < inner; ++j) {
        s.w[c * inner + j] = static_cast<float>(scale);
        s.b[c * inner + j] = static_cast<float>(shift);
      }
    }
    return Emit(n, std::move(s), in.dims);
  }

  Status Gather(const OnnxNode& n) {
    auto table = Weights(n, 0);
    if (!table) return Fail(table.error());
    auto idx = In(n, 1);
    if (!idx) return Fail(idx.error());
    if (!(*idx)->index)
      return Bad(n, "the indices must be an int64 input of the graph (an embedding lookup)");
    if (AttrInt(n, "axis", 0) != 0) return Bad(n, "only axis 0 is supported");
    const OnnxTensor& t = **table;
    if (t.dims.size() != 2 || t.dims[0] < 1 || t.dims[0] > kMaxTableRows)
      return Bad(n, "the table is " + ShapeText(t.dims, false) + " (a [rows, D] with 1 to " +
                        std::to_string(kMaxTableRows) + " rows is needed)");
    NetStep s;
    s.kind = NetStep::Kind::kGather;
    s.in = {(*idx)->id};
    s.w = t.f;
    s.table_rows = static_cast<uint32_t>(t.dims[0]);
    return Emit(n, std::move(s), {-1, t.dims[1]});
  }

  // --- fusion ------------------------------------------------------------------------

  // Folds each affine step into the step before it when it alone reads that step's
  // output: into a dense layer (its rows scaled, its bias moved), another affine step, or,
  // for a bare activation, any step without one; and an affine step before a dense layer
  // into that layer's weights (BatchNormalization before Gemm).
  void Fuse(uint32_t output) {
    std::vector<uint32_t> readers(widths_.size(), 0);
    std::vector<int32_t> producer(widths_.size(), -1);
    for (size_t i = 0; i < drafts_.size(); ++i) {
      for (uint32_t v : drafts_[i].step.in) ++readers[v];
      producer[drafts_[i].step.out] = static_cast<int32_t>(i);
    }
    ++readers[output];
    for (size_t i = 0; i < drafts_.size(); ++i) {
      NetStep& s = drafts_[i].step;
      const uint32_t in = s.in[0];
      const int32_t pi = producer[in];
      if (pi < 0 || readers[in] != 1 || drafts_[pi].dead) continue;
      NetStep& p = drafts_[pi].step;
      const bool bare = s.w.empty() && s.b.empty();
      if (s.kind == NetStep::Kind::kAffine && p.act.kind == Activation::kNone &&
          (p.kind == NetStep::Kind::kDense || p.kind == NetStep::Kind::kAffine || bare)) {
        const size_t m = widths_[in];
        if (p.kind == NetStep::Kind::kDense && !bare) {
          const size_t k = widths_[p.in[0]];
          for (size_t o = 0; o < m; ++o) {
            const float scale = s.w.empty() ? 1.0f : s.w[o], shift = s.b.empty() ? 0.0f : s.b[o];
            for (size_t j = 0; j < k; ++j) p.w[o * k + j] *= scale;
            p.b[o] = p.b[o] * scale + shift;
          }
        } else if (p.kind == NetStep::Kind::kAffine && !bare) {
          if (p.w.empty() && !s.w.empty()) p.w.assign(m, 1.0f);
          if (p.b.empty() && !s.b.empty()) p.b.assign(m, 0.0f);
          for (size_t o = 0; o < m; ++o) {
            const float scale = s.w.empty() ? 1.0f : s.w[o], shift = s.b.empty() ? 0.0f : s.b[o];
            if (!p.w.empty()) p.w[o] *= scale;
            if (!p.b.empty()) p.b[o] = p.b[o] * scale + shift;
          }
        }
        p.act = s.act;
        p.out = s.out;
        producer[s.out] = pi;
        drafts_[i].dead = true;
      } else if (s.kind == NetStep::Kind::kDense && p.kind == NetStep::Kind::kAffine &&
                 p.act.kind == Activation::kNone) {
        const size_t m = widths_[s.out], k = widths_[in];
        for (size_t o = 0; o < m; ++o) {
          double bias = s.b[o];
          for (size_t j = 0; j < k; ++j) {
            const float scale = p.w.empty() ? 1.0f : p.w[j], shift = p.b.empty() ? 0.0f : p.b[j];
            bias += double(s.w[o * k + j]) * shift;
            s.w[o * k + j] *= scale;
          }
          s.b[o] = static_cast<float>(bias);
        }
        s.in[0] = p.in[0];
        drafts_[pi].dead = true;
      }
    }
  }

  const OnnxGraph& g_;
  const std::string& file_;
  size_t max_values_;
  size_t values_total_ = 0;
  std::unordered_map<std::string, Val> vals_;
  std::deque<OnnxTensor> owned_;       // Constant nodes' values (stable addresses)
  std::vector<int64_t> batch_values_;  // the inputs' exported batch sizes
  std::vector<NetInput> inputs_;
  std::vector<uint32_t> widths_;
  std::vector<Draft> drafts_;
};

}  // namespace

Result<Network> CompileOnnx(const OnnxGraph& graph, const std::string& file, size_t max_values) {
  return Compiler(graph, file, max_values).Run();
}

}  // namespace rankd
