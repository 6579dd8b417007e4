// The ONNX importer's row-major tensors, continued (see onnx_import_tensors.cpp): matrix
// products (MatMul, Einsum), joins (Concat with constant blocks or along any axis), narrows
// (Slice with steps, Split, Gather of a range), and normalisations written per channel
// (BatchNormalization of tokens, InstanceNormalization).
#include <algorithm>
#include <limits>
#include <cmath>
#include <numeric>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

ValueId Importer::affine(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& dims,
                         std::vector<float> scale, std::vector<float> shift) {
  const bool unit = std::all_of(scale.begin(), scale.end(), [](float v) { return v == 1.0f; });
  const bool zero = std::all_of(shift.begin(), shift.end(), [](float v) { return v == 0.0f; });
  BinaryAttrs a;
  a.constant = dims;
  if (!unit) {
    a.op = BinaryOp::kMul;
    x = mark(add_weighted(node, OpKind::kBinary, a, {x}, std::move(scale)));
  }
  if (!zero) {
    a.op = BinaryOp::kAdd;
    x = mark(add_weighted(node, OpKind::kBinary, a, {x}, std::move(shift)));
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
  std::vector<int64_t> b_dims = b ? b->dims : std::vector<int64_t>{};
  while (b_dims.size() > 2 && b_dims.front() == 1) b_dims.erase(b_dims.begin());
  if (b && b_dims.size() == 2 && !constant(node, 0)) {  // by constant weights [K, N] (leading 1s allowed): a linear layer over the last axis
    const std::vector<int64_t>& dims = b_dims;
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
    define(node, 0, mark(add_weighted(node, OpKind::kLinear, a, {x}, std::move(wt))));
    return;
  }
  // A constant first operand or a batch of constant matrices (a recurrence's zero state): the
  // constant as a tensor, then the product of two tensors.
  const auto operand = [&](int slot, int other) {
    const ConstTensor* c = constant(node, slot);
    if (!c) return row_major(node, slot);
    if (constant(node, other)) fail(node, "both operands are constants (the product folds)");
    return constant_tensor(node, *c, row_major(node, other));
  };
  ValueId x = operand(0, 1), y = operand(1, 0);
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

ValueId Importer::padded(const onnx::NodeProto& node, ValueId x) {
  const std::string mode = attr_string(node, "mode");
  if (!mode.empty() && mode != "constant") fail(node, cat("mode '", mode, "' of a row-major tensor is not supported (constant)"));
  const std::vector<int64_t> pads = has_input(node, 1) ? constant_ints(node, 1, "the pads") : attr_ints(node, "pads");
  const size_t rank = shape(x).rank();
  std::vector<int64_t> axes(rank);
  std::iota(axes.begin(), axes.end(), int64_t{0});
  if (has_input(node, 3)) {  // in the order given: the pads follow it
    axes = constant_ints(node, 3, "the axes");
    for (int64_t& a : axes) a = a < 0 ? a + static_cast<int64_t>(rank) : a;
  }
  if (pads.size() != 2 * axes.size()) {
    fail(node, cat(pads.size(), " pads for ", axes.size(), " axes (two per axis: all the begins, then the ends)"));
  }
  const float value = has_input(node, 2) ? constant_scalar(node, 2).value_or(0.0f) : attr_float(node, "value", 0.0f);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i];
    for (bool before : {true, false}) {
      const int64_t count = pads[before ? i : i + axes.size()];
      if (count == 0) continue;
      if (axis == 0) fail(node, "padding the batch axis is not supported");
      const int64_t extent = shape(x)[static_cast<size_t>(axis)];
      if (count < 0) {  // a crop
        x = before ? narrowed(node, x, axis, -count, extent) : narrowed(node, x, axis, 0, extent + count);
        continue;
      }
      std::vector<int64_t> block = dims_of(shape(x));
      block[0] = 1;
      block[static_cast<size_t>(axis)] = count;
      ConcatConstantAttrs a;
      a.axis = axis;
      a.count = count;
      a.before = before;
      x = mark(add_weighted(node, OpKind::kConcatConstant, a, {x},
                            std::vector<float>(static_cast<size_t>(product(block)), value)));
    }
  }
  return x;
}

