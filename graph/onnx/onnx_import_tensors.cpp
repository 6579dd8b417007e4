// The ONNX importer's row-major tensors (transformers: tokens [N, T, C], heads [N, h, T, d],
// attention scores): values of any rank laid out in their logical order (Layout::kPlain), made
// where a node reads a tensor the views cannot hold (a transpose that moves data, a matmul of two
// activations, a softmax over the last axis) and then carried by every node that reads one. Here
// ONNX's own semantics apply: Transpose, Reshape, (Un)squeeze and Flatten as data movement or
// reshapes, MatMul by a constant as a linear layer over the last axis, MatMul of two activations,
// Softmax and LayerNormalization over any (the last) axis, Slice, Split and Gather of one index as
// narrows, Concat with a constant (class tokens) or along the second axis, reductions over axes.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/strings.h"
#include "graph/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

namespace {

std::vector<int64_t> dims_of(const Shape& s) { return s.dims(); }

int64_t product(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < dims.size(); ++i) n *= dims[i];
  return n;
}

}  // namespace

bool Importer::is_row_major(ValueId v) const {
  return row_major_.count(v) > 0 || graph_.value(v).desc.layout == Layout::kPlain;
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
    if (dims_of(shape(base)) == v.shape && graph_.value(base).desc.layout == Layout::kPlain) return mark(base);
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

bool Importer::on_row_major(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const auto out = [&](ValueId v) { define(node, 0, mark(v)); };
  if (t == "Transpose") {
    const ValueId x = row_major(node, 0);
    const std::vector<int64_t> perm = attr_ints(node, "perm");
    const Shape& s = shape(x);
    if (perm.size() != s.rank()) fail(node, cat("perm [", join(perm, ", "), "] does not fit ", s.to_string()));
    // A permutation keeping the order of the dimensions larger than 1 moves no element.
    std::vector<int64_t> moved, target;
    for (int64_t p : perm) {
      target.push_back(s[static_cast<size_t>(p)]);
      if (s[static_cast<size_t>(p)] != 1) moved.push_back(p);
    }
    if (std::is_sorted(moved.begin(), moved.end())) return out(reshaped(node, x, target)), true;
    TransposeAttrs a;
    a.perm = perm;
    return out(add(node, OpKind::kTranspose, a, {x})), true;
  }
  if (t == "Reshape") {
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
      return true;
    }
    return out(reshaped(node, x, target)), true;
  }
  if (t == "Flatten") {
    const ValueId x = row_major(node, 0);
    const std::vector<int64_t> s = dims_of(shape(x));
    int64_t axis = attr_int(node, "axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(s.size());
    const auto a = static_cast<size_t>(axis);
    return out(reshaped(node, x, {product(s, 0, a), product(s, a, s.size())})), true;
  }
  if (t == "Squeeze" || t == "Unsqueeze") {
    const ValueId x = row_major(node, 0);
    const std::vector<int64_t> s = dims_of(shape(x));
    const auto ax = axes(node, 1);
    std::vector<int64_t> target;
    if (t == "Unsqueeze") {
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
    return out(reshaped(node, x, target)), true;
  }
  if (t == "MatMul") return matmul(node), true;
  if (t == "Gemm") return gemm(node), mark(values_.at(node.output(0))), true;
  if (t == "Softmax") {
    const ValueId x = row_major(node, 0);
    const auto rank = static_cast<int64_t>(shape(x).rank());
    SoftmaxAttrs a;
    a.axis = attr_int(node, "axis", opset_ >= 13 ? -1 : 1);
    if (a.axis < 0) a.axis += rank;
    if (opset_ < 13 && a.axis != rank - 1) fail(node, "softmax before opset 13 is supported over the last axis only");
    return out(add(node, OpKind::kSoftmax, a, {x})), true;
  }
  if (t == "LayerNormalization") {
    const ValueId x = row_major(node, 0);
    int64_t axis = attr_int(node, "axis", -1);
    const auto rank = static_cast<int64_t>(shape(x).rank());
    if (axis < 0) axis += rank;
    if (axis != rank - 1) fail(node, cat("only normalisation over the last axis is supported (axis ", axis, ")"));
    return out(add_layer_norm(node, x)), true;
  }
  if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div") {
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
    return mark(values_.at(node.output(0))), true;
  }
  if (t == "Concat") {
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
  if (t == "Split" || t == "Slice" || t == "Gather") return narrow_row_major(node), true;
  if (t == "ReduceMean" || t == "ReduceMax" || t == "ReduceSum") {
    const ValueId x = row_major(node, 0);
    const auto rank = shape(x).rank();
    const int slot = t == "ReduceSum" || opset_ >= 18 ? 1 : -1;
    auto ax = slot > 0 ? axes(node, slot) : std::optional<std::vector<int64_t>>{};
    if (slot < 0 && !attr_ints(node, "axes").empty()) ax = attr_ints(node, "axes");
    ReduceAttrs a;
    if (ax) a.axes = normalised_axes(*ax, rank);
    else for (size_t d = 0; d < rank; ++d) a.axes.push_back(static_cast<int64_t>(d));
    if (a.axes.front() == 0) fail(node, "a reduction over the batch axis is not supported");
    const OpKind kind = t == "ReduceMax" ? OpKind::kReduceMax : t == "ReduceSum" ? OpKind::kReduceSum
                                                                                 : OpKind::kReduceMean;
    const ValueId y = mark(add(node, kind, a, {x}));
    if (attr_int(node, "keepdims", 1) != 0) return out(y), true;
    std::vector<int64_t> kept;
    for (size_t d = 0; d < rank; ++d)
      if (!std::binary_search(a.axes.begin(), a.axes.end(), static_cast<int64_t>(d))) kept.push_back(shape(x)[d]);
    return out(reshaped(node, y, kept)), true;
  }
  const auto no_padding = [&] {
    const std::vector<int64_t> pads = has_input(node, 1) ? constant_ints(node, 1, "the pads") : attr_ints(node, "pads");
    return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
  };
  if (t == "Pad" && (no_padding() || shape(row_major(node, 0)).rank() != 4)) {  // Swin's windows that fit
    const ValueId x = row_major(node, 0);
    if (!no_padding()) {
      fail(node, cat("padding a row-major tensor ", shape(x).to_string(), " is not supported"));
    }
    return out(x), true;
  }
  if (t == "InstanceNormalization") return instance_norm(node), true;
  if (t == "DepthToSpace") {  // pixel shuffle: a reshape, a transpose and a reshape
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
    return out(reshaped(node, mark(add(node, OpKind::kTranspose, p, {blocks})), {s[0], c, s[2] * b, s[3] * b})), true;
  }
  if (t == "BatchNormalization" && (shape(row_major(node, 0)).rank() != 4 || attr_int(node, "training_mode", 0) != 0)) {
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
    return out(affine(node, x, dims, scale, shift)), true;
  }
  if (t == "Conv" || t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" ||
      t == "GlobalMaxPool" || t == "BatchNormalization" || t == "Resize" || t == "Pad") {
    // Back among the convolutions' tensors (Swin's [N, C, H, W] before its pooling): a rank-4
    // tensor in the layout the plan chooses.
    if (!as_convolutions_tensor(node, 0)) {
      fail(node, cat(t, " of a row-major tensor ", shape(row_major(node, 0)).to_string(),
                     " (a transformer's tokens or heads) is not supported"));
    }
    return false;
  }
  if (t == "Tile" || t == "Expand") {
    // Copies joined along each axis (GCViT's global queries repeated over windows): Tile by its
    // repeats, Expand from extent 1 to the target's (leading dimensions of 1 added first).
    ValueId x = row_major(node, 0);
    std::vector<int64_t> s = dims_of(shape(x)), reps;
    const std::vector<int64_t> given = constant_ints(node, 1, t == "Tile" ? "the repeats" : "the shape");
    if (t == "Tile") {
      reps = given;
    } else {
      if (given.size() > s.size()) s.insert(s.begin(), given.size() - s.size(), 1);
      x = reshaped(node, x, s);
      std::vector<int64_t> target = given;
      target.insert(target.begin(), s.size() - target.size(), 1);
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] != target[d] && s[d] != 1 && target[d] != 1) fail(node, "the shapes do not broadcast");
        reps.push_back(s[d] == 1 ? target[d] : 1);
      }
    }
    if (reps.size() != s.size()) fail(node, cat("repeats [", join(reps, ", "), "] do not fit ", shape(x).to_string()));
    if (reps[0] != 1) fail(node, "repeating the batch is not supported");
    for (size_t d = 1; d < reps.size(); ++d) {
      if (reps[d] < 1) fail(node, "repeats must be >= 1");
      if (reps[d] > 1) x = concatenated(node, std::vector<ValueId>(static_cast<size_t>(reps[d]), x), static_cast<int64_t>(d));
    }
    return out(x), true;
  }
  if (t == "Resize" || t == "Conv" || t == "MaxPool" ||
      t == "AveragePool" || t == "BatchNormalization" || t == "GlobalAveragePool") {
    fail(node, cat(t, " of a row-major tensor ", shape(input(node, 0)).to_string(),
                   " (a transformer's tokens or heads) is not supported"));
  }
  // Element by element: the ordinary translation applies to any rank (on the row-major tensors).
  for (int i = 0; i < node.input_size(); ++i) {
    if (auto v = pending_views_.find(node.input(i)); v != pending_views_.end() && is_row_major(v->second.base)) {
      values_[node.input(i)] = row_major(node, i);
    }
  }
  return false;
}

