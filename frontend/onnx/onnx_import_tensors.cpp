// The ONNX importer's row-major tensors (transformers: tokens [N, T, C], heads [N, h, T, d],
// attention scores): values of any rank laid out in their logical order (Layout::kRowMajor), made
// where a node reads a tensor the views cannot hold (a transpose that moves data, a matmul of two
// activations, a softmax over the last axis) and then carried by every node that reads one. Here
// ONNX's own semantics apply: Transpose, Reshape, (Un)squeeze and Flatten as data movement or
// reshapes, MatMul by a constant as a linear layer over the last axis, MatMul of two activations,
// Softmax and LayerNormalization over any (the last) axis, Slice, Split and Gather of one index as
// narrows, Concat with a constant (class tokens) or along the second axis, reductions over axes.
// on_row_major dispatches a node reading such values to the translator of its op type.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

bool Importer::is_row_major(ValueId v) const {
  return row_major_.count(v) > 0 || graph_.value(v).desc.layout == Layout::kRowMajor;
}

bool Importer::reads_row_major(const onnx::NodeProto& node) const {
  for (const auto& in : node.input()) {
    if (auto it = values_.find(in); it != values_.end() && is_row_major(it->second)) return true;
    if (auto v = pending_views_.find(in); v != pending_views_.end() && is_row_major(v->second.base)) return true;
  }
  return false;
}

std::optional<ValueId> Importer::as_convolutions_tensor(const onnx::NodeProto& node, int slot) {
  const std::string& name = node.input(slot);
  if (auto it = values_.find(name); it != values_.end()) {
    if (!is_row_major(it->second)) return it->second;
    if (shape(it->second).rank() != 4) return std::nullopt;
  } else if (auto v = pending_views_.find(name); v == pending_views_.end() || v->second.shape.size() != 4 ||
                                                   !is_row_major(v->second.base)) {
    return std::nullopt;
  }
  // A row-major tensor (or a 4-D reshape of one) read in order as [N, C, H, W]: one reshape.
  const bool view = pending_views_.count(name) > 0;
  const ValueId base = view ? pending_views_.at(name).base : values_.at(name);
  const std::vector<int64_t> dims = view ? pending_views_.at(name).shape : dims_of(shape(base));
  if (dims[0] != shape(base)[0]) return std::nullopt;
  ReshapeAttrs r;
  r.dims.assign(dims.begin() + 1, dims.end());
  const ValueId y = add(node, OpKind::kReshape, r, {base});
  values_[name] = y;
  return y;
}

ValueId Importer::row_major(const onnx::NodeProto& node, int slot) {
  // Made once per tensor: every reader (and every question about it) gets the same copy.
  const std::string& name = node.input(slot);
  if (auto done = row_major_copies_.find(name); done != row_major_copies_.end()) return done->second;
  const ValueId v = make_row_major(node, slot);
  row_major_copies_[name] = v;
  return v;
}

ValueId Importer::row_major_named(const onnx::NodeProto& node, const std::string& name) {
  onnx::NodeProto reader;
  reader.set_name(node.name());
  reader.set_op_type(node.op_type());
  reader.add_input(name);
  return row_major(reader, 0);
}

int64_t Importer::row_major_axis(const onnx::NodeProto& node, ValueId x, int64_t a) {
  const auto rank = static_cast<int64_t>(shape(x).rank());
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) fail(node, cat("axis ", a, " is outside ", shape(x).to_string()));
  return a;
}

