#pragma once
/// ONNX import and export (opsets 11-17) for CNN classifiers. Import maps nodes to the graph IR and
/// initializers to weights, removes Dropout/Identity, folds a zero Pad into the convolution that
/// reads it, and turns Clip(0, 6) into ReLU6; anything else it cannot represent exactly is a
/// FormatError naming the node, the op and what is unsupported — a model is never half-imported.
/// Export writes a graph and its weights as an opset-13 model checked by the ONNX checker.
///
/// Example:
///   OnnxModel m = import_onnx("resnet50.onnx", {});
///   export_onnx(m.graph, m.weights, "copy.onnx");

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "frontend/onnx/onnx_tail.h"
#include "graph/graph.h"
#include "graph/weights.h"

namespace stagecraft::graph {

/// Import settings.
struct OnnxImportOptions {
  int64_t batch = 0;       ///< batch size (required when the model's is symbolic; 0 = the model's)
  int64_t input_size = 0;  ///< height = width of 4-D inputs (0 = the model's; required when symbolic)
  /// The shapes of the graph inputs in order (empty: none given; an empty entry: that input's
  /// own): they fill the symbolic dimensions of a model exported with dynamic axes, and may change
  /// the batch; every other dimension must be the model's. `batch` and `input_size` take
  /// precedence.
  std::vector<std::vector<int64_t>> input_shapes;
  /// Values of graph inputs fixed at load, by input name: each is imported as if it were an
  /// initializer (the model specialised to these values; a graph input read where a constant is
  /// needed, such as a convolution's weights, is refused with ConstantInputError otherwise).
  struct InputValue {
    std::vector<int64_t> dims;
    std::vector<float> data;
  };
  std::map<std::string, InputValue> constant_inputs;
};

/// An imported model: the graph and its weights.
struct OnnxModel {
  Graph graph;          ///< structure (batch norms kept; run prepare_for_inference to fold)
  WeightStore weights;  ///< initializers by op name
  int64_t opset = 0;    ///< the model's default-domain opset
  /// The nodes evaluated on the host after each run (onnx_tail.h); null when every output is the
  /// graph's. With a tail, the graph's outputs are the model's static outputs followed by the
  /// values the tail reads, and the tail gives the model's outputs.
  std::shared_ptr<const OnnxTail> tail;
};

/// Imports an ONNX file. Throws IoError (unreadable), FormatError (malformed or unsupported).
OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options);

/// The dimensions of the graph inputs (not initializers) of the model file at `path` as it
/// declares them, in order: -1 where a dimension is symbolic (dynamic axes) or unknown. Throws
/// IoError / FormatError like import_onnx.
std::vector<std::vector<int64_t>> onnx_input_dims(const std::string& path);

/// Imports serialized ModelProto bytes; `source` names them in messages.
OnnxModel import_onnx_bytes(const std::string& bytes, const std::string& source,
                            const OnnxImportOptions& options);

/// The graph and weights as serialized ModelProto bytes (opset 13), checked by the ONNX checker;
/// throws FormatError when an op has no ONNX form or weights are missing.
std::string export_onnx_bytes(const Graph& graph, const WeightStore& weights);

/// Writes export_onnx_bytes to a file.
void export_onnx(const Graph& graph, const WeightStore& weights, const std::string& path);

}  // namespace stagecraft::graph
