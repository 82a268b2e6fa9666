// Reading an ONNX model file (an MLP exported by torch.onnx.export) into plain structs
// with the ONNX protobuf classes (libonnx-dev), and compiling those into a Network
// (network.h). The reader rejects what is not a static graph of opset 11-17 (external
// data, subgraphs, unknown tensor types); the compiler rejects every operator, shape or
// weight rankd does not evaluate. Each rejection is Error::BadRequest naming the file
// and, where there is one, the node and its operator: "FILE: node 'n3' (Softmax): ...".
//
// Threads: any thread (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "model/network.h"

namespace rankd {

// A constant tensor (an initializer, or a Constant node's value).
struct OnnxTensor {
  std::vector<int64_t> dims;
  bool is_float = true;  // float32 values in f; else int64 values in i
  std::vector<float> f;
  std::vector<int64_t> i;
};

struct OnnxAttr {
  std::string name;
  enum class Type : uint8_t { kFloat, kInt, kFloats, kInts, kTensor, kOther } type = Type::kOther;
  float f = 0;
  int64_t i = 0;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  OnnxTensor tensor;
};

struct OnnxNode {
  std::string name;  // the node's name, or "#k" (its position) when it has none
  std::string op;    // op_type, prefixed "domain." outside the default domain
  std::vector<std::string> inputs, outputs;  // "" for an omitted optional input
  std::vector<OnnxAttr> attrs;
  const OnnxAttr* Attr(std::string_view attr_name) const {
    for (const OnnxAttr& a : attrs)
      if (a.name == attr_name) return &a;
    return nullptr;
  }
};

// A graph input: float32 or int64, its dimensions (-1 where symbolic or absent).
struct OnnxValueInfo {
  std::string name;
  bool is_float = true;
  std::vector<int64_t> dims;
};

struct OnnxGraph {
  int64_t opset = 0;                  // of the default domain
  std::vector<OnnxValueInfo> inputs;  // without those an initializer gives
  std::vector<OnnxValueInfo> outputs;
  std::vector<std::pair<std::string, OnnxTensor>> initializers;
  std::vector<OnnxNode> nodes;  // as stored (the compiler orders them)
};

// Parses the bytes of an .onnx file. Rejections: "FILE: WHAT".
Result<OnnxGraph> ReadOnnx(std::string_view bytes, const std::string& file);

// Checks and compiles a graph. `max_values`: a bound on the floats a row's values take
// together (the scoring arena is this times kBlockRows).
Result<Network> CompileOnnx(const OnnxGraph& graph, const std::string& file,
                            size_t max_values = size_t{1} << 18);

}  // namespace rankd