ValueId Importer::make_row_major(const onnx::NodeProto& node, int slot) {
  const std::string& name = node.input(slot);
  if (auto it = pending_views_.find(name); it != pending_views_.end()) {
    const PendingView v = it->second;
    if (v.shuffle_groups > 0 || v.space_to_depth > 0) {
      fail(node, cat("reads '", name, "', a view of a channel shuffle or space-to-depth in the middle of its "
                     "pattern, as a tensor"));
    }
    ValueId base = v.base;
    if (v.channels_last) {
      TransposeAttrs t;
      t.perm = {0, 2, 3, 1};
      base = add(node, OpKind::kTranspose, t, {base});
    }
    if (dims_of(shape(base)) == v.shape && graph_.value(base).desc.layout == Layout::kRowMajor) return mark(base);
    ReshapeAttrs r;
    r.full = true;
    r.dims = v.shape;
    return mark(add(node, OpKind::kReshape, r, {base}));
  }
  const ValueId x = input(node, slot);
  const TensorDesc& d = graph_.value(x).desc;
  if (!takes_layouts(d)) return mark(x);
  // A rank-4 tensor of the convolutions: a row-major copy (which the layout choice leaves alone).
  ReshapeAttrs r;
  r.full = true;
  r.dims = dims_of(d.shape);
  return mark(add(node, OpKind::kReshape, r, {x}));
}

std::vector<std::string> Importer::stacked_parts(const std::string& name) const {
  const auto concat = producers_.find(name);
  if (concat == producers_.end() || concat->second->op_type() != "Concat" || attr_int(*concat->second, "axis", 0) != 0) {
    return {};
  }
  std::vector<std::string> parts;
  for (const auto& in : concat->second->input()) {
    const auto u = producers_.find(in);
    if (u == producers_.end() || u->second->op_type() != "Unsqueeze") return {};
    const onnx::NodeProto& unsqueeze = *u->second;
    const std::vector<int64_t> ax = opset_ >= 13 ? axes(unsqueeze, 1).value_or(std::vector<int64_t>{})
                                                 : attr_ints(unsqueeze, "axes");
    if (ax != std::vector<int64_t>{0}) return {};
    parts.push_back(unsqueeze.input(0));
  }
  return parts;
}

bool Importer::readers_broadcast(const onnx::NodeProto& node, const std::vector<int64_t>& dims) const {
  const std::string& name = node.output(0);
  const auto it = reader_nodes_.find(name);
  if (graph_outputs_.count(name) || it == reader_nodes_.end() || it->second.empty()) return false;
  for (const onnx::NodeProto* r : it->second) {
    const std::string& t = r->op_type();
    if ((t != "Add" && t != "Sub" && t != "Mul" && t != "Div") || r->input_size() != 2) return false;
    const std::string& other = r->input(0) == name ? r->input(1) : r->input(0);
    if (other == name) return false;
    if (auto v = values_.find(other); v != values_.end()) {
      if (dims_of(shape(v->second)) != dims) return false;
    } else if (auto p = pending_views_.find(other); p != pending_views_.end()) {
      if (p->second.shape != dims) return false;
    } else {
      return false;  // not known yet, or a constant
    }
  }
  return true;
}

ValueId Importer::mark(ValueId v) {
  row_major_.insert(v);
  return v;
}

ValueId Importer::reshaped(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& target) {
  if (dims_of(shape(x)) == target) return x;
  ReshapeAttrs r;
  r.full = true;
  r.dims = target;
  return mark(add(node, OpKind::kReshape, r, {x}));
}

ValueId Importer::narrowed(const onnx::NodeProto& node, ValueId x, int64_t axis, int64_t begin, int64_t end) {
  if (begin == 0 && end == shape(x)[static_cast<size_t>(axis)]) return x;
  NarrowAttrs a;
  a.axis = axis;
  a.begin = begin;
  a.end = end;
  return mark(add(node, OpKind::kNarrow, a, {x}));
}

void Importer::define_row_major(const onnx::NodeProto& node, ValueId v) { define(node, 0, mark(v)); }

