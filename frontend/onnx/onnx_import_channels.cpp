// The ONNX importer's channel ops: LayerNormalization, GELU, and channels-last views (a 4-D
// tensor seen through Transpose(0, 2, 3, 1), as ConvNeXt's blocks and LayerNorm2d write it).
#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/onnx_patterns.h"

namespace stagecraft::graph::onnx_import {

namespace {

// The op types that act on a channels-last view element by element (unary) or channel by
// channel (with a constant or a second view).
bool element_wise(const std::string& t) {
  return t == "Relu" || t == "Sigmoid" || t == "HardSwish" || t == "LeakyRelu" || t == "HardSigmoid" ||
         t == "Gelu" || t == "Clip" || t == "Dropout" || t == "Identity" || t == "Neg" || t == "Add" ||
         t == "Sub" || t == "Mul" || t == "Div" || t == "Sqrt" || t == "Tanh" || t == "Reciprocal" ||
         unary_fn_of_onnx(t).has_value();
}

// The reductions a channels-last view carries (its axes mapped to the tensor's, dimensions kept).
bool reduction(const std::string& t) {
  return t == "ReduceSum" || t == "ReduceMean" || t == "ReduceMax" || t == "ReduceMin";
}

// Axis a of [N, H, W, C] as an axis of [N, C, H, W].
int64_t nchw_axis(int64_t a) {
  a = a < 0 ? a + 4 : a;
  return a == 0 ? 0 : a == 3 ? 1 : a + 1;
}

std::vector<int64_t> channels_last_dims(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

}  // namespace

void Importer::gelu(const onnx::NodeProto& node) {
  const std::string approximate = attr_string(node, "approximate");
  if (!approximate.empty() && approximate != "none" && approximate != "tanh") {
    fail(node, cat("approximate='", approximate, "' is not a GELU form (none or tanh)"));
  }
  define(node, 0, add(node, approximate == "tanh" ? OpKind::kGeluTanh : OpKind::kGelu, NoAttrs{}, {input(node, 0)}));
}

ValueId Importer::add_layer_norm(const onnx::NodeProto& node, ValueId x) {
  for (int i = 1; i < node.output_size(); ++i) {
    if (!node.output(i).empty()) fail(node, "the mean and inverse deviation outputs are not supported");
  }
  const TensorDesc& d = graph_.value(x).desc;
  const auto c = static_cast<size_t>(d.shape[takes_layouts(d) || d.shape.rank() == 2 ? 1 : d.shape.rank() - 1]);
  OpWeights w;
  w.gamma = has_input(node, 1) ? constant_floats(node, 1, "the scale") : std::vector<float>(c, 1.0f);
  w.beta = has_input(node, 2) ? constant_floats(node, 2, "the bias") : std::vector<float>(c, 0.0f);
  if (w.gamma.size() == 1) w.gamma.assign(c, w.gamma[0]);
  if (w.beta.size() == 1) w.beta.assign(c, w.beta[0]);
  if (w.gamma.size() != c || w.beta.size() != c) {
    fail(node, cat("the scale and bias must have one value per channel (", c, ")"));
  }
  LayerNormAttrs a;
  a.eps = attr_float(node, "epsilon", 1e-5f);
  const ValueId y = add(node, OpKind::kLayerNorm, a, {x});
  weights_of_last() = std::move(w);
  return y;
}

void Importer::layer_norm(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  const Shape& s = shape(x);
  int64_t axis = attr_int(node, "axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(s.rank());
  const bool channels = attr_int(node, kChannelsOnly, 0) != 0 && axis == 1 && s.rank() == 4;
  if ((s.rank() != 2 || axis != 1) && !channels) {
    if (axis == static_cast<int64_t>(s.rank()) - 1 && on_row_major(node)) return;
    fail(node, cat("only normalisation over the last axis of a 2-D tensor, or of a channels-last "
                   "view Transpose(0, 2, 3, 1) of a 4-D one, is supported (input ", s.to_string(),
                   ", axis ", attr_int(node, "axis", -1), ")"));
  }
  define(node, 0, add_layer_norm(node, x));
}

bool Importer::stays_channels_last(const onnx::NodeProto& node) const {
  const std::string& t = node.op_type();
  for (int i = 0; i < node.input_size(); ++i) {
    auto it = pending_views_.find(node.input(i));
    if (it != pending_views_.end()) {
      if (!it->second.channels_last) return false;
      continue;
    }
    const ConstTensor* c = constant(node, i);
    if (!c) {
      if (!node.input(i).empty()) return false;  // a tensor that is not a channels-last view
      continue;
    }
    if (!element_wise(t) || t == "Clip") continue;
    std::vector<int64_t> dims = c->dims;
    dims.insert(dims.begin(), 4 - std::min<size_t>(4, dims.size()), 1);
    if (dims.size() != 4 || dims[1] != 1 || dims[2] != 1) return false;  // varies over H or W
  }
  if (t == "Transpose") return attr_ints(node, "perm") == std::vector<int64_t>{0, 3, 1, 2};
  if (t == "LayerNormalization") {
    const int64_t axis = attr_int(node, "axis", -1);
    return axis == -1 || axis == 3;
  }
  if (t == "MatMul") return constant(node, 1) && constant(node, 1)->dims.size() == 2;
  if (reduction(t)) {
    // With the reduced dimensions kept and the axes known: a reduction of the tensor itself
    // (ConvNeXt V2's response normalisation over H and W, then over the channels).
    if (attr_int(node, "keepdims", 1) == 0) return false;
    const bool by_input = reduce_axes_are_input(t, opset_);
    return by_input ? !has_input(node, 1) || constant(node, 1) != nullptr : true;
  }
  return element_wise(t);
}

bool Importer::reads_channels_last(const onnx::NodeProto& node) const {
  for (const auto& in : node.input()) {
    if (auto it = pending_views_.find(in); it != pending_views_.end() && it->second.channels_last) return true;
  }
  return false;
}

void Importer::on_channels_last(const onnx::NodeProto& node) {
  // What the view cannot carry (other transposes, padding, windows of Swin, constants varying over
  // H and W, MatMul of two tensors) runs on the row-major tensor [N, H, W, C].
  if (!stays_channels_last(node)) {
    if (on_row_major(node)) return;
    fail(node, "reads a channels-last view (Transpose(0, 2, 3, 1) of a 4-D tensor): only "
               "Transpose(0, 3, 1, 2), LayerNormalization over the last axis, MatMul by a constant "
               "and element-wise ops are supported on it");
  }
  const std::string& t = node.op_type();
  const PendingView* view = nullptr;
  // The node as it reads the tensors themselves: views by their tensors, constants per channel
  // reordered to [N, C, H, W], under names of their own.
  onnx::NodeProto own = node;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string& name = node.input(i);
    if (auto it = pending_views_.find(name); it != pending_views_.end()) {  // channels-last (checked)
      view = &it->second;
      const std::string alias = name + "@nchw";
      values_[alias] = it->second.base;
      own.set_input(i, alias);
      continue;
    }
    const ConstTensor* c = constant(node, i);
    if (!c || !element_wise(t) || t == "Clip") continue;
    // A constant broadcast over [N, H, W, C]: one value per channel (or one value, as
    // stays_channels_last checked) keeps its elements; as [1, C, 1, 1] it broadcasts over the tensor.
    std::vector<int64_t> dims = c->dims;
    dims.insert(dims.begin(), 4 - std::min<size_t>(4, dims.size()), 1);
    ConstTensor reordered = *c;
    reordered.dims = {dims[0], dims[3], 1, 1};
    const std::string alias = name + "@nchw";
    constants_[alias] = std::move(reordered);
    own.set_input(i, alias);
  }
  const Shape base = shape(view->base);
  if (t == "Transpose") {  // (0, 3, 1, 2): back to the tensor itself
    define(node, 0, view->base);
    return;
  }
  for (int i = 0; i < own.output_size(); ++i) own.set_output(i, node.output(i) + "@nchw");
  if (reduction(t)) {  // the axes as the tensor's (every axis when none are given)
    const bool by_input = reduce_axes_are_input(t, opset_);
    std::vector<int64_t> given = by_input ? (has_input(node, 1) ? constant(node, 1)->ints() : std::vector<int64_t>{})
                                          : attr_ints(node, "axes");
    if (given.empty() && attr_int(node, "noop_with_empty_axes", 0) == 0) given = {0, 1, 2, 3};
    for (int64_t& a : given) a = nchw_axis(a);
    if (by_input) {
      const std::string alias = cat(node.output(0), "@nchw_axes");
      constants_[alias] = ConstTensor::of_ints(given, {static_cast<int64_t>(given.size())});
      if (own.input_size() > 1) own.set_input(1, alias); else own.add_input(alias);
      ++readers_[alias];
    } else {
      for (auto& at : *own.mutable_attribute()) {
        if (at.name() != "axes") continue;
        at.clear_ints();
        for (int64_t a : given) at.add_ints(a);
      }
    }
  }
  if (t == "LayerNormalization") {
    // Over the last axis (checked): over channels of the tensor itself: a layer norm of [N, C, H, W] over C.
    values_[own.output(0)] = add_layer_norm(node, view->base);
  } else if (t == "MatMul") {
    // [N, H, W, C] x [C, K]: a 1x1 convolution of the tensor.
    const ConstTensor* b = constant(node, 1);
    if (!b || b->dims.size() != 2 || b->dims[0] != base[1] || node.input(0) == node.input(1)) {
      fail(node, cat("a channels-last view is multiplied by a constant [", base[1], ", K] only"));
    }
    Conv2dAttrs a;
    a.in_channels = b->dims[0];
    a.out_channels = b->dims[1];
    a.kernel = Hw{1, 1};
    std::vector<float> w = b->floats();  // [C, K] -> [K, C, 1, 1]
    std::vector<float> oihw(w.size());
    for (int64_t ci = 0; ci < a.in_channels; ++ci)
      for (int64_t k = 0; k < a.out_channels; ++k)
        oihw[static_cast<size_t>(k * a.in_channels + ci)] = w[static_cast<size_t>(ci * a.out_channels + k)];
    values_[own.output(0)] = add_weighted(node, OpKind::kConv2d, a, {view->base}, std::move(oihw));
  } else {  // element-wise, every input a view or a constant (checked)
    import_node(own);
  }
  const ValueId y = values_.at(own.output(0));
  PendingView result{y, channels_last_dims(shape(y)), 0, true};
  pending_views_[node.output(0)] = result;
}

}  // namespace stagecraft::graph::onnx_import
