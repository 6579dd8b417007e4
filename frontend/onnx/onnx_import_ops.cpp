// The ONNX importer's translators of the convolutions' ops: Conv, ConvTranspose,
// BatchNormalization, LRN, the pools, Pad (a zero or -inf Pad pending until its readers fold it),
// SpaceToDepth, and the ops on channels and shapes: Concat, Split and Slice of channels (a spatial
// slice is a crop), Flatten; Gemm and MatMul by a constant as a linear layer; GridSample. Each
// translator maps a node whose non-constant inputs are graph tensors onto graph ops, or fails
// with what is unsupported (the other translators: onnx_importer.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

namespace {

// Exporters write "minus infinity" as -inf or as the lowest float.
constexpr float kMinusInfinityBound = -3.0e38f;

bool is_minus_infinity(float v) { return v <= kMinusInfinityBound; }

Pads plus(Pads a, const Pads& b) {
  a.top += b.top;
  a.left += b.left;
  a.bottom += b.bottom;
  a.right += b.right;
  return a;
}

bool non_negative(const Pads& p) { return p.top >= 0 && p.left >= 0 && p.bottom >= 0 && p.right >= 0; }

}  // namespace

std::vector<int64_t> normalised_axes(std::vector<int64_t> axes, size_t rank) {
  for (int64_t& a : axes) {
    if (a < 0) a += static_cast<int64_t>(rank);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

Pads Importer::pads_of(const onnx::NodeProto& node, const Hw& kernel, const Hw& stride,
                       const Hw& dilation, const Shape& in) const {
  const std::string auto_pad = attr_string(node, "auto_pad");
  const auto p = attr_ints(node, "pads");
  if (auto_pad.empty() || auto_pad == "NOTSET") {
    if (p.empty()) return Pads{};
    if (p.size() != 4) fail(node, "pads must have 4 values for a 2-D window");
    return Pads{p[0], p[1], p[2], p[3]};
  }
  if (auto_pad == "VALID") return Pads{};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    fail(node, cat("auto_pad=", auto_pad, " is not supported"));
  }
  auto total = [](int64_t size, int64_t k, int64_t s, int64_t d) {
    const int64_t out = (size + s - 1) / s;
    return std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - size);
  };
  const int64_t th = total(in[2], kernel.h, stride.h, dilation.h);
  const int64_t tw = total(in[3], kernel.w, stride.w, dilation.w);
  const bool upper = auto_pad == "SAME_UPPER";
  const int64_t top = upper ? th / 2 : th - th / 2, left = upper ? tw / 2 : tw - tw / 2;
  return Pads{top, left, th - top, tw - left};
}

Hw Importer::hw(const onnx::NodeProto& node, const char* name, int64_t fallback) const {
  const auto v = attr_ints(node, name);
  if (v.empty()) return Hw{fallback, fallback};
  if (v.size() != 2) fail(node, cat(name, " must have 2 values (2-D ops only)"));
  return Hw{v[0], v[1]};
}