bool Importer::on_row_major(const onnx::NodeProto& node) {
  // The op types the row-major translation always takes.
  static const std::map<std::string, Translator, std::less<>> kTaken = {
      {"Transpose", &Importer::transpose_row_major},
      {"Reshape", &Importer::reshape_row_major},
      {"Flatten", &Importer::flatten_row_major},
      {"Squeeze", &Importer::squeeze_row_major}, {"Unsqueeze", &Importer::squeeze_row_major},
      {"MatMul", &Importer::matmul},
      {"Gemm", &Importer::gemm_row_major},
      {"Softmax", &Importer::softmax_row_major}, {"LogSoftmax", &Importer::softmax_row_major},
      {"Hardmax", &Importer::softmax_row_major},
      {"LayerNormalization", &Importer::layer_norm_row_major},
      {"Add", &Importer::arithmetic_row_major}, {"Sub", &Importer::arithmetic_row_major},
      {"Mul", &Importer::arithmetic_row_major}, {"Div", &Importer::arithmetic_row_major},
      {"Split", &Importer::narrow_row_major}, {"Slice", &Importer::narrow_row_major},
      {"Gather", &Importer::narrow_row_major},
      {"ScatterND", &Importer::scatter_row_major},
      {"ReduceMean", &Importer::reduce_row_major}, {"ReduceMax", &Importer::reduce_row_major},
      {"ReduceSum", &Importer::reduce_row_major}, {"ReduceMin", &Importer::reduce_row_major},
      {"ReduceProd", &Importer::reduce_row_major},
      {"InstanceNormalization", &Importer::instance_norm},
      {"Einsum", &Importer::einsum},
      {"DepthToSpace", &Importer::depth_to_space},
      {"Tile", &Importer::tile_row_major}, {"Expand", &Importer::tile_row_major},
  };
  // The op types it takes or leaves to the ordinary translation (false).
  using MaybeTranslator = bool (Importer::*)(const onnx::NodeProto&);
  static const std::map<std::string, MaybeTranslator, std::less<>> kMaybe = {
      {"Concat", &Importer::concat_or_convolutions},
      {"Pad", &Importer::pad_or_convolutions},
      {"BatchNormalization", &Importer::batch_norm_or_convolutions},
      {"Conv", &Importer::back_to_convolutions}, {"ConvTranspose", &Importer::back_to_convolutions},
      {"MaxPool", &Importer::back_to_convolutions}, {"AveragePool", &Importer::back_to_convolutions},
      {"GlobalAveragePool", &Importer::back_to_convolutions},
      {"GlobalMaxPool", &Importer::back_to_convolutions}, {"Resize", &Importer::back_to_convolutions},
  };
  const std::string& t = node.op_type();
  if (const auto taken = kTaken.find(t); taken != kTaken.end()) {
    (this->*taken->second)(node);
    return true;
  }
  if (const auto maybe = kMaybe.find(t); maybe != kMaybe.end()) return (this->*maybe->second)(node);
  // Element by element: the ordinary translation applies to any rank (on the row-major tensors).
  for (int i = 0; i < node.input_size(); ++i) {
    if (auto v = pending_views_.find(node.input(i)); v != pending_views_.end() && is_row_major(v->second.base)) {
      values_[node.input(i)] = row_major(node, i);
    }
  }
  return false;
}

