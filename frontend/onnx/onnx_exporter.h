#pragma once
// Internal to frontend/onnx/: the exporter (export_onnx_bytes). It walks the graph's ops in order and
// writes each as the ONNX nodes that compute it (opset 17), its weights as initializers:
//   onnx_export.cpp               the model, the attribute and initializer helpers, the fused
//                                 activations, and the dispatch by op kind
//   onnx_export_convolutions.cpp  convolutions, batch and local response normalisation, pools,
//                                 resizing, padding, and the channel ops (split, slice, shuffle,
//                                 reshape)
//   onnx_export_tensors.cpp       the element-wise ops (add, binary, where, unary, clip, hard
//                                 sigmoid) and the ops over an axis or of row-major tensors
//                                 (linear, softmax, layer norm, reductions, narrow,
//                                 concat_constant, grid_sample)

#include <onnx/onnx_pb.h>

#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_io.h"

namespace stagecraft::graph::onnx_export {

/// The opset the export writes.
inline constexpr int64_t kExportOpset = 17;

/// Writes one graph and its weights as an ONNX model; see the file comment.
class Exporter {
 public:
  Exporter(const Graph& graph, const WeightStore& weights) : g_(graph), w_(weights) {}

  /// The serialized model, checked by the ONNX checker (FormatError when it does not pass).
  std::string run();

 private:
  using Names = std::vector<std::string>;

  // ---- onnx_export.cpp: the model's parts
  void value_info(onnx::ValueInfoProto* info, ValueId v);
  // A FLOAT initializer of `dims`; returns `name`.
  std::string floats(const std::string& name, const std::vector<float>& data, std::vector<int64_t> dims);
  // A 1-D INT64 initializer; returns `name`.
  std::string int64s(const std::string& name, const std::vector<int64_t>& data);
  onnx::NodeProto* node(const std::string& type, const std::string& name, const Names& inputs,
                        const Names& outputs);
  static void ints(onnx::NodeProto* n, const char* name, std::vector<int64_t> v);
  static void integer(onnx::NodeProto* n, const char* name, int64_t v);
  static void text(onnx::NodeProto* n, const char* name, const std::string& v);
  static void real(onnx::NodeProto* n, const char* name, float v);
  const OpWeights& weights_of(const Op& op);
  // The name an op with a fused activation writes to (the activation becomes its own node).
  static std::string pre_activation(Activation act, const std::string& out);
  // Emits the fused activation after the op's node (nodes must stay topologically sorted).
  void emit_activation(const Op& op, Activation act, const std::string& out);
  // The nodes computing `act` from `in` into `out`.
  void activation(const std::string& name, Activation act, const std::string& in, const std::string& out);
  std::string scalar(const std::string& name, float v);
  // A Cast of `x` to `to` named `name`; returns `name`.
  std::string cast(const std::string& x, const std::string& name, int to);
  std::string clip_bound(float v);
  // The nodes of one op, by its kind (the export_* functions below; `in`: its inputs' names,
  // `out`: its first output's).
  void export_op(const Op& op);

  // ---- onnx_export_convolutions.cpp
  void export_conv(const Op& op, Names in, const std::string& out);
  void export_conv_transpose(const Op& op, Names in, const std::string& out);
  void export_batch_norm(const Op& op, Names in, const std::string& out);
  void export_lrn(const Op& op, const Names& in, const std::string& out);
  void export_pool(const Op& op, const Names& in, const std::string& out);
  void export_pool_nd(const Op& op, const Names& in, const std::string& out);
  // TopK, its indices cast to float (the graph's index tensors); GatherElements of such indices.
  void export_top_k(const Op& op, Names in);
  void export_gather_elements(const Op& op, Names in, const std::string& out);
  void export_resize_nd(const Op& op, Names in, const std::string& out);
  void export_resize(const Op& op, Names in, const std::string& out);
  void export_pad(const Op& op, Names in, const std::string& out);
  void export_split(const Op& op, Names in);
  void export_slice(const Op& op, Names in, const std::string& out);
  void export_channel_shuffle(const Op& op, Names in, const std::string& out);
  void export_reshape(const Op& op, Names in, const std::string& out);

  // ---- onnx_export_tensors.cpp
  void export_add(const Op& op, const Names& in, const std::string& out);
  void export_binary(const Op& op, Names in, const std::string& out);
  void export_where(const Op& op, const Names& in, const std::string& out);
  void export_unary(const Op& op, const Names& in, const std::string& out);
  void export_clip(const Op& op, const Names& in, const std::string& out);
  void export_hard_sigmoid(const Op& op, const Names& in, const std::string& out);
  void export_linear(const Op& op, Names in, const std::string& out);
  void export_softmax(const Op& op, const Names& in, const std::string& out);
  void export_layer_norm(const Op& op, const Names& in, const std::string& out);
  void export_reduce(const Op& op, Names in, const std::string& out);
  void export_narrow(const Op& op, Names in, const std::string& out);
  void export_concat_constant(const Op& op, Names in, const std::string& out);
  void export_grid_sample(const Op& op, const Names& in, const std::string& out);

  const Graph& g_;
  const WeightStore& w_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::set<std::string> clip_;
};

}  // namespace stagecraft::graph::onnx_export