void Importer::conv_transpose(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  const Shape s = shape(x);
  if (s.rank() != 4) fail(node, cat("only 1-D and 2-D transposed convolutions are supported (input ", s.to_string(), ")"));
  const ConstTensor* w = constant(node, 1);
  if (!w) fail_not_constant(node, 1, "the weight (input 1) must be a constant");
  if (w->dims.size() != 4) fail(node, cat("the weight must be 4-D for a 2-D transposed convolution, got [", join(w->dims, ", "), "]"));
  ConvTranspose2dAttrs a;
  a.groups = attr_int(node, "group", 1);
  a.in_channels = w->dims[0];
  a.out_channels = w->dims[1] * a.groups;
  a.kernel = Hw{w->dims[2], w->dims[3]};
  if (a.groups < 1 || a.in_channels % a.groups != 0) fail(node, cat("group ", a.groups, " does not divide the ", a.in_channels, " input channels"));
  if (s[1] != a.in_channels) fail(node, cat("the input has ", s[1], " channels, the weight ", a.in_channels));
  if (const auto k = attr_ints(node, "kernel_shape"); !k.empty() && (k.size() != 2 || Hw{k[0], k[1]} != a.kernel)) {
    fail(node, "kernel_shape does not match the weight");
  }
  a.stride = hw(node, "strides", 1);
  a.dilation = hw(node, "dilations", 1);
  a.output_padding = hw(node, "output_padding", 0);
  const std::string auto_pad = attr_string(node, "auto_pad");
  std::vector<int64_t> out = attr_ints(node, "output_shape");
  if (out.size() > 2) out.erase(out.begin(), out.end() - 2);  // [N, C, H, W] given whole
  if (out.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) out = {s[2] * a.stride.h, s[3] * a.stride.w};
  if (!out.empty()) {
    // ONNX: the paddings that give that output; the odd one at the end for SAME_UPPER (and by
    // default), at the start for SAME_LOWER; a negative end is extra output (output_padding).
    if (out.size() != 2) fail(node, "output_shape must have 2 values");
    int64_t pads[2][2];
    const int64_t in[2] = {s[2], s[3]}, k[2] = {a.kernel.h, a.kernel.w}, st[2] = {a.stride.h, a.stride.w},
                  d[2] = {a.dilation.h, a.dilation.w};
    int64_t* op[2] = {&a.output_padding.h, &a.output_padding.w};
    for (int i = 0; i < 2; ++i) {
      const int64_t total = st[i] * (in[i] - 1) + *op[i] + (k[i] - 1) * d[i] + 1 - out[i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor
      pads[i][0] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[i][1] = total - pads[i][0];
      if (pads[i][1] < 0) {
        *op[i] += -pads[i][1];
        pads[i][1] = 0;
      }
      if (pads[i][0] < 0) fail(node, cat("output_shape [", join(out, ", "), "] needs negative padding at the start"));
    }
    a.padding = Pads{pads[0][0], pads[1][0], pads[0][1], pads[1][1]};
  } else if (auto_pad.empty() || auto_pad == "NOTSET") {
    const std::vector<int64_t> p = attr_ints(node, "pads");
    if (!p.empty() && p.size() != 4) fail(node, "pads must have 4 values");
    if (!p.empty()) a.padding = Pads{p[0], p[1], p[2], p[3]};
  } else if (auto_pad != "VALID") {
    fail(node, cat("auto_pad '", auto_pad, "' is not supported"));
  }
  const ConstTensor* b = constant(node, 2);
  if (has_input(node, 2) && !b) fail_not_constant(node, 2, "the bias (input 2) must be a constant");
  a.bias = b != nullptr;
  // ONNX's weight [in, out / groups, kh, kw] as [out, in / groups, kh, kw].
  const std::vector<float> given = w->floats();
  const int64_t in_per = a.in_channels / a.groups, out_per = a.out_channels / a.groups, taps = a.kernel.h * a.kernel.w;
  std::vector<float> oihw(given.size());
  for (int64_t g = 0; g < a.groups; ++g)
    for (int64_t i = 0; i < in_per; ++i)
      for (int64_t o = 0; o < out_per; ++o)
        for (int64_t t = 0; t < taps; ++t) {
          oihw[static_cast<size_t>(((g * out_per + o) * in_per + i) * taps + t)] =
              given[static_cast<size_t>(((g * in_per + i) * out_per + o) * taps + t)];
        }
  const ValueId y = add_weighted(node, OpKind::kConvTranspose2d, a, {x}, std::move(oihw));
  if (b) {
    weights_of_last().bias = b->floats();
    if (static_cast<int64_t>(weights_of_last().bias.size()) != a.out_channels) fail(node, "the bias must have one value per output channel");
  }
  define(node, 0, y);
}

void Importer::conv(const onnx::NodeProto& node) {
  ValueId x = kNoOp;
  Pads extra;
  if (auto it = pending_pads_.find(node.input(0)); it != pending_pads_.end() && !it->second.negative_infinity) {
    x = it->second.input;  // the zero Pad before it is folded into this convolution
    extra = it->second.pads;
  } else {
    x = input(node, 0);
  }
  const ConstTensor* w = constant(node, 1);
  if (!w) fail_not_constant(node, 1, "the weight (input 1) must be a constant");
  if (w->dims.size() != 4) fail(node, "only 2-D convolutions (4-D weights) are supported");
  Conv2dAttrs a;
  a.out_channels = w->dims[0];
  a.groups = attr_int(node, "group", 1);
  a.in_channels = w->dims[1] * a.groups;
  a.kernel = Hw{w->dims[2], w->dims[3]};
  if (const auto k = attr_ints(node, "kernel_shape");
      !k.empty() && Hw{k[0], k.size() > 1 ? k[1] : k[0]} != a.kernel) {
    fail(node, "kernel_shape does not match the weight");
  }
  a.stride = hw(node, "strides", 1);
  a.dilation = hw(node, "dilations", 1);
  a.padding = plus(pads_of(node, a.kernel, a.stride, a.dilation, shape(x)), extra);
  const ConstTensor* b = constant(node, 2);
  if (has_input(node, 2) && !b) fail_not_constant(node, 2, "the bias (input 2) must be a constant");
  a.bias = b != nullptr;
  const ValueId y = add(node, OpKind::kConv2d, a, {x});
  OpWeights& ow = weights_of_last();
  ow.weight = take_floats(node, 1);
  if (b) ow.bias = b->floats();
  define(node, 0, y);
}

void Importer::batch_norm(const onnx::NodeProto& node) {
  if (node.output_size() > 1 && !node.output(1).empty()) fail(node, "training outputs are not supported");
  if (attr_int(node, "training_mode", 0) != 0) fail(node, "training_mode 1 (batch statistics) is not supported");
  const ValueId x = input(node, 0);
  OpWeights w;
  const char* names[] = {"scale", "bias", "mean", "var"};
  std::vector<float>* slots[] = {&w.gamma, &w.beta, &w.mean, &w.var};
  for (int i = 0; i < 4; ++i) *slots[i] = constant_floats(node, i + 1, names[i]);
  BatchNormAttrs a;
  a.eps = attr_float(node, "epsilon", 1e-5f);
  define(node, 0, add(node, OpKind::kBatchNorm, a, {x}));
  weights_of_last() = std::move(w);
}

namespace {

// Whether a pool of `k` gives one output per plane whose window holds every element of `in`.
bool covers_whole_input(const Hw& k, const Hw& s, const Pads& p, bool ceil, const Shape& in) {
  const auto outputs = [ceil](int64_t size, int64_t window, int64_t stride) {
    const double ratio = static_cast<double>(size - window) / static_cast<double>(stride);
    return static_cast<int64_t>(ceil ? std::ceil(ratio) : std::floor(ratio)) + 1;
  };
  return outputs(in[2] + p.top + p.bottom, k.h, s.h) == 1 && outputs(in[3] + p.left + p.right, k.w, s.w) == 1 &&
         p.top >= 0 && p.left >= 0 && k.h - p.top >= in[2] && k.w - p.left >= in[3] && (k.h > in[2] || k.w > in[3]);
}

}  // namespace

void Importer::pool(const onnx::NodeProto& node) {
  if (node.output_size() > 1 && !node.output(1).empty()) fail(node, "the indices output is not supported");
  const bool max = node.op_type() == "MaxPool";
  ValueId x = kNoOp;
  Pads extra;
  if (auto it = pending_pads_.find(node.input(0)); max && it != pending_pads_.end() && it->second.negative_infinity) {
    x = it->second.input;  // a -inf Pad is the max pool's own padding
    extra = it->second.pads;
  } else {
    x = input(node, 0);
  }
  const Hw k = hw(node, "kernel_shape", 0);
  if (k.h < 1) fail(node, "kernel_shape is required");
  const Hw s = hw(node, "strides", 1);
  if (hw(node, "dilations", 1) != Hw{1, 1}) return pool_nd(node);  // oneDNN's pooling has no dilations
  if (attr_int(node, "storage_order", 0) != 0) fail(node, "storage_order 1 is not supported");
  Pads p = plus(pads_of(node, k, s, Hw{1, 1}, shape(x)), extra);
  bool ceil = attr_int(node, "ceil_mode", 0) != 0;
  const bool count_pad = !max && attr_int(node, "count_include_pad", 0) != 0;
  Hw window = k;
  // (With count_include_pad the divisor is the window clipped to the padded input: the input's
  // size where there is no padding.)
  const bool unpadded = p.top == 0 && p.bottom == 0 && p.left == 0 && p.right == 0;
  if (covers_whole_input(k, s, p, ceil, shape(x)) && (!count_pad || unpadded)) {
    // One window over all of the input, padding or ceil mode making it larger than the input
    // (Hugging Face EfficientNet's AvgPool2d(2560, ceil_mode=True) on 7x7): the global pool.
    window = Hw{shape(x)[2], shape(x)[3]};
    p = Pads{};
    ceil = false;
  }
  if (max) {
    MaxPoolAttrs a;
    a.kernel = window, a.stride = s, a.padding = p, a.ceil_mode = ceil;
    define(node, 0, add(node, OpKind::kMaxPool, a, {x}));
  } else {
    AvgPoolAttrs a;
    a.kernel = window, a.stride = s, a.padding = p, a.ceil_mode = ceil;
    a.count_include_pad = count_pad;
    define(node, 0, add(node, OpKind::kAvgPool, a, {x}));
  }
}

void Importer::pool_nd(const onnx::NodeProto& node) {
  if (node.output_size() > 1 && !node.output(1).empty()) fail(node, "the indices output is not supported");
  if (attr_int(node, "storage_order", 0) != 0) fail(node, "storage_order 1 is not supported");
  const ValueId x = row_major(node, 0);
  const std::vector<int64_t> dims = dims_of(shape(x));
  if (dims.size() < 3) fail(node, cat("the input must be [N, C, spatial...], got ", shape(x).to_string()));
  const size_t axes = dims.size() - 2;
  PoolNdAttrs a;
  a.max = node.op_type() == "MaxPool";
  const auto per_axis = [&](const char* name, int64_t fallback) {
    std::vector<int64_t> v = attr_ints(node, name);
    if (v.empty()) v.assign(axes, fallback);
    if (v.size() != axes) fail(node, cat(name, " must have one value per spatial axis (", axes, "), got ", v.size()));
    return v;
  };
  a.kernel = per_axis("kernel_shape", 0);
  if (std::any_of(a.kernel.begin(), a.kernel.end(), [](int64_t k) { return k < 1; })) fail(node, "kernel_shape is required");
  a.stride = per_axis("strides", 1);
  a.dilation = per_axis("dilations", 1);
  const std::string auto_pad = attr_string(node, "auto_pad");
  if (auto_pad.empty() || auto_pad == "NOTSET" || auto_pad == "VALID") {
    std::vector<int64_t> p = auto_pad == "VALID" ? std::vector<int64_t>{} : attr_ints(node, "pads");
    if (p.empty()) p.assign(2 * axes, 0);
    if (p.size() != 2 * axes) fail(node, cat("pads must have two values per spatial axis (", 2 * axes, ")"));
    a.pad_begin.assign(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(axes));
    a.pad_end.assign(p.begin() + static_cast<std::ptrdiff_t>(axes), p.end());
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t d = 0; d < axes; ++d) {  // the output extent ceil(in / stride), the padding split
      const int64_t in = dims[d + 2], s = a.stride[d];
      const int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + (a.kernel[d] - 1) * a.dilation[d] + 1 - in);
      const int64_t small = total / 2;
      a.pad_begin.push_back(auto_pad == "SAME_UPPER" ? small : total - small);
      a.pad_end.push_back(total - a.pad_begin.back());
    }
  } else {
    fail(node, cat("auto_pad=", auto_pad, " is not supported"));
  }
  a.ceil_mode = attr_int(node, "ceil_mode", 0) != 0;
  a.count_include_pad = !a.max && attr_int(node, "count_include_pad", 0) != 0;
  define_row_major(node, add(node, OpKind::kPoolNd, a, {x}));
}