void Importer::concat_row_major(const onnx::NodeProto& node) {
  std::vector<int> tensors, constants;
  for (int i = 0; i < node.input_size(); ++i) {
    if (empty_values_.count(node.input(i))) continue;  // an empty part adds nothing
    const ConstTensor* c = constant(node, i);
    if (c && c->numel() == 0) continue;
    (c ? constants : tensors).push_back(i);
  }
  if (tensors.empty()) fail(node, "has no tensor input (or only empty ones)");
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
      y = mark(add_weighted(node, OpKind::kConcatConstant, a, {y}, std::move(values)));
    }
    define(node, 0, y);
    return;
  }
  std::vector<ValueId> parts;  // constants among several tensors made tensors (DINOv2's registers)
  for (int i = 0; i < node.input_size(); ++i) {
    if (std::count(tensors.begin(), tensors.end(), i)) parts.push_back(row_major(node, i));
    if (std::count(constants.begin(), constants.end(), i)) parts.push_back(constant_tensor(node, *constant(node, i), first));
  }
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
  const ValueId y = ins.size() == 1 ? ins[0] : mark(add(node, OpKind::kConcat, ConcatAttrs{}, ins));
  return mark(reshaped(node, y, joined));
}

void Importer::narrow_row_major(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const ValueId x = row_major(node, 0);
  if (t == "Gather") return gather_row_major(node, x, row_major_axis(node, x, attr_int(node, "axis", 0)));
  if (t == "Split") return split_row_major(node, x, row_major_axis(node, x, attr_int(node, "axis", 0)));
  slice_row_major(node, x);
}

void Importer::gather_row_major(const onnx::NodeProto& node, ValueId x, int64_t axis) {
  const std::vector<int64_t> s = dims_of(shape(x));
  const ConstTensor* idx = constant(node, 1);
  if (!idx) fail_not_constant(node, 1, "the indices must be constant");
  std::vector<int64_t> ids = idx->ints();
  if (ids.empty()) fail(node, "the indices are empty");
  const int64_t extent = s[static_cast<size_t>(axis)];
  for (int64_t& i : ids) {
    i = i < 0 ? i + extent : i;
    if (i < 0 || i >= extent) fail(node, cat("index ", i, " is outside axis ", axis, " of ", shape(x).to_string()));
  }
  // Runs of consecutive indices, each a narrow, joined along the axis (MobileViT's unfolding
  // gathers every other pixel).
  std::vector<ValueId> parts;
  for (size_t begin = 0; begin < ids.size();) {
    size_t end = begin + 1;
    while (end < ids.size() && ids[end] == ids[end - 1] + 1) ++end;
    parts.push_back(narrowed(node, x, axis, ids[begin], ids[end - 1] + 1));
    begin = end;
  }
  const ValueId y = parts.size() == 1 ? parts[0] : concatenated(node, parts, axis);
  // ONNX: data dimensions before the axis, the indices' dimensions, the data dimensions after.
  std::vector<int64_t> target(s.begin(), s.begin() + axis);
  target.insert(target.end(), idx->dims.begin(), idx->dims.end());
  target.insert(target.end(), s.begin() + axis + 1, s.end());
  define(node, 0, mark(reshaped(node, y, target)));
}

void Importer::split_row_major(const onnx::NodeProto& node, ValueId x, int64_t axis) {
  const std::vector<int64_t> s = dims_of(shape(x));
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
    if (sizes[i] == 0) {  // an empty part (a rotation over the whole head leaves nothing unrotated)
      std::vector<int64_t> dims = s;
      dims[static_cast<size_t>(axis)] = 0;
      empty_values_[node.output(static_cast<int>(i))] = dims;
      continue;
    }
    define(node, static_cast<int>(i), mark(narrowed(node, x, axis, begin, begin + sizes[i])));
    begin += sizes[i];
  }
}