ValueId Importer::affine(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& dims,
                         std::vector<float> scale, std::vector<float> shift) {
  const bool unit = std::all_of(scale.begin(), scale.end(), [](float v) { return v == 1.0f; });
  const bool zero = std::all_of(shift.begin(), shift.end(), [](float v) { return v == 0.0f; });
  BinaryAttrs a;
  a.constant = dims;
  if (!unit) {
    a.op = BinaryOp::kMul;
    x = mark(add(node, OpKind::kBinary, a, {x}));
    weights_of_last().weight = std::move(scale);
  }
  if (!zero) {
    a.op = BinaryOp::kAdd;
    x = mark(add(node, OpKind::kBinary, a, {x}));
    weights_of_last().weight = std::move(shift);
  }
  return x;
}

void Importer::instance_norm(const onnx::NodeProto& node) {
  // Over everything after the channels, per sample and channel (GroupNorm(1, C) as exporters
  // write it: PoolFormer): a layer norm of [N, C, L] over L, then the per-channel scale and bias.
  const ValueId x = row_major(node, 0);
  const std::vector<int64_t> s = dims_of(shape(x));
  if (s.size() < 3) fail(node, cat("the input must have rank >= 3, got ", shape(x).to_string()));
  const int64_t length = product(s, 2, s.size());
  const ValueId rows = reshaped(node, x, {s[0], s[1], length});
  LayerNormAttrs ln;
  ln.eps = attr_float(node, "epsilon", 1e-5f);
  const ValueId y = mark(add(node, OpKind::kLayerNorm, ln, {rows}));
  weights_of_last().gamma.assign(static_cast<size_t>(length), 1.0f);
  weights_of_last().beta.assign(static_cast<size_t>(length), 0.0f);
  std::vector<float> scale = constant_floats(node, 1, "the scale"), bias = constant_floats(node, 2, "the bias");
  if (static_cast<int64_t>(scale.size()) != s[1] || bias.size() != scale.size()) {
    fail(node, cat("the scale and bias must have one value per channel (", s[1], ")"));
  }
  std::vector<int64_t> dims(s.size(), 1);
  dims[1] = s[1];
  define(node, 0, mark(affine(node, reshaped(node, y, s), dims, std::move(scale), std::move(bias))));
}