void Importer::grid_sample(const onnx::NodeProto& node) {
  GridSampleAttrs a;
  std::string mode = attr_string(node, "mode");
  if (mode.empty()) mode = opset_ >= 20 ? "linear" : "bilinear";
  // Opset 20 renamed bilinear and bicubic to linear and cubic (and made them N-D).
  if (mode == "nearest") a.mode = 0;
  else if (mode == "linear" || mode == "bilinear") a.mode = 1;
  else if (mode == "cubic" || mode == "bicubic") a.mode = 2;
  else fail(node, cat("mode '", mode, "' is not nearest, linear or cubic"));
  const std::string padding = attr_string(node, "padding_mode").empty() ? "zeros" : attr_string(node, "padding_mode");
  if (padding == "zeros") a.padding = 0;
  else if (padding == "border") a.padding = 1;
  else if (padding == "reflection") a.padding = 2;
  else fail(node, cat("padding_mode '", padding, "' is not zeros, border or reflection"));
  a.align_corners = attr_int(node, "align_corners", 0) != 0;
  const ValueId x = input(node, 0), grid = input(node, 1);
  const size_t rank = shape(x).rank();
  if (rank != 4 && rank != 5) fail(node, cat("only 2-D and 3-D sampling (a 4-D or 5-D input) is supported, got ", shape(x).to_string()));
  if (a.mode == 2 && rank == 5) fail(node, "cubic sampling of a 3-D input is not defined by ONNX");
  define(node, 0, add(node, OpKind::kGridSample, a, {x, grid}));
}