void Importer::transpose_row_major(const onnx::NodeProto& node) {
  const ValueId x = row_major(node, 0);
  const Shape& s = shape(x);
  std::vector<int64_t> perm = attr_ints(node, "perm");
  if (perm.empty()) {  // ONNX's default: the axes reversed
    for (size_t i = s.rank(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != s.rank()) fail(node, cat("perm [", join(perm, ", "), "] does not fit ", s.to_string()));
  // A permutation keeping the order of the dimensions larger than 1 moves no element.
  std::vector<int64_t> moved, target;
  for (int64_t p : perm) {
    target.push_back(s[static_cast<size_t>(p)]);
    if (s[static_cast<size_t>(p)] != 1) moved.push_back(p);
  }
  if (std::is_sorted(moved.begin(), moved.end())) return define_row_major(node, reshaped(node, x, target));
  TransposeAttrs a;
  a.perm = perm;
  define_row_major(node, add(node, OpKind::kTranspose, a, {x}));
}

void Importer::reshape_row_major(const onnx::NodeProto& node) {
  const ValueId x = row_major(node, 0);
  std::vector<int64_t> target = constant_ints(node, 1, "the target shape");
  const Shape& s = shape(x);
  const bool allowzero = attr_int(node, "allowzero", 0) != 0;
  int64_t known = 1, minus = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero && i < s.rank()) target[i] = s[i];
    if (target[i] == -1) minus = static_cast<int64_t>(i);
    else known *= target[i];
  }
  if (minus >= 0 && known > 0) target[static_cast<size_t>(minus)] = s.numel() / known;
  if (product(target, 0, target.size()) != s.numel()) {
    fail(node, cat("reshape of ", s.to_string(), " to [", join(target, ", "), "] changes the element count"));
  }
  if (target.size() == 4 && target[0] == s[0] && dims_of(s) != target) {
    // [N, C, H, W] or [N, H, W, C]: whoever reads it decides (a convolution reads it as its
    // tensor, a row-major op as a row-major one), so it stays a view until then.
    pending_views_[node.output(0)] = PendingView{x, target, 0};
    return;
  }
  define_row_major(node, reshaped(node, x, target));
}