void Importer::matmul(const onnx::NodeProto& node) {
  const ConstTensor* b = constant(node, 1);
  if (b) {  // by constant weights [K, N] (leading 1s allowed): a linear layer over the last axis
    std::vector<int64_t> dims = b->dims;
    while (dims.size() > 2 && dims.front() == 1) dims.erase(dims.begin());
    if (dims.size() != 2) fail(node, cat("the constant second input must be 2-D, got [", join(b->dims, ", "), "]"));
    const ValueId x = row_major(node, 0);
    const int64_t in = dims[0], out = dims[1];
    if (shape(x)[shape(x).rank() - 1] != in) {
      fail(node, cat("inner dimensions differ: ", shape(x).to_string(), " x [", join(b->dims, ", "), "]"));
    }
    const std::vector<float> w = b->floats();
    std::vector<float> wt(w.size());  // [in, out] -> [out, in]
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) wt[static_cast<size_t>(o * in + i)] = w[static_cast<size_t>(i * out + o)];
    LinearAttrs a;
    a.in_features = in;
    a.out_features = out;
    a.bias = false;
    const ValueId y = add(node, OpKind::kLinear, a, {x});
    weights_of_last().weight = std::move(wt);
    define(node, 0, mark(y));
    return;
  }
  if (constant(node, 0)) fail(node, "a constant first input is not supported");
  ValueId x = row_major(node, 0), y = row_major(node, 1);
  std::vector<int64_t> sx = dims_of(shape(x)), sy = dims_of(shape(y));
  if (sx.size() < 2 || sy.size() < 2) fail(node, "1-D operands are not supported");
  // Equal ranks of at least 3: leading dimensions of 1 where they are missing.
  const size_t rank = std::max<size_t>({sx.size(), sy.size(), 3});
  const std::vector<int64_t> rx = sx, ry = sy;
  sx.insert(sx.begin(), rank - sx.size(), 1);
  sy.insert(sy.begin(), rank - sy.size(), 1);
  x = reshaped(node, x, sx);
  y = reshaped(node, y, sy);
  ValueId z = mark(add(node, OpKind::kMatMul, NoAttrs{}, {x, y}));
  if (std::max(rx.size(), ry.size()) < rank) {  // back to the rank ONNX gives
    std::vector<int64_t> dims = dims_of(shape(z));
    dims.erase(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(rank - std::max(rx.size(), ry.size())));
    z = reshaped(node, z, dims);
  }
  define(node, 0, mark(z));
}

