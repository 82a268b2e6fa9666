// ReadOnnx (onnx_graph.h): the protobuf half. Only this file includes the ONNX classes.
#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h

#include <cstring>

#include "model/onnx_graph.h"

namespace rankd {
namespace {

constexpr int64_t kMinOpset = 11, kMaxOpset = 17;
// Dimensions past this make a tensor's element count overflow-prone; no MLP has them.
constexpr int64_t kMaxDim = int64_t{1} << 32;

class OnnxReader {
 public:
  explicit OnnxReader(const std::string& file) : file_(file) {}

  std::unexpected<Error> Bad(const std::string& what) const {
    return Fail(Error::BadRequest(file_ + ": " + what));
  }

  // A tensor's values, from raw_data (little-endian) or the typed fields.
  Result<OnnxTensor> Tensor(const onnx::TensorProto& t, const std::string& where) const {
    OnnxTensor out;
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
      return Bad(where + ": the tensor's data is in an external file, which rankd does not read");
    size_t count = 1;
    for (int64_t d : t.dims()) {
      if (d < 0 || d > kMaxDim)
        return Bad(where + ": dimension " + std::to_string(d) + " is out of range");
      out.dims.push_back(d);
      if (d != 0 && count > (size_t{1} << 40) / static_cast<size_t>(d))
        return Bad(where + ": the tensor is too large");
      count *= static_cast<size_t>(d);
    }
    const std::string& raw = t.raw_data();
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT:
        out.is_float = true;
        if (t.has_raw_data()) {
          if (raw.size() != count * sizeof(float))
            return Bad(where + ": raw_data holds " + std::to_string(raw.size()) + " bytes, its " +
                       std::to_string(count) + " floats need " + std::to_string(count * 4));
          out.f.resize(count);
          std::memcpy(out.f.data(), raw.data(), raw.size());
        } else {
          if (static_cast<size_t>(t.float_data_size()) != count)
            return Bad(where + ": float_data holds " + std::to_string(t.float_data_size()) +
                       " values, its shape " + std::to_string(count));
          out.f.assign(t.float_data().begin(), t.float_data().end());
        }
        return out;
      case onnx::TensorProto::INT64:
        out.is_float = false;
        if (t.has_raw_data()) {
          if (raw.size() != count * sizeof(int64_t))
            return Bad(where + ": raw_data holds " + std::to_string(raw.size()) + " bytes, its " +
                       std::to_string(count) + " int64 values need " + std::to_string(count * 8));
          out.i.resize(count);
          std::memcpy(out.i.data(), raw.data(), raw.size());
        } else {
          if (static_cast<size_t>(t.int64_data_size()) != count)
            return Bad(where + ": int64_data holds " + std::to_string(t.int64_data_size()) +
                       " values, its shape " + std::to_string(count));
          out.i.assign(t.int64_data().begin(), t.int64_data().end());
        }
        return out;
      default:
        return Bad(where + ": tensor type " + std::to_string(t.data_type()) +
                   " is not supported (float32 weights and int64 shapes only)");
    }
  }

  Result<OnnxValueInfo> Value(const onnx::ValueInfoProto& v, const std::string& where) const {
    OnnxValueInfo out;
    out.name = v.name();
    if (!v.type().has_tensor_type()) return Bad(where + " '" + v.name() + "': not a tensor");
    const auto& tt = v.type().tensor_type();
    if (tt.elem_type() == onnx::TensorProto::FLOAT)
      out.is_float = true;
    else if (tt.elem_type() == onnx::TensorProto::INT64)
      out.is_float = false;
    else
      return Bad(where + " '" + v.name() + "': element type " + std::to_string(tt.elem_type()) +
                 " is not supported (float32 or int64)");
    if (!tt.has_shape())
      return Bad(where + " '" + v.name() + "': no shape (a static shape is needed)");
    for (const auto& d : tt.shape().dim())
      out.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    return out;
  }