void Importer::concat(const onnx::NodeProto& node) {
  std::vector<ValueId> ins;
  for (int i = 0; i < node.input_size(); ++i) {
    if (empty_values_.count(node.input(i))) continue;  // a part with no channels
    ins.push_back(input(node, i));
  }
  if (ins.empty()) fail(node, "every part is empty");
  const int64_t rank = static_cast<int64_t>(shape(ins[0]).rank());
  int64_t axis = attr_int(node, "axis", 1);
  if (axis < 0) axis += rank;
  if (axis != 1 || rank != 4) fail(node, cat("only concatenation of 4-D tensors along channels (axis 1)"));
  define(node, 0, ins.size() == 1 ? ins[0] : add(node, OpKind::kConcat, ConcatAttrs{}, ins));
}

void Importer::gemm(const onnx::NodeProto& node) {
  const bool matmul_node = node.op_type() == "MatMul";
  // MatMul of two activations, or over the last axis of a tensor of another rank.
  if (matmul_node && (!constant(node, 1) || pending_views_.count(node.input(0)) ||
                      shape(input(node, 0)).rank() != 2)) {
    return matmul(node);
  }
  ValueId x = input(node, 0);
  if (shape(x).rank() != 2) fail(node, cat("only 2-D inputs are supported (got ", shape(x).to_string(), ")"));
  // Y = alpha · A' · B' + beta · C: alpha scales the weight, beta the bias, and A' = Aᵀ a transpose.
  const float alpha = matmul_node ? 1.0f : attr_float(node, "alpha", 1.0f);
  const float beta = matmul_node ? 1.0f : attr_float(node, "beta", 1.0f);
  if (!matmul_node && attr_int(node, "transA", 0) != 0) {
    TransposeAttrs t;
    t.perm = {1, 0};
    x = add(node, OpKind::kTranspose, t, {x});
  }
  const ConstTensor* b = constant(node, 1);
  if (!b || b->dims.size() != 2) fail(node, "the second input must be a 2-D constant");
  const bool trans_b = !matmul_node && attr_int(node, "transB", 0) != 0;
  const int64_t out = trans_b ? b->dims[0] : b->dims[1];
  const int64_t in = trans_b ? b->dims[1] : b->dims[0];
  std::vector<float> w = b->floats();
  if (!trans_b) {  // [in, out] -> [out, in]
    std::vector<float> t(w.size());
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) t[static_cast<size_t>(o * in + i)] = w[static_cast<size_t>(i * out + o)];
    w = std::move(t);
  }
  if (alpha != 1.0f) {
    for (float& v : w) v *= alpha;
  }
  const ConstTensor* c = matmul_node ? nullptr : constant(node, 2);
  if (!matmul_node && has_input(node, 2) && !c) fail_not_constant(node, 2, "the bias (input 2) must be a constant");
  LinearAttrs a;
  a.in_features = in;
  a.out_features = out;
  a.bias = c != nullptr;
  const ValueId y = add(node, OpKind::kLinear, a, {x});
  OpWeights& ow = weights_of_last();
  ow.weight = std::move(w);
  if (c) {
    ow.bias = c->floats();
    if (beta != 1.0f) {
      for (float& v : ow.bias) v *= beta;
    }
    if (ow.bias.size() == 1 && out > 1) ow.bias.assign(static_cast<size_t>(out), ow.bias[0]);
    if (static_cast<int64_t>(ow.bias.size()) != out) fail(node, "the bias must have one value per output");
  }
  define(node, 0, y);
}

