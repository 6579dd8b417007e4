// The ONNX importer's 1-D and low-rank forms of the convolutions' ops, as their 2-D forms over
// row-major tensors: a Conv1d, AvgPool1d or MaxPool1d of [N, C, L] runs as the 2-D op over
// [N, C, 1, L] (ECA attention's convolution across channels, Next-ViT's token pooling), and the ops
// that read a tensor of another rank than 4 where only the row-major translation knows it (a
// BatchNorm1d of [N, C] in a classifier head, a Softmax of [N, h, T] in lambda layers) take that
// translation.
#include <set>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

std::optional<size_t> Importer::rank_of(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return shape(it->second).rank();
  if (auto v = pending_views_.find(name); v != pending_views_.end()) return v->second.shape.size();
  return std::nullopt;
}

bool Importer::needs_row_major(const onnx::NodeProto& node) const {
  const std::string& t = node.op_type();
  if (node.input_size() == 0) return false;
  const std::optional<size_t> rank = rank_of(node.input(0));
  if (!rank) return false;
  if (t == "BatchNormalization") return *rank != 4;
  if (t == "Conv" || t == "ConvTranspose" || t == "MaxPool" || t == "AveragePool" || t == "Softmax") return *rank == 3;
  if (t == "Expand" || t == "Tile") return true;  // the row-major translation repeats along any axis
  if (t == "Slice") {
    // The row-major translation cuts any axis of any rank; the convolutions' slice cuts C, H, W.
    if (*rank != 4) return true;
    const ConstTensor* axes = node.input_size() > 3 && !node.input(3).empty() ? constant(node, 3) : nullptr;
    if (!axes) return false;
    for (int64_t a : axes->ints()) {
      if (a == 0 || a == -4) return true;
    }
  }
  if (t == "Concat" || t == "Split") {
    // The convolutions' concat and split join and cut the channels of rank-4 tensors; along any
    // other axis or rank, the row-major translation does it.
    int64_t axis = attr_int(node, "axis", t == "Concat" ? 1 : 0);
    if (axis < 0) axis += static_cast<int64_t>(*rank);
    return *rank != 4 || axis != 1;
  }
  return false;
}

bool Importer::reads_loose_view(const onnx::NodeProto& node) const {
  // The op types that take views as they are (reshapes, transposes, gathers of a flat view).
  static const std::set<std::string, std::less<>> kCarry = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                                            "Identity", "Dropout", "Gather"};
  if (kCarry.count(node.op_type())) return false;
  for (const auto& in : node.input()) {
    const auto v = pending_views_.find(in);
    if (v == pending_views_.end()) continue;
    const PendingView& view = v->second;
    const size_t rank = view.shape.size();
    if (rank != 2 && rank != 4 && view.shuffle_groups == 0 && view.space_to_depth == 0 && !view.channels_last) return true;
  }
  return false;
}

void Importer::one_dimensional(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const ValueId x = row_major(node, 0);
  const Shape s = shape(x);  // [N, C, L]
  // The same node over [N, C, 1, L]: a height of 1 in every spatial attribute.
  onnx::NodeProto two = node;
  const std::string in = node.output(0) + "/as_2d_input", out = node.output(0) + "/as_2d";
  values_[in] = reshaped(node, x, {s[0], s[1], 1, s[2]});
  two.set_input(0, in);
  two.set_output(0, out);
  for (auto& a : *two.mutable_attribute()) {
    const std::string& name = a.name();
    if (name == "kernel_shape" || name == "strides" || name == "dilations" || name == "output_padding" ||
        name == "output_shape") {
      if (a.ints_size() != 1) fail(node, cat(name, " must have one value for a 1-D ", t));
      const int64_t v = a.ints(0);
      a.clear_ints();
      a.add_ints(name == "output_padding" ? 0 : 1);
      a.add_ints(v);
    } else if (name == "pads") {
      if (a.ints_size() != 2) fail(node, cat("pads must have two values for a 1-D ", t));
      const int64_t begin = a.ints(0), end = a.ints(1);
      a.clear_ints();
      for (int64_t v : {int64_t{0}, begin, int64_t{0}, end}) a.add_ints(v);
    }
  }
  if (t == "Conv" || t == "ConvTranspose") {  // weights [M, C / group, K] as [M, C / group, 1, K]
    if (!has_input(node, 1) || !constants_.count(node.input(1))) fail_not_constant(node, 1, "the weights must be constant");
    ConstTensor w = constants_.at(node.input(1));
    if (w.dims.size() != 3) fail(node, cat("weights of rank ", w.dims.size(), " for a 1-D convolution"));
    w.dims = {w.dims[0], w.dims[1], 1, w.dims[2]};
    const std::string name = node.input(1) + "/as_2d";
    constants_[name] = std::move(w);
    two.set_input(1, name);
  }
  for (const auto& name : two.input()) ++readers_[name];
  readers_[out] = 1;
  produced_.insert(out);
  import_node(two);
  // Back to [N, M, L'] in the row-major order of its readers.
  const ValueId y = row_major_named(node, out);
  const Shape& ys = shape(y);
  define(node, 0, mark(reshaped(node, y, {ys[0], ys[1], ys[3]})));
}

}  // namespace stagecraft::graph::onnx_import
