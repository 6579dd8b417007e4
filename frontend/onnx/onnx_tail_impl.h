#pragma once
// Internal to frontend/onnx/: what a data-dependent tail holds (onnx_tail.h). The importer fills
// it (Importer::to_tail); onnx_tail.cpp evaluates it.

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_constants.h"
#include "frontend/onnx/onnx_tail.h"

namespace stagecraft::graph {

struct OnnxTail::Impl {
  std::string source;  // the model, for messages
  int64_t opset = 0;
  std::vector<onnx::NodeProto> nodes;  // in the model's order
  // The constants the nodes read (initializers, Constant nodes, folded values), decoded.
  std::map<std::string, onnx_import::ConstTensor> constants;
  // A graph value the tail reads: its ONNX name, graph output index and ONNX element type.
  struct Boundary {
    std::string name;
    size_t graph_output = 0;
    int32_t onnx_type = onnx::TensorProto::FLOAT;
  };
  std::vector<Boundary> boundary;
  // Each model output: a graph output (index) or a value the tail computes (by name).
  struct Output {
    std::string name;
    std::optional<size_t> graph_output;
  };
  std::vector<Output> outputs;
  std::vector<DeclaredOutput> declared;
};

}  // namespace stagecraft::graph