void Importer::pad(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  const std::string mode = attr_string(node, "mode");
  if (!mode.empty() && mode != "constant" && mode != "reflect") {
    fail(node, cat("mode '", mode, "' is not supported (constant and reflect are)"));
  }
  std::vector<int64_t> p;
  float value = 0;
  if (opset_ >= 11) {
    p = constant_ints(node, 1, "pads");
    if (auto v = constant_scalar(node, 2)) value = *v;
    if (has_input(node, 3)) {  // opset 18: the axes the pads apply to
      const auto a = normalised_axes(constant_ints(node, 3, "axes"), shape(x).rank());
      std::vector<int64_t> full(2 * shape(x).rank(), 0);
      for (size_t i = 0; i < a.size(); ++i) {
        full[static_cast<size_t>(a[i])] = p[i];
        full[static_cast<size_t>(a[i]) + shape(x).rank()] = p[i + a.size()];
      }
      p = full;
    }
  } else {
    p = attr_ints(node, "pads");
    value = attr_float(node, "value", 0);
  }
  if (shape(x).rank() != 4 || p.size() != 8 || p[0] != 0 || p[1] != 0 || p[4] != 0 || p[5] != 0) {
    fail(node, "only padding of H and W of a 4-D tensor is supported");
  }
  const Pads pads{p[2], p[3], p[6], p[7]};
  if (mode == "reflect") {
    PadAttrs a;
    a.pads = pads;
    a.reflect = true;
    define(node, 0, add(node, OpKind::kPad, a, {x}));
    return;
  }
  const auto& kinds = reader_kinds(node);
  const bool only = kinds.size() == 1 && non_negative(pads);
  if (only && value == 0.0f && *kinds.begin() == "Conv") {
    pending_pads_[node.output(0)] = PendingPad{x, pads, false};  // folded into the convolutions
    return;
  }
  if (only && is_minus_infinity(value) && *kinds.begin() == "MaxPool") {
    pending_pads_[node.output(0)] = PendingPad{x, pads, true};  // the max pools' own padding
    return;
  }
  if (is_minus_infinity(value)) {
    fail(node, "padding with minus infinity is supported only right before max pools");
  }
  PadAttrs a;
  a.pads = pads;
  a.value = value;
  define(node, 0, add(node, OpKind::kPad, a, {x}));
}