// Slice: starts, ends, axes, steps (1) as constants.
void Importer::slice_row_major(const onnx::NodeProto& node, ValueId x) {
  const std::vector<int64_t> starts = constant_ints(node, 1, "starts");
  const std::vector<int64_t> ends = constant_ints(node, 2, "ends");
  std::vector<int64_t> ax = has_input(node, 3) ? constant_ints(node, 3, "axes") : std::vector<int64_t>{};
  if (ax.empty()) for (size_t i = 0; i < starts.size(); ++i) ax.push_back(static_cast<int64_t>(i));
  const std::vector<int64_t> steps =
      has_input(node, 4) ? constant_ints(node, 4, "steps") : std::vector<int64_t>(ax.size(), 1);
  {
    // A slice with no elements is a constant (Ultralytics' NMS head slices the extra columns of
    // a detect model, none, and gathers from them).
    std::vector<int64_t> out = dims_of(shape(x));
    bool empty = false;
    for (size_t i = 0; i < ax.size(); ++i) {
      const int64_t axis = row_major_axis(node, x, ax[i]), extent = out[static_cast<size_t>(axis)], step = steps.at(i);
      const auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + extent : v, int64_t{0}, extent); };
      if (step < 1) continue;
      const int64_t b = clamp(starts[i]), e = clamp(ends[i]);
      out[static_cast<size_t>(axis)] = e > b ? (e - b + step - 1) / step : 0;
      empty = empty || e <= b;
    }
    if (empty) {
      ConstTensor none = ConstTensor::of_floats({}, out);
      if (is_integer(node.input(0))) none.kind = ElemKind::kInt, none.onnx_type = onnx::TensorProto::INT64;
      constants_[node.output(0)] = std::move(none);
      return;
    }
  }
  ValueId y = x;
  for (size_t i = 0; i < ax.size(); ++i) {
    const int64_t axis = row_major_axis(node, x, ax[i]), extent = shape(y)[static_cast<size_t>(axis)];
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

namespace {

// An Einsum equation of one or two operands with explicit output ("nixw,jyw->nijxy").
struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

std::optional<Equation> parse_equation(std::string eq) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  if (arrow == std::string::npos || eq.find('.') != std::string::npos) return std::nullopt;
  Equation e;
  e.output = eq.substr(arrow + 2);
  std::string lhs = eq.substr(0, arrow);
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    e.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return e;
}

// The permutation putting the letters of `from` in the order of `to` (every letter of `to` is in
// `from`).
std::vector<int64_t> permutation(const std::string& from, const std::string& to) {
  std::vector<int64_t> perm;
  for (char c : to) perm.push_back(static_cast<int64_t>(from.find(c)));
  return perm;
}

// The product of the extents of `letters` in an operand whose letters are `where` and whose
// dimensions are `dims`.
int64_t letters_size(const std::string& letters, const std::string& where, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (char c : letters) n *= dims[where.find(c)];
  return n;
}

// The extents of `letters` in that operand, in their order.
std::vector<int64_t> letters_extents(const std::string& letters, const std::string& where,
                                     const std::vector<int64_t>& dims) {
  std::vector<int64_t> e;
  for (char c : letters) e.push_back(dims[where.find(c)]);
  return e;
}

// The elements of a constant operand `c` of letters `cl` in the order of `letters` (all of its
// letters).
std::vector<float> constant_in_order(const ConstTensor& c, const std::string& cl, const std::string& letters) {
  const std::vector<int64_t> cperm = permutation(cl, letters);
  std::vector<int64_t> cstrides(cl.size(), 1);
  for (size_t d = cl.size(); d-- > 1;) cstrides[d - 1] = cstrides[d] * c.dims[d];
  const std::vector<float> values = c.floats();
  std::vector<float> w(values.size());
  const std::vector<int64_t> pdims = letters_extents(letters, cl, c.dims);
  for (size_t i = 0; i < w.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), at = 0;
    for (size_t d = pdims.size(); d-- > 0;) {
      at += rest % pdims[d] * cstrides[static_cast<size_t>(cperm[d])];
      rest /= pdims[d];
    }
    w[i] = values[static_cast<size_t>(at)];
  }
  return w;
}

}  // namespace

ValueId Importer::permuted(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  TransposeAttrs t;
  t.perm = perm;
  return mark(add(node, OpKind::kTranspose, t, {x}));
}