void Importer::concat_row_major(const onnx::NodeProto& node) {
  std::vector<int> tensors, constants;
  for (int i = 0; i < node.input_size(); ++i) (constant(node, i) ? constants : tensors).push_back(i);
  if (tensors.empty()) fail(node, "has no tensor input");
  const ValueId first = row_major(node, tensors[0]);
  const auto rank = static_cast<int64_t>(shape(first).rank());
  int64_t axis = attr_int(node, "axis", 0);
  if (axis < 0) axis += rank;
  if (tensors.size() == 1 && !constants.empty()) {  // constant blocks before or after: class tokens
    const Shape& s = shape(first);
    if (axis < 1) fail(node, "a constant joins a tensor along an axis after the first only");
    const auto k = static_cast<size_t>(axis);
    const int64_t outer = product(s.dims(), 1, k), inner = product(s.dims(), k + 1, s.rank());
    ValueId y = first;
    for (bool before : {true, false}) {
      // The constants on this side, joined along the axis (each sample's block is the same).
      std::vector<const ConstTensor*> part;
      for (int i : constants)
        if ((i < tensors[0]) == before) part.push_back(constant(node, i));
      if (part.empty()) continue;
      int64_t count = 0;
      for (const ConstTensor* c : part) {
        bool fits = c->dims.size() == s.rank() && (c->dims[0] == 1 || c->dims[0] == s[0]);
        for (size_t d = 1; fits && d < s.rank(); ++d) fits = d == k || c->dims[d] == s[d];
        if (!fits) {
          fail(node, cat("the constant [", join(c->dims, ", "), "] does not fit ", s.to_string(), " off axis ", axis));
        }
        count += c->dims[k];
      }
      std::vector<float> values;
      for (int64_t o = 0; o < outer; ++o) {
        for (const ConstTensor* c : part) {
          const std::vector<float> v = c->floats();
          const int64_t block = c->dims[k] * inner;
          values.insert(values.end(), v.begin() + o * block, v.begin() + (o + 1) * block);
        }
      }
      ConcatConstantAttrs a;
      a.axis = axis;
      a.count = count;
      a.before = before;
      y = mark(add(node, OpKind::kConcatConstant, a, {y}));
      weights_of_last().weight = std::move(values);
    }
    define(node, 0, y);
    return;
  }
  if (!constants.empty()) fail(node, "concatenation of several constants with tensors is not supported");
  std::vector<ValueId> parts;
  for (int i : tensors) parts.push_back(row_major(node, i));
  define(node, 0, concatenated(node, parts, axis));
}

ValueId Importer::concatenated(const onnx::NodeProto& node, const std::vector<ValueId>& parts, int64_t axis) {
  // Along axis k: every part seen as [dimensions before k, extent, dimensions after k] (a free
  // reshape of a row-major tensor) is joined along its second axis, then shaped back.
  const auto k = static_cast<size_t>(axis);
  std::vector<int64_t> joined = dims_of(shape(parts[0]));
  joined[k] = 0;
  std::vector<ValueId> ins;
  for (ValueId v : parts) {
    const std::vector<int64_t> s = dims_of(shape(v));
    if (s.size() != joined.size()) fail(node, "the parts must have the same rank");
    joined[k] += s[k];
    ins.push_back(axis == 1 && s.size() >= 3 ? v : reshaped(node, v, {product(s, 0, k), s[k], product(s, k + 1, s.size())}));
  }
  const ValueId y = ins.size() == 1 ? ins[0] : mark(add(node, OpKind::kConcat, NoAttrs{}, ins));
  return mark(reshaped(node, y, joined));
}