void Importer::slice(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  const Shape& s = shape(x);
  const auto values = [&](int slot, const char* attr_name) -> std::vector<int64_t> {
    if (opset_ < 10 && node.input_size() == 1) return attr_ints(node, attr_name);  // Slice-1 (and an expansion's Slice-10)
    if (!has_input(node, slot)) return {};
    return constant_ints(node, slot, attr_name);
  };
  const auto starts = values(1, "starts"), ends = values(2, "ends");
  auto axes_v = values(3, "axes"), steps = values(4, "steps");
  if (axes_v.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes_v.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes_v.size() != starts.size() || steps.size() != starts.size()) {
    fail(node, "starts, ends, axes and steps differ in length");
  }
  if (s.rank() != 4) fail(node, "only slices of 4-D tensors are supported");
  std::vector<int64_t> begin{0, 0, 0, 0}, end(s.dims().begin(), s.dims().end());
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = axes_v[k] < 0 ? axes_v[k] + 4 : axes_v[k];
    if (a < 0 || a > 3) fail(node, cat("axis ", axes_v[k], " out of range"));
    if (steps[k] != 1) fail(node, "only slices with step 1 are supported");
    const int64_t dim = s[static_cast<size_t>(a)];
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
    begin[static_cast<size_t>(a)] = clamp(starts[k]);
    end[static_cast<size_t>(a)] = std::max(clamp(ends[k]), begin[static_cast<size_t>(a)]);
  }
  if (begin[0] != 0 || end[0] != s[0]) fail(node, "slicing the batch is not supported");
  if (end[1] == begin[1] && begin[2] < end[2] && begin[3] < end[3]) {
    // No channels (x[:, c:] with c = C): nothing a graph holds; concatenations skip it.
    empty_values_[node.output(0)] = {s[0], 0, end[2] - begin[2], end[3] - begin[3]};
    return;
  }
  if (end[1] == begin[1] || end[2] == begin[2] || end[3] == begin[3]) fail(node, "the slice is empty");
  ValueId y = x;
  if (begin[1] != 0 || end[1] != s[1]) {
    SliceAttrs a;
    a.begin = begin[1];
    a.end = end[1];
    y = add(node, OpKind::kSlice, a, {y});
  }
  if (begin[2] != 0 || end[2] != s[2] || begin[3] != 0 || end[3] != s[3]) {
    PadAttrs crop;  // a spatial slice is a crop: negative padding
    crop.pads = Pads{-begin[2], -begin[3], end[2] - s[2], end[3] - s[3]};
    y = add(node, OpKind::kPad, crop, {y});
  }
  define(node, 0, y);
}