  Result<OnnxNode> Node(const onnx::NodeProto& n, size_t k) const {
    OnnxNode out;
    out.name = n.name().empty() ? "#" + std::to_string(k) : n.name();
    const std::string& domain = n.domain();
    out.op = domain.empty() || domain == "ai.onnx" ? n.op_type() : domain + "." + n.op_type();
    out.inputs.assign(n.input().begin(), n.input().end());
    out.outputs.assign(n.output().begin(), n.output().end());
    const std::string where = "node '" + out.name + "' (" + out.op + ")";
    for (const auto& a : n.attribute()) {
      OnnxAttr& attr = out.attrs.emplace_back();
      attr.name = a.name();
      switch (a.type()) {
        case onnx::AttributeProto::FLOAT: attr.type = OnnxAttr::Type::kFloat, attr.f = a.f(); break;
        case onnx::AttributeProto::INT: attr.type = OnnxAttr::Type::kInt, attr.i = a.i(); break;
        case onnx::AttributeProto::FLOATS:
          attr.type = OnnxAttr::Type::kFloats;
          attr.floats.assign(a.floats().begin(), a.floats().end());
          break;
        case onnx::AttributeProto::INTS:
          attr.type = OnnxAttr::Type::kInts;
          attr.ints.assign(a.ints().begin(), a.ints().end());
          break;
        case onnx::AttributeProto::TENSOR: {
          auto t = Tensor(a.t(), where + ": attribute " + a.name());
          if (!t) return Fail(t.error());
          attr.type = OnnxAttr::Type::kTensor;
          attr.tensor = std::move(*t);
          break;
        }
        case onnx::AttributeProto::GRAPH:
        case onnx::AttributeProto::GRAPHS:
          return Bad(where + ": attribute " + a.name() +
                     " holds a subgraph, which rankd does not run");
        default: attr.type = OnnxAttr::Type::kOther; break;
      }
    }
    return out;
  }

 private:
  const std::string& file_;
};

}  // namespace

Result<OnnxGraph> ReadOnnx(std::string_view bytes, const std::string& file) {
  OnnxReader read(file);
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    return read.Bad("the file is too large for a protobuf message");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return read.Bad("not an ONNX model (the protobuf does not parse: truncated or malformed)");
  if (!model.has_graph()) return read.Bad("not an ONNX model (it has no graph)");
  OnnxGraph g;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") g.opset = o.version();
  if (g.opset < kMinOpset || g.opset > kMaxOpset)
    return read.Bad("opset_import: opset " + std::to_string(g.opset) +
                    " of the default domain is not supported (" + std::to_string(kMinOpset) +
                    " to " + std::to_string(kMaxOpset) + ")");
  const onnx::GraphProto& graph = model.graph();
  for (const auto& t : graph.initializer()) {
    auto tensor = read.Tensor(t, "initializer '" + t.name() + "'");
    if (!tensor) return Fail(tensor.error());
    g.initializers.emplace_back(t.name(), std::move(*tensor));
  }
  if (graph.sparse_initializer_size() > 0) return read.Bad("sparse initializers are not supported");
  for (const auto& v : graph.input()) {
    bool constant = false;
    for (const auto& [name, t] : g.initializers) constant |= name == v.name();
    if (constant) continue;  // older exporters list initializers as inputs too
    auto value = read.Value(v, "input");
    if (!value) return Fail(value.error());
    g.inputs.push_back(std::move(*value));
  }
  for (const auto& v : graph.output()) {
    auto value = read.Value(v, "output");
    if (!value) return Fail(value.error());
    g.outputs.push_back(std::move(*value));
  }
  for (int k = 0; k < graph.node_size(); ++k) {
    auto node = read.Node(graph.node(k), static_cast<size_t>(k));
    if (!node) return Fail(node.error());
    g.nodes.push_back(std::move(*node));
  }
  return g;
}

}  // namespace rankd
