// The neural scorer below the ONNX reader: the dense kernel's fixed summation order at
// both dispatch levels, and networks built from ONNX bytes made here with the protobuf
// classes (a Gemm-ReLU-Gemm-Sigmoid MLP, an embedding Gather) scored against sums written
// out by hand. tests/model/test_onnx_equality.py checks torch's exports and the load
// errors.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/dense_kernel.h"
#include "model/model.h"

namespace rankd {
namespace {

TEST_CASE("dense kernel: every level sums in one order, the order written out here") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (size_t k : {1, 3, 17, 64}) {
    for (size_t m : {1, 4, 6, 33}) {
      std::vector<float> x(k * kBlockRows), w(m * k), bias(m);
      for (float& v : x) v = normal(rng);
      for (float& v : w) v = normal(rng);
      for (float& v : bias) v = normal(rng);
      std::vector<float> packed(PackedDenseSize(m, k));
      PackDense(w.data(), m, k, packed.data());
      std::vector<float> base(m * kBlockRows), avx2(m * kBlockRows);
      DenseBlock(DispatchLevel::kBaseline, x.data(), k, packed.data(), bias.data(), m, kBlockRows,
                 base.data());
      DenseBlock(DispatchLevel::kAvx2, x.data(), k, packed.data(), bias.data(), m, kBlockRows,
                 avx2.data());
      CHECK(std::memcmp(base.data(), avx2.data(), base.size() * sizeof(float)) == 0);
      for (size_t o = 0; o < m; ++o)
        for (size_t r = 0; r < kBlockRows; ++r) {
          float acc = 0;
          for (size_t i = 0; i < k; ++i) acc += w[o * k + i] * x[i * kBlockRows + r];
          acc += bias[o];
          REQUIRE(std::memcmp(&acc, &base[o * kBlockRows + r], sizeof acc) == 0);
        }
    }
  }
}

onnx::TensorProto Floats(const std::string& name, std::vector<int64_t> dims,
                         const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

void Input(onnx::ValueInfoProto* v, const std::string& name, int type, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  for (int64_t d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (d < 0)
      dim->set_dim_param("N");
    else
      dim->set_dim_value(d);
  }
}

onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                      const std::string& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

std::string Bytes(onnx::ModelProto& m) {
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(13);
  return m.SerializeAsString();
}

TEST_CASE("an MLP: Gemm, Relu, Gemm, Sigmoid, against the sums by hand; missing inputs are NaN") {
  onnx::ModelProto m;
  auto* g = m.mutable_graph();
  Input(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 3});
  Input(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, 1});
  const std::vector<float> w1 = {0.5f, -1, 2, 1, 1, -0.25f}, b1 = {0.1f, -0.2f};
  const std::vector<float> w2 = {1.5f, -0.75f}, b2 = {0.3f};
  *g->add_initializer() = Floats("W1", {2, 3}, w1);
  *g->add_initializer() = Floats("B1", {2}, b1);
  *g->add_initializer() = Floats("W2", {1, 2}, w2);
  *g->add_initializer() = Floats("B2", {1}, b2);
  auto* fc1 = Node(g, "Gemm", {"x", "W1", "B1"}, "h");
  auto* attr = fc1->add_attribute();
  attr->set_name("transB");
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(1);
  Node(g, "Relu", {"h"}, "r");
  *Node(g, "Gemm", {"r", "W2", "B2"}, "z")->add_attribute() = *attr;
  Node(g, "Sigmoid", {"z"}, "y");
  Result<ModelPtr> model = ParseModel(Bytes(m), "mlp", "mlp.onnx", {});
  REQUIRE_MESSAGE(model, model.error().message);
  const Model& mlp = **model;
  CHECK(mlp.is_network());
  CHECK(mlp.features() == std::vector<std::string>{"x[0]", "x[1]", "x[2]"});
  // Gemm-Relu fused, Gemm-Sigmoid fused: two steps.
  CHECK(mlp.network().steps().size() == 2);
  const size_t n = 100;
  std::vector<std::vector<float>> cols(3, std::vector<float>(n));
  for (size_t r = 0; r < n; ++r)
    for (size_t f = 0; f < 3; ++f) cols[f][r] = std::sin(0.1f * float(r * 3 + f + 1)) * 3;
  cols[1][17] = NAN;
  cols[2][70] = INFINITY;
  std::vector<const float*> ptrs = {cols[0].data(), cols[1].data(), cols[2].data()};
  std::vector<double> out(n);
  mlp.Score(ptrs, n, ModelOutput::kDefault, out.data());
  for (size_t r = 0; r < n; ++r) {
    if (r == 17 || r == 70) {
      CHECK(std::isnan(out[r]));
      continue;
    }
    double z = b2[0];
    for (size_t o = 0; o < 2; ++o) {
      double h = b1[o];
      for (size_t i = 0; i < 3; ++i) h += double(w1[o * 3 + i]) * cols[i][r];
      z += w2[o] * std::max(h, 0.0);
    }
    CHECK(out[r] == doctest::Approx(1 / (1 + std::exp(-z))).epsilon(1e-6));
  }
  // Both levels: the same bits.
  std::vector<float> base(n), avx2(n);
  mlp.network().Score(ptrs, n, DispatchLevel::kBaseline, base.data());
  mlp.network().Score(ptrs, n, DispatchLevel::kAvx2, avx2.data());
  CHECK(std::memcmp(base.data(), avx2.data(), n * sizeof(float)) == 0);
}

TEST_CASE("an embedding Gather by an int64 input: a row number out of the table is NaN") {
  onnx::ModelProto m;
  auto* g = m.mutable_graph();
  Input(g->add_input(), "ids", onnx::TensorProto::INT64, {-1});
  Input(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, 1});
  *g->add_initializer() = Floats("T", {3, 2}, {1, 2, 3, 4, 5, 6});
  *g->add_initializer() = Floats("W", {2, 1}, {10, 1});
  Node(g, "Gather", {"T", "ids"}, "e");
  Node(g, "MatMul", {"e", "W"}, "y");
  Result<ModelPtr> model = ParseModel(Bytes(m), "emb", "emb.onnx", {});
  REQUIRE_MESSAGE(model, model.error().message);
  CHECK((*model)->features() == std::vector<std::string>{"ids"});
  const std::vector<float> ids = {0, 1, 2, 3, -1, 1.5f, NAN};
  const float* p = ids.data();
  std::vector<double> out(ids.size());
  (*model)->Score({&p, 1}, ids.size(), ModelOutput::kDefault, out.data());
  CHECK(out[0] == 12);
  CHECK(out[1] == 34);
  CHECK(out[2] == 56);
  for (size_t r = 3; r < ids.size(); ++r) CHECK(std::isnan(out[r]));
}

TEST_CASE("load errors name the file, the node and the operator") {
  onnx::ModelProto m;
  auto* g = m.mutable_graph();
  Input(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 2});
  Input(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, 1});
  Node(g, "Softmax", {"x"}, "y");
  Result<ModelPtr> model = ParseModel(Bytes(m), "bad", "plans/bad.onnx", {});
  REQUIRE(!model);
  CHECK(model.error().message.starts_with(
      "plans/bad.onnx: node 'Softmax_y' (Softmax): operator not supported"));
  Result<ModelPtr> cut = ParseModel(Bytes(m).substr(0, 20), "bad", "plans/bad.onnx", {});
  REQUIRE(!cut);
  CHECK(cut.error().message.find("truncated or malformed") != std::string::npos);
}

}  // namespace
}  // namespace rankd