void Importer::scatter_row_major(const onnx::NodeProto& node) {
  // A slice assignment by constant indices (MViTv2's attn[:, :, 0:, 0:] = ..., Deformable DETR's
  // boxes[..., :2] = ...): indices naming, in row-major order, a box of the data that spans every
  // axis but at most one. The updates in that box's shape, joined with the data before and after it
  // along that axis.
  const std::string reduction = attr_string(node, "reduction");
  if (!reduction.empty() && reduction != "none") fail(node, cat("reduction '", reduction, "' is not supported"));
  const ValueId data = row_major(node, 0);
  const ConstTensor* idx = constant(node, 1);
  if (!idx) fail_not_constant(node, 1, "the indices must be constant");
  const std::vector<int64_t> d = dims_of(shape(data));
  const size_t k = idx->dims.empty() ? 0 : static_cast<size_t>(idx->dims.back());
  std::vector<int64_t> ids = idx->ints();
  const char* what = "only a ScatterND whose indices name, in order, a slice of its data along at most one axis "
                     "(a slice assignment) is supported";
  if (k == 0 || k > d.size() || ids.empty()) fail(node, what);
  std::vector<int64_t> lo(k, std::numeric_limits<int64_t>::max()), hi(k, std::numeric_limits<int64_t>::min());
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t& v = ids[i];
    const int64_t extent = d[i % k];
    if (v < -extent || v >= extent) fail(node, cat("index ", v, " is outside axis ", i % k, " of ", extent));
    if (v < 0) v += extent;
    lo[i % k] = std::min(lo[i % k], v);
    hi[i % k] = std::max(hi[i % k], v + 1);
  }
  std::vector<int64_t> box(d.begin(), d.end());
  int64_t partial = -1;
  for (size_t a = 0; a < k; ++a) {
    box[a] = hi[a] - lo[a];
    if (box[a] == d[a]) continue;
    if (partial >= 0) fail(node, what);
    partial = static_cast<int64_t>(a);
  }
  if (static_cast<int64_t>(ids.size() / k) != product(box, 0, k)) fail(node, what);
  std::vector<int64_t> next(lo);  // the element the next index must name
  for (size_t i = 0; i < ids.size(); i += k) {
    if (!std::equal(next.begin(), next.end(), ids.begin() + static_cast<std::ptrdiff_t>(i))) fail(node, what);
    for (size_t j = k; j-- > 0;) {
      if (++next[j] < hi[j]) break;
      next[j] = lo[j];
    }
  }
  const ValueId updates = row_major(node, 2);
  if (shape(updates).numel() != product(box)) fail(node, what);
  const ValueId inside = reshaped(node, updates, box);
  if (partial < 0) return define(node, 0, mark(inside));
  const auto a = static_cast<size_t>(partial);
  std::vector<ValueId> parts;
  if (lo[a] > 0) parts.push_back(narrowed(node, data, partial, 0, lo[a]));
  parts.push_back(inside);
  if (hi[a] < d[a]) parts.push_back(narrowed(node, data, partial, hi[a], d[a]));
  define(node, 0, mark(concatenated(node, parts, partial)));
}

// The letters of a two-operand Einsum by their role.
struct Importer::EinsumLetters {
  std::string a, b, out;       // the operands' and the output's
  std::string batch;           // in both operands and the output
  std::string free_a, free_b;  // in one operand and the output
  std::string contracted;      // in both operands, not in the output (summed over)
};

void Importer::einsum(const onnx::NodeProto& node) {
  // Contractions of two operands (MaxViT's and MViTv2's relative positions): each operand
  // permuted to [batch, free, contracted] (or [batch, contracted, free]), a matmul of two tensors
  // or a linear layer by a constant operand, then the output's order.
  const auto eq = parse_equation(attr_string(node, "equation"));
  if (!eq || eq->inputs.size() != static_cast<size_t>(node.input_size()) || eq->inputs.size() > 2) {
    fail(node, cat("only equations of one or two operands with an explicit output and no ellipsis are "
                   "supported ('", attr_string(node, "equation"), "')"));
  }
  const std::string& out = eq->output;
  if (eq->inputs.size() == 1) {  // a permutation
    if (eq->inputs[0].size() != out.size()) fail(node, "an operand's letters must all be in the output");
    define(node, 0, mark(permuted(node, row_major(node, 0), permutation(eq->inputs[0], out))));
    return;
  }
  EinsumLetters l;
  l.a = eq->inputs[0];
  l.b = eq->inputs[1];
  l.out = out;
  for (char c : l.a) {
    const bool in_b = l.b.find(c) != std::string::npos, in_out = out.find(c) != std::string::npos;
    if (in_b && in_out) l.batch += c;
    else if (in_b) l.contracted += c;
    else if (in_out) l.free_a += c;
    else fail(node, cat("index '", c, "' is summed over one operand alone (not supported)"));
  }
  for (char c : l.b) {
    if (l.a.find(c) == std::string::npos) {
      if (out.find(c) == std::string::npos) fail(node, cat("index '", c, "' is summed over one operand alone (not supported)"));
      l.free_b += c;
    }
  }
  const bool const_a = constant(node, 0) != nullptr, const_b = constant(node, 1) != nullptr;
  if (const_a && const_b) fail(node, "an Einsum of two constants should have been folded");
  std::string result;  // the letters of the product before the output's permutation
  const ValueId y = const_a || const_b ? einsum_by_constant(node, l, &result) : einsum_of_tensors(node, l, &result);
  define(node, 0, mark(permuted(node, y, permutation(result, out))));
}