void Importer::narrow_row_major(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const ValueId x = row_major(node, 0);
  const std::vector<int64_t> s = dims_of(shape(x));
  const auto rank = static_cast<int64_t>(s.size());
  const auto axis_of = [&](int64_t a) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) fail(node, cat("axis ", a, " is outside ", shape(x).to_string()));
    return a;
  };
  if (t == "Gather") {
    const int64_t axis = axis_of(attr_int(node, "axis", 0));
    const ConstTensor* idx = constant(node, 1);
    if (!idx) fail(node, "the indices must be constant");
    std::vector<int64_t> ids = idx->ints();
    for (int64_t& i : ids) i = i < 0 ? i + s[static_cast<size_t>(axis)] : i;
    bool range = !ids.empty();
    for (size_t i = 1; range && i < ids.size(); ++i) range = ids[i] == ids[i - 1] + 1;
    if (!range) fail(node, "only gathers of one index or of consecutive indices are supported");
    const ValueId y = narrowed(node, x, axis, ids.front(), ids.back() + 1);
    // ONNX: data dimensions before the axis, the indices' dimensions, the data dimensions after.
    std::vector<int64_t> target(s.begin(), s.begin() + axis);
    target.insert(target.end(), idx->dims.begin(), idx->dims.end());
    target.insert(target.end(), s.begin() + axis + 1, s.end());
    define(node, 0, mark(reshaped(node, y, target)));
    return;
  }
  if (t == "Split") {
    const int64_t axis = axis_of(attr_int(node, "axis", 0));
    std::vector<int64_t> sizes;
    if (has_input(node, 1)) sizes = constant_ints(node, 1, "the split sizes");
    else sizes = attr_ints(node, "split");
    const int64_t extent = s[static_cast<size_t>(axis)];
    if (sizes.empty()) {
      const int64_t n = node.output_size(), each = (extent + n - 1) / n;
      for (int64_t i = 0; i < n; ++i) sizes.push_back(std::min(each, extent - i * each));
    }
    if (static_cast<int>(sizes.size()) != node.output_size() ||
        std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != extent) {
      fail(node, cat("split sizes [", join(sizes, ", "), "] do not divide axis ", axis, " of ", shape(x).to_string()));
    }
    int64_t begin = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      define(node, static_cast<int>(i), mark(narrowed(node, x, axis, begin, begin + sizes[i])));
      begin += sizes[i];
    }
    return;
  }
  // Slice: starts, ends, axes, steps (1) as constants.
  const std::vector<int64_t> starts = constant_ints(node, 1, "starts");
  const std::vector<int64_t> ends = constant_ints(node, 2, "ends");
  std::vector<int64_t> ax = has_input(node, 3) ? constant_ints(node, 3, "axes") : std::vector<int64_t>{};
  if (ax.empty()) for (size_t i = 0; i < starts.size(); ++i) ax.push_back(static_cast<int64_t>(i));
  const std::vector<int64_t> steps =
      has_input(node, 4) ? constant_ints(node, 4, "steps") : std::vector<int64_t>(ax.size(), 1);
  ValueId y = x;
  for (size_t i = 0; i < ax.size(); ++i) {
    const int64_t axis = axis_of(ax[i]), extent = shape(y)[static_cast<size_t>(axis)];
    const auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + extent : v, int64_t{0}, extent); };
    const int64_t b = clamp(starts[i]), e = clamp(ends[i]), step = steps.at(i);
    if (b >= e) fail(node, cat("the slice [", starts[i], ", ", ends[i], ") of axis ", axis, " is empty"));
    if (step == 1) {
      y = narrowed(node, y, axis, b, e);
      continue;
    }
    // Every step-th element from b < step to the end (Swin's patch merging, x[:, 0::2]): the
    // whole steps of the axis seen as [extent / step, step] (a free reshape), index b of the inner
    // one; an element left in a last partial step joined after them (LeViT's 7 -> 4).
    if (step < 1 || b >= step || e != extent) {
      fail(node, cat("a slice with step ", step, " is supported from a start below the step to the end of an "
                     "axis (axis ", axis, ": [", b, ", ", e, ") of ", extent, ")"));
    }
    const int64_t whole = extent / step * step;
    std::vector<ValueId> parts;
    if (whole > 0) {
      std::vector<int64_t> split = dims_of(shape(y));
      split[static_cast<size_t>(axis)] = whole / step;
      split.insert(split.begin() + axis + 1, step);
      const ValueId picked = narrowed(node, reshaped(node, narrowed(node, y, axis, 0, whole), split), axis + 1, b, b + 1);
      std::vector<int64_t> back = split;
      back.erase(back.begin() + axis + 1);
      parts.push_back(reshaped(node, picked, back));
    }
    if (whole + b < extent) parts.push_back(narrowed(node, y, axis, whole + b, whole + b + 1));
    y = parts.size() == 1 ? parts[0] : concatenated(node, parts, axis);
  }
  define(node, 0, mark(y));
}

}  // namespace stagecraft::graph::onnx_import
