// The ONNX importer's stacks: a 5-D view [N, K, C, H, W] whose elements are those of a 4-D tensor
// [N, K·C, H, W] in plain order (torch.stack of K maps, x.view(N, K, C, H, W): ResNeSt's split
// attention, SK-Nets' selective kernels). Sums and softmax over K, concatenations of stacks and
// element-wise ops between stacks (or with constants per stack and channel) become ops on the
// 4-D tensor: channel slices added, a channel softmax of [N, K, C, H·W], channel concatenation,
// broadcasting binary ops.
#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

namespace {

bool is_stack(const Importer::PendingView& v) {
  return v.shape.size() == 5 && v.shuffle_groups == 0 && !v.channels_last;
}

}  // namespace

bool Importer::reads_group_view(const onnx::NodeProto& node) const {
  static const std::set<std::string> kHandled = {"Softmax", "ReduceSum", "ReduceMean", "Concat", "Add", "Sub",
                                                 "Mul", "Div", "Relu", "Sigmoid"};
  const std::string& t = node.op_type();
  if (!kHandled.count(t)) return false;
  // A softmax or reduction over other axes than K takes the stack's row-major tensor (a 3-D
  // convolution's output pooled over its depth, height and width).
  if (t == "Softmax") {
    const int64_t axis = attr_int(node, "axis", -1);
    if ((axis + 5) % 5 != 1) return false;
  }
  if (t == "ReduceSum" || t == "ReduceMean") {
    const auto ax = axes(node, 1);
    if (!ax || ax->size() != 1 || ((*ax)[0] + 5) % 5 != 1) return false;
  }
  for (const auto& in : node.input()) {
    if (auto it = pending_views_.find(in); it != pending_views_.end() && is_stack(it->second)) return true;
  }
  return false;
}

ValueId Importer::grouped(const onnx::NodeProto& node, const PendingView& v) {
  const std::vector<int64_t>& s = v.shape;
  const Shape want{s[0], s[1] * s[2], s[3], s[4]};
  if (shape(v.base) == want) return v.base;
  ReshapeAttrs r;
  r.dims = {want[1], want[2], want[3]};
  return add(node, OpKind::kReshape, r, {v.base});
}

void Importer::define_group_view(const onnx::NodeProto& node, ValueId value, int64_t groups) {
  const Shape& s = shape(value);
  pending_views_[node.output(0)] = PendingView{value, {s[0], groups, s[1] / groups, s[2], s[3]}, 0};
}

void Importer::on_group_view(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const auto stack_of = [&](int slot) -> const PendingView* {
    auto it = pending_views_.find(node.input(slot));
    return it != pending_views_.end() && is_stack(it->second) ? &it->second : nullptr;
  };
  const auto axis_of = [&](int64_t fallback) {
    int64_t axis = attr_int(node, "axis", fallback);
    return axis < 0 ? axis + 5 : axis;
  };
  if (t == "Softmax") {
    const PendingView& v = *stack_of(0);
    if (axis_of(-1) != 1) fail(node, "a stack [N, K, C, H, W] is normalised over K (axis 1) only");
    // [N, K, C·H·W / 1]: K as channels, softmax per position.
    ReshapeAttrs r;
    r.dims = {v.shape[1], v.shape[2], v.shape[3] * v.shape[4]};
    const ValueId as_channels = add(node, OpKind::kReshape, r, {v.base});
    const ValueId y = add(node, OpKind::kSoftmax, SoftmaxAttrs{}, {as_channels});
    pending_views_[node.output(0)] = PendingView{y, v.shape, 0};
    return;
  }
  if (t == "ReduceSum" || t == "ReduceMean") {
    const PendingView& v = *stack_of(0);
    const auto ax = axes(node, 1);
    if (!ax || ax->size() != 1 || ((*ax)[0] + 5) % 5 != 1) {
      fail(node, "a stack [N, K, C, H, W] is reduced over K (axis 1) only");
    }
    const ValueId x = grouped(node, v);
    const int64_t k = v.shape[1], c = v.shape[2];
    std::vector<ValueId> parts;
    for (int64_t g = 0; g < k; ++g) {
      SliceAttrs a;
      a.begin = g * c;
      a.end = (g + 1) * c;
      parts.push_back(k == 1 ? x : add(node, OpKind::kSlice, a, {x}));
    }
    ValueId y = parts.size() == 1 ? parts[0] : add(node, OpKind::kAdd, AddAttrs{}, parts);
    if (t == "ReduceMean" && k > 1) {
      ScaleAttrs a;
      a.factor = 1.0 / static_cast<double>(k);
      y = add(node, OpKind::kScale, a, {y});
    }
    if (attr_int(node, "keepdims", 1) != 0) {
      define_group_view(node, y, 1);
    } else {
      define(node, 0, y);
    }
    return;
  }
  if (t == "Concat") {
    if (axis_of(1) != 1) fail(node, "stacks [N, K, C, H, W] are concatenated along K (axis 1) only");
    std::vector<ValueId> parts;
    int64_t groups = 0;
    for (int i = 0; i < node.input_size(); ++i) {
      const PendingView* v = stack_of(i);
      if (!v) fail(node, cat("concatenates the stack with '", node.input(i), "', which is not one"));
      parts.push_back(grouped(node, *v));
      groups += v->shape[1];
    }
    define_group_view(node, parts.size() == 1 ? parts[0] : add(node, OpKind::kConcat, ConcatAttrs{}, parts), groups);
    return;
  }
  // Element-wise: unary, or binary between stacks of the same K (one may have H = W = 1) or with
  // a constant per stack and channel.
  onnx::NodeProto own = node;
  int64_t groups = 0;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string alias = node.input(i) + "@stack";
    if (const PendingView* v = stack_of(i)) {
      if (groups != 0 && groups != v->shape[1]) fail(node, "combines stacks of different depths");
      groups = v->shape[1];
      values_[alias] = grouped(node, *v);
    } else if (const ConstTensor* c = constant(node, i)) {
      std::vector<int64_t> dims = c->dims;
      dims.insert(dims.begin(), 5 - std::min<size_t>(5, dims.size()), 1);
      if (dims.size() != 5 || dims[0] != 1) fail(node, "a constant combined with a stack must broadcast over the batch");
      ConstTensor reshaped = *c;
      reshaped.dims = {1, dims[1] * dims[2], dims[3], dims[4]};
      if (dims[1] != 1 && dims[1] != groups && groups != 0) fail(node, "the constant's K differs from the stack's");
      constants_[alias] = std::move(reshaped);
    } else {
      fail(node, cat("combines a stack [N, K, C, H, W] with '", node.input(i), "', which is not one"));
    }
    own.set_input(i, alias);
  }
  own.set_output(0, node.output(0) + "@stack");
  import_node(own);
  define_group_view(node, values_.at(own.output(0)), groups);
}

}  // namespace stagecraft::graph::onnx_import