void Importer::split(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  int64_t axis = attr_int(node, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(shape(x).rank());
  if (axis != 1) fail(node, "only splits along channels (axis 1) are supported");
  std::vector<int64_t> sizes = attr_ints(node, "split");
  if (has_input(node, 1)) sizes = constant_ints(node, 1, "split sizes");
  const int64_t channels = shape(x)[1];
  if (sizes.empty()) {
    const int64_t n = attr_int(node, "num_outputs", node.output_size());
    const int64_t each = (channels + n - 1) / n;  // opset 18: the last part may be smaller
    for (int64_t c = 0; c < channels; c += each) sizes.push_back(std::min(each, channels - c));
  }
  SplitAttrs a;
  a.sizes = sizes;
  add(node, OpKind::kSplit, a, {x});
  const Op& op = graph_.op(last_op_);
  if (static_cast<size_t>(node.output_size()) != op.outputs.size()) {
    fail(node, cat("has ", node.output_size(), " outputs for ", op.outputs.size(), " parts"));
  }
  for (int i = 0; i < node.output_size(); ++i) define(node, i, op.outputs.at(static_cast<size_t>(i)));
}

void Importer::lrn(const onnx::NodeProto& node) {
  LrnAttrs a;
  a.size = attr_int(node, "size", 0);
  a.alpha = attr_float(node, "alpha", 1e-4f);
  a.beta = attr_float(node, "beta", 0.75f);
  a.bias = attr_float(node, "bias", 1.0f);
  if (a.size < 1 || a.size % 2 == 0) fail(node, cat("size ", a.size, " is not supported (an odd size: a window centred on each channel)"));
  define(node, 0, add(node, OpKind::kLrn, a, {input(node, 0)}));
}

void Importer::space_to_depth(const onnx::NodeProto& node) {
  SpaceToDepthAttrs a;
  a.block = attr_int(node, "blocksize", 0);
  const std::string mode = attr_string(node, "mode");
  if (mode == "CRD") {  // output channel c · b² + (row · b + column): reshape, transpose, reshape
    const ValueId x = row_major(node, 0);
    const std::vector<int64_t> s = dims_of(shape(x));
    const int64_t b = a.block;
    if (s.size() != 4 || b < 1 || s[2] % b != 0 || s[3] % b != 0) {
      fail(node, cat("blocksize ", b, " must divide the height and width of a 4-D input (", shape(x).to_string(), ")"));
    }
    TransposeAttrs p;
    p.perm = {0, 1, 3, 5, 2, 4};
    const ValueId blocks = reshaped(node, x, {s[0], s[1], s[2] / b, b, s[3] / b, b});
    const ValueId moved = mark(add(node, OpKind::kTranspose, p, {blocks}));
    define_row_major(node, reshaped(node, moved, {s[0], s[1] * b * b, s[2] / b, s[3] / b}));
    return;
  }
  if (!mode.empty() && mode != "DCR") {
    fail(node, cat("mode '", mode, "' is not supported (DCR: blocks ordered depth, column, row; or CRD)"));
  }
  define(node, 0, add(node, OpKind::kSpaceToDepth, a, {input(node, 0)}));
}

void Importer::flatten(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  const Shape s = shape(x);
  const auto rank = static_cast<int64_t>(s.rank());
  int64_t axis = attr_int(node, "axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) fail(node, cat("axis ", attr_int(node, "axis", 1), " is not an axis of ", s.to_string()));
  if (axis == 1 && rank == 2) {
    define(node, 0, x);
  } else if (axis == 1 && rank == 4) {
    define(node, 0, add(node, OpKind::kFlatten, NoAttrs{}, {x}));
  } else {  // [d0 ... d(axis-1), d(axis) ... ] -> [their two products], in row-major order
    const auto at = static_cast<size_t>(axis);
    define(node, 0, reshaped(node, x, {product(s.dims(), 0, at), product(s.dims(), at, s.rank())}));
  }
}

}  // namespace stagecraft::graph::onnx_import