ValueId Importer::einsum_by_constant(const onnx::NodeProto& node, const EinsumLetters& l, std::string* result) {
  const bool const_a = constant(node, 0) != nullptr;
  const int t_slot = const_a ? 1 : 0;
  const std::string& tl = const_a ? l.b : l.a;
  const std::string& cl = const_a ? l.a : l.b;
  const std::string& t_free = const_a ? l.free_b : l.free_a;
  const std::string& c_free = const_a ? l.free_a : l.free_b;
  const std::string &batch = l.batch, &contracted = l.contracted;
  const ConstTensor& c = *constant(node, const_a ? 0 : 1);
  const ValueId x = row_major(node, t_slot);
  const std::vector<int64_t> tdims = dims_of(shape(x));
  for (char ch : batch) {
    if (c.dims[cl.find(ch)] != tdims[tl.find(ch)]) fail(node, cat("index '", ch, "' has different extents in the operands"));
  }
  const int64_t k = letters_size(contracted, tl, tdims), n = letters_size(c_free, cl, c.dims);
  const int64_t rows_n = letters_size(t_free, tl, tdims);
  ValueId y;
  if (batch.empty()) {
    // A linear layer over the tensor's contracted letters; the constant's free letters are its
    // output features: the weight [n, k] is the constant in the order (free, contracted).
    const ValueId rows = reshaped(node, permuted(node, x, permutation(tl, t_free + contracted)), {rows_n, k});
    LinearAttrs la;
    la.in_features = k;
    la.out_features = n;
    la.bias = false;
    y = mark(add_weighted(node, OpKind::kLinear, la, {rows}, constant_in_order(c, cl, c_free + contracted)));
    *result = t_free + c_free;
  } else {
    // One matrix per index of the shared letters (MViTv2's relative positions, per query row):
    // a grouped 1x1 convolution over [1, B·k, rows, 1], B groups, weights [B·n, k] = the
    // constant in the order (batch, free, contracted).
    const int64_t nb = letters_size(batch, tl, tdims);
    const ValueId flat = reshaped(node, permuted(node, x, permutation(tl, batch + contracted + t_free)),
                                  {1, nb * k, rows_n, 1});
    ReshapeAttrs to_maps;  // the row-major [1, B·k, rows, 1] as a tensor of the convolutions
    to_maps.dims = {nb * k, rows_n, 1};
    const ValueId maps = add(node, OpKind::kReshape, to_maps, {flat});
    Conv2dAttrs ca;
    ca.in_channels = nb * k;
    ca.out_channels = nb * n;
    ca.kernel = Hw{1, 1};
    ca.groups = nb;
    const std::string conv_out = node.output(0) + "/per_batch";
    values_[conv_out] = add_weighted(node, OpKind::kConv2d, ca, {maps}, constant_in_order(c, cl, batch + c_free + contracted));
    y = row_major_named(node, conv_out);
    *result = batch + c_free + t_free;
  }
  std::vector<int64_t> dims;
  for (char ch : *result) dims.push_back(tl.find(ch) != std::string::npos ? tdims[tl.find(ch)] : c.dims[cl.find(ch)]);
  return reshaped(node, y, dims);
}

ValueId Importer::einsum_of_tensors(const onnx::NodeProto& node, const EinsumLetters& l, std::string* result) {
  const std::string &a = l.a, &b = l.b, &batch = l.batch, &free_a = l.free_a, &free_b = l.free_b;
  const ValueId x = row_major(node, 0), z = row_major(node, 1);
  const std::vector<int64_t> ad = dims_of(shape(x)), bd = dims_of(shape(z));
  for (char c : batch + l.contracted) {
    if (ad[a.find(c)] != bd[b.find(c)]) fail(node, cat("index '", c, "' has different extents in the operands"));
  }
  const int64_t nb = letters_size(batch, a, ad), m = letters_size(free_a, a, ad), k = letters_size(l.contracted, a, ad),
                n = letters_size(free_b, b, bd);
  const ValueId lhs = reshaped(node, permuted(node, x, permutation(a, batch + free_a + l.contracted)), {nb, m, k});
  const ValueId rhs = reshaped(node, permuted(node, z, permutation(b, batch + l.contracted + free_b)), {nb, k, n});
  const ValueId y = mark(add(node, OpKind::kMatMul, NoAttrs{}, {lhs, rhs}));
  std::vector<int64_t> dims = letters_extents(batch + free_a, a, ad);
  const std::vector<int64_t> fb = letters_extents(free_b, b, bd);
  dims.insert(dims.end(), fb.begin(), fb.end());
  *result = batch + free_a + free_b;
  return reshaped(node, y, dims);
}

}  // namespace stagecraft::graph::onnx_import