void Importer::flatten_row_major(const onnx::NodeProto& node) {
  const ValueId x = row_major(node, 0);
  const std::vector<int64_t> s = dims_of(shape(x));
  int64_t axis = attr_int(node, "axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  const auto a = static_cast<size_t>(axis);
  define_row_major(node, reshaped(node, x, {product(s, 0, a), product(s, a, s.size())}));
}

void Importer::squeeze_row_major(const onnx::NodeProto& node) {
  const ValueId x = row_major(node, 0);
  const std::vector<int64_t> s = dims_of(shape(x));
  const auto ax = axes(node, 1);
  std::vector<int64_t> target;
  if (node.op_type() == "Unsqueeze") {
    if (!ax) fail(node, "axes are required");
    const size_t rank = s.size() + ax->size();
    const auto a = normalised_axes(*ax, rank);
    for (size_t d = 0, k = 0; d < rank; ++d)
      target.push_back(std::binary_search(a.begin(), a.end(), static_cast<int64_t>(d)) ? 1 : s[k++]);
  } else {
    const auto a = ax ? normalised_axes(*ax, s.size()) : std::vector<int64_t>{};
    for (size_t d = 0; d < s.size(); ++d) {
      const bool removed = ax ? std::binary_search(a.begin(), a.end(), static_cast<int64_t>(d)) : s[d] == 1;
      if (!removed) target.push_back(s[d]);
    }
  }
  define_row_major(node, reshaped(node, x, target));
}

void Importer::gemm_row_major(const onnx::NodeProto& node) {
  gemm(node);
  mark(values_.at(node.output(0)));
}

void Importer::softmax_row_major(const onnx::NodeProto& node) {
  define_row_major(node, softmax_of(node, row_major(node, 0)));
}

void Importer::layer_norm_row_major(const onnx::NodeProto& node) {
  const ValueId x = row_major(node, 0);
  int64_t axis = attr_int(node, "axis", -1);
  const auto rank = static_cast<int64_t>(shape(x).rank());
  if (axis < 0) axis += rank;
  if (axis != rank - 1) fail(node, cat("only normalisation over the last axis is supported (axis ", axis, ")"));
  define_row_major(node, add_layer_norm(node, x));
}

void Importer::arithmetic_row_major(const onnx::NodeProto& node) {
  for (int i = 0; i < 2; ++i) {
    if (!constant(node, i)) values_[node.input(i)] = row_major(node, i);
  }
  if (!constant(node, 0) && !constant(node, 1)) {
    // Operands of different ranks: the lower one gains leading dimensions of 1.
    const ValueId a = input(node, 0), b = input(node, 1);
    const size_t ra = shape(a).rank(), rb = shape(b).rank();
    if (ra != rb) {
      ValueId& low = values_[node.input(ra < rb ? 0 : 1)];
      std::vector<int64_t> dims = dims_of(shape(low));
      dims.insert(dims.begin(), std::max(ra, rb) - dims.size(), 1);
      low = reshaped(node, low, dims);
    }
  }
  elementwise(node);
  mark(values_.at(node.output(0)));
}

bool Importer::concat_or_convolutions(const onnx::NodeProto& node) {
  // Of [N, C, H, W] tensors along the channels (a transformer's heads joined before a 1x1
  // convolution): the convolutions' concatenation.
  bool maps = attr_int(node, "axis", 0) == 1 || attr_int(node, "axis", 0) == -3;
  for (int i = 0; maps && i < node.input_size(); ++i) {
    const std::string& name = node.input(i);
    const auto v = pending_views_.find(name);
    maps = v != pending_views_.end() ? v->second.shape.size() == 4
                                     : values_.count(name) && !is_row_major(values_.at(name)) &&
                                           shape(values_.at(name)).rank() == 4;
  }
  if (!maps) return concat_row_major(node), true;
  for (int i = 0; i < node.input_size(); ++i) as_convolutions_tensor(node, i);
  return false;
}

void Importer::reduce_row_major(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const auto reduced_axes = [&] {
    return (t == "ReduceSum" || opset_ >= 18) ? axes(node, 1).value_or(std::vector<int64_t>{}) : attr_ints(node, "axes");
  };
  const std::vector<std::string> parts =
      (t == "ReduceMean" || t == "ReduceSum") && attr_int(node, "keepdims", 1) == 0 && reduced_axes() == std::vector<int64_t>{0}
          ? stacked_parts(node.input(0)) : std::vector<std::string>{};
  if (!parts.empty()) return reduce_stacked(node, parts);
  const ValueId x = row_major(node, 0);
  const auto rank = shape(x).rank();
  const int slot = t == "ReduceSum" || opset_ >= 18 ? 1 : -1;
  auto ax = slot > 0 ? axes(node, slot) : std::optional<std::vector<int64_t>>{};
  if (slot < 0 && !attr_ints(node, "axes").empty()) ax = attr_ints(node, "axes");
  ReduceAttrs a;
  if (ax) a.axes = normalised_axes(*ax, rank);
  else for (size_t d = 0; d < rank; ++d) a.axes.push_back(static_cast<int64_t>(d));
  a.axes.erase(std::unique(a.axes.begin(), a.axes.end()), a.axes.end());
  if (a.axes.empty() && attr_int(node, "noop_with_empty_axes", 0) != 0) return define_row_major(node, x);
  if (a.axes.empty()) {
    for (size_t d = 0; d < rank; ++d) a.axes.push_back(static_cast<int64_t>(d));
  }
  const OpKind kind = t == "ReduceMax"    ? OpKind::kReduceMax
                      : t == "ReduceSum"  ? OpKind::kReduceSum
                      : t == "ReduceMin"  ? OpKind::kReduceMin
                      : t == "ReduceProd" ? OpKind::kReduceProd
                                          : OpKind::kReduceMean;
  std::vector<int64_t> kept;
  for (size_t d = 0; d < rank; ++d)
    if (!std::binary_search(a.axes.begin(), a.axes.end(), static_cast<int64_t>(d))) kept.push_back(shape(x)[d]);
  const bool keepdims = attr_int(node, "keepdims", 1) != 0;
  if (!keepdims && kept.empty()) fail(node, "a reduction to a scalar (rank 0, keepdims 0) is not supported");
  const ValueId y = mark(add(node, kind, a, {x}));
  if (keepdims) return define_row_major(node, y);
  define_row_major(node, reshaped(node, y, kept));
}

void Importer::reduce_stacked(const onnx::NodeProto& node, const std::vector<std::string>& parts) {
  // The mean or sum of stacked tensors over the stacking axis: their sum (times 1 / K).
  ValueId y = row_major_named(node, parts[0]);
  BinaryAttrs sum;
  sum.op = BinaryOp::kAdd;
  for (size_t i = 1; i < parts.size(); ++i) {
    const ValueId part = row_major_named(node, parts[i]);
    if (shape(part) != shape(y)) fail(node, "the stacked tensors differ in shape");
    y = mark(add(node, OpKind::kBinary, sum, {y, part}));
  }
  if (node.op_type() == "ReduceMean") {
    ScaleAttrs mean;
    mean.factor = 1.0 / static_cast<double>(parts.size());
    y = mark(add(node, OpKind::kScale, mean, {y}));
  }
  define_row_major(node, y);
}

bool Importer::pad_or_convolutions(const onnx::NodeProto& node) {
  const auto no_padding = [&] {
    const std::vector<int64_t> pads = has_input(node, 1) ? constant_ints(node, 1, "the pads") : attr_ints(node, "pads");
    return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
  };
  if (no_padding() || shape(row_major(node, 0)).rank() != 4) {  // Swin's windows that fit
    return define_row_major(node, padded(node, row_major(node, 0))), true;
  }
  return back_to_convolutions(node);
}

void Importer::depth_to_space(const onnx::NodeProto& node) {
  // Pixel shuffle: a reshape, a transpose and a reshape.
  const ValueId x = row_major(node, 0);
  const std::vector<int64_t> s = dims_of(shape(x));
  const int64_t b = attr_int(node, "blocksize", 0);
  if (s.size() != 4 || b < 1 || s[1] % (b * b) != 0) {
    fail(node, cat("blocksize ", b, " must divide the channels of a 4-D input twice (", shape(x).to_string(), ")"));
  }
  const int64_t c = s[1] / (b * b);
  const bool crd = attr_string(node, "mode") == "CRD";
  TransposeAttrs p;
  p.perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  const ValueId blocks = reshaped(node, x, crd ? std::vector<int64_t>{s[0], c, b, b, s[2], s[3]}
                                               : std::vector<int64_t>{s[0], b, b, c, s[2], s[3]});
  define_row_major(node, reshaped(node, mark(add(node, OpKind::kTranspose, p, {blocks})), {s[0], c, s[2] * b, s[3] * b}));
}

bool Importer::batch_norm_or_convolutions(const onnx::NodeProto& node) {
  if (shape(row_major(node, 0)).rank() == 4 && attr_int(node, "training_mode", 0) == 0) return back_to_convolutions(node);
  // Per channel (axis 1) of a row-major tensor (LeViT's BatchNorm1d of [N·T, C]): x · s + t.
  const ValueId x = row_major(node, 0);
  const std::vector<float> gamma = constant_floats(node, 1, "the scale"), beta = constant_floats(node, 2, "the bias");
  const std::vector<float> mean = constant_floats(node, 3, "the mean"), var = constant_floats(node, 4, "the variance");
  const double eps = attr_float(node, "epsilon", 1e-5f);
  const int64_t c = shape(x)[1];
  if (static_cast<int64_t>(gamma.size()) != c || beta.size() != gamma.size() || mean.size() != gamma.size() ||
      var.size() != gamma.size()) {
    fail(node, cat("the statistics must have one value per channel (", c, ")"));
  }
  std::vector<float> scale(gamma.size()), shift(gamma.size());
  for (size_t i = 0; i < gamma.size(); ++i) {
    scale[i] = static_cast<float>(gamma[i] / std::sqrt(static_cast<double>(var[i]) + eps));
    shift[i] = static_cast<float>(beta[i] - mean[i] * static_cast<double>(scale[i]));
  }
  std::vector<int64_t> dims(shape(x).rank(), 1);
  dims[1] = c;
  define_row_major(node, affine(node, x, dims, scale, shift));
  return true;
}

bool Importer::back_to_convolutions(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  if ((t == "Conv" || t == "ConvTranspose" || t == "MaxPool" || t == "AveragePool") && rank_of(node.input(0)) == 3u) {
    return one_dimensional(node), true;
  }
  if ((t == "MaxPool" || t == "AveragePool") && rank_of(node.input(0)) >= 5u) return pool_nd(node), true;
  if (t == "Resize" && rank_of(node.input(0)) != 4u) return resize(node), true;  // a resize_nd
  // Back among the convolutions' tensors (Swin's [N, C, H, W] before its pooling): a rank-4
  // tensor in the layout the plan chooses.
  if (!as_convolutions_tensor(node, 0)) {
    fail(node, cat(t, " of a row-major tensor ", shape(row_major(node, 0)).to_string(),
                   " (a transformer's tokens or heads) is not supported"));
  }
  return false;
}

void Importer::tile_row_major(const onnx::NodeProto& node) {
  // Copies joined along each axis (GCViT's global queries repeated over windows): Tile by its
  // repeats, Expand from extent 1 to the target's (leading dimensions of 1 added first).
  const std::string& t = node.op_type();
  ValueId x = row_major(node, 0);
  std::vector<int64_t> s = dims_of(shape(x)), reps;
  const std::vector<int64_t> given = constant_ints(node, 1, t == "Tile" ? "the repeats" : "the shape");
  if (t == "Tile") {
    reps = given;
    // Repeating axes of extent 1 only is an Expand (SwiftFormer's global query over 3136 tokens):
    // readers that broadcast take the tensor as it is.
    bool expand = reps.size() == s.size();
    std::vector<int64_t> out_dims = s;
    for (size_t d = 0; expand && d < s.size(); ++d) {
      expand = reps[d] == 1 || s[d] == 1;
      out_dims[d] *= reps[d];
    }
    if (expand && out_dims != s && readers_broadcast(node, out_dims)) return define_row_major(node, x);
  } else {
    if (given.size() > s.size()) s.insert(s.begin(), given.size() - s.size(), 1);
    x = reshaped(node, x, s);
    std::vector<int64_t> target = given;
    target.insert(target.begin(), s.size() - target.size(), 1);
    std::vector<int64_t> out_dims;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] != target[d] && s[d] != 1 && target[d] != 1) fail(node, "the shapes do not broadcast");
      reps.push_back(s[d] == 1 ? target[d] : 1);
      out_dims.push_back(std::max(s[d], target[d]));
    }
    if (readers_broadcast(node, out_dims)) return define_row_major(node, x);  // no copies: its readers broadcast
  }
  if (reps.size() != s.size()) fail(node, cat("repeats [", join(reps, ", "), "] do not fit ", shape(x).to_string()));
  for (size_t d = 0; d < reps.size(); ++d) {
    if (reps[d] < 1) fail(node, "repeats must be >= 1");
    if (reps[d] <= 8) {  // one join, a copy per repeat
      if (reps[d] > 1) x = concatenated(node, std::vector<ValueId>(static_cast<size_t>(reps[d]), x), static_cast<int64_t>(d));
      continue;
    }
    // More by doubling: about 2 log2(repeats) copies, not one per repeat.
    std::optional<ValueId> joined;
    ValueId doubled = x;
    for (int64_t r = reps[d]; r > 0; r >>= 1) {
      if (r & 1) joined = joined ? concatenated(node, {*joined, doubled}, static_cast<int64_t>(d)) : doubled;
      if (r > 1) doubled = concatenated(node, {doubled, doubled}, static_cast<int64_t>(d));
    }
    x = *joined;
  }
  define_row_major(node, x);
}

}  // namespace stagecraft::graph::onnx_import
