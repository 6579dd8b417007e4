#pragma once
/// The data-dependent tail of an ONNX model. NonZero and NonMaxSuppression give tensors whose
/// shapes depend on the values they read; a plan allocates every tensor before a run, so it cannot
/// hold them. The importer keeps such nodes, and every node that reads what they give, as ONNX
/// nodes: the tail. The graph values the tail reads become graph outputs, and after each run the
/// tail evaluates its nodes on the host with ONNX's semantics (the importer's constant folder, in
/// double precision), giving the model's outputs. Ultralytics' `nms=True` exports end this way:
/// NonZero keeps the boxes above the confidence threshold, NonMaxSuppression the best of those,
/// and a Pad brings them back to 300 rows.
///
/// Example:
///   OnnxModel m = import_onnx("yolo11n_nms.onnx", {});
///   if (m.tail) outputs = m.tail->outputs(graph_output_dims, graph_output_values);

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace stagecraft::graph {

/// One output of a model as a run gives it: row-major elements of any rank (a dimension may be 0;
/// integer and boolean outputs hold their values, exact below 2^24).
struct ModelOutput {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<float> data;
};

/// An output as the model declares it: its name, ONNX element type and dimensions (-1 where the
/// model leaves one symbolic or the data decides it).
struct DeclaredOutput {
  std::string name;
  int32_t onnx_type = 1;  ///< TensorProto::DataType (1: FLOAT)
  std::vector<int64_t> dims;
};

/// The nodes of a model evaluated on the host after its plan; see the file comment.
class OnnxTail {
 public:
  struct Impl;  // frontend/onnx/onnx_tail_impl.h
  explicit OnnxTail(std::shared_ptr<const Impl> impl);

  /// The model's outputs of one run from the graph's: `values[i]` holds the row-major elements of
  /// graph output i (Graph::outputs() order) and `dims[i]` its dimensions. Throws ShapeError
  /// naming the node where the data makes a node invalid (a Reshape that no longer fits).
  /// With `owned` (the buffers `values` view, one per graph output), a model output that is a
  /// graph output as it is takes its buffer (moved) instead of a copy.
  std::vector<ModelOutput> outputs(const std::vector<std::vector<int64_t>>& dims,
                                   const std::vector<std::span<const float>>& values,
                                   std::vector<std::vector<float>>* owned = nullptr) const;
  /// The model's outputs as it declares them, in order.
  const std::vector<DeclaredOutput>& declared() const;
  /// One line for reports: how many nodes, which op types, e.g. "24 ONNX nodes on the host after
  /// the plan (NonZero, NonMaxSuppression, GatherND, ...)".
  std::string summary() const;
  /// The number of nodes.
  size_t size() const;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace stagecraft::graph
