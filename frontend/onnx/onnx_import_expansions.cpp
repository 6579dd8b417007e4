// The ONNX importer's expansions: ops written as other ONNX ops, the way ONNX itself defines many
// of them as functions, then imported node by node. Attention, RMSNormalization, GroupNormalization,
// MeanVarianceNormalization, LpNormalization and PRelu always; LayerNormalization over other
// axes than the last or with its mean and inverse-deviation outputs; Instance- and
// BatchNormalization whose parameters are tensors of the model; Gemm of two tensors or with a
// bias that varies by row; MatMul of a vector; LpPool as an average pool of |x|^p; global pools of
// other ranks than 4 as reductions (DFT: onnx_import_dft.cpp; Gather by computed indices and Trilu:
// onnx_import_indices.cpp). An op with a
// direct translation (a fused layer norm, a linear layer) keeps it wherever that applies; the
// expansion takes the rest, with ONNX's semantics and each step a graph op of its own.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"
#include "frontend/onnx/onnx_patterns.h"

namespace stagecraft::graph::onnx_import {

bool Importer::expands(const onnx::NodeProto& node) const {
  const std::string& t = node.op_type();
  static const std::set<std::string, std::less<>> kAlways = {
      "RMSNormalization", "GroupNormalization", "MeanVarianceNormalization", "LpNormalization", "PRelu", "LpPool",
      "Attention", "SwiGLU", "RotaryEmbedding", "CausalConvWithState", "Upsample", "LinearAttention", "Col2Im", "DFT",
      "Trilu", "DeformConv", "FlexAttention", "Det"};
  if (kAlways.count(t)) return true;
  const auto named = [&](int slot) { return slot < node.output_size() && !node.output(slot).empty(); };
  const auto tensor = [&](int slot) { return has_input(node, slot) && !constant(node, slot); };
  const std::optional<size_t> rank = node.input_size() > 0 ? rank_of(node.input(0)) : std::nullopt;
  if (t == "LayerNormalization") {
    if (attr_int(node, kChannelsOnly, 0) != 0 || !rank) return false;
    int64_t axis = attr_int(node, "axis", -1);
    if (axis < 0) axis += static_cast<int64_t>(*rank);
    return named(1) || named(2) || tensor(1) || tensor(2) || axis != static_cast<int64_t>(*rank) - 1;
  }
  if (t == "InstanceNormalization") return tensor(1) || tensor(2);
  if (t == "Conv" || t == "ConvTranspose") return rank == 5u || is_block_upsampling(node);  // onnx_import_conv3d.cpp
  if (t == "MaxPool" || t == "AveragePool") return is_separable_pool(node);
  if (t == "Gather") return tensor(1) && (rank.has_value() || constant(node, 0));  // indices the model computes
  if (t == "GatherND") return rank.has_value() || constant(node, 0);
  if (t == "Mod") return attr_int(node, "fmod", 0) == 0;  // Python's remainder, from C's
  if (t == "GlobalAveragePool" || t == "GlobalMaxPool") return rank && *rank != 4;  // Swin's pooler over [N, C, L]
  if (t == "BatchNormalization") {
    // Training mode (batch statistics, and the running mean and variance as outputs) expands too.
    return attr_int(node, "training_mode", 0) != 0 || tensor(1) || tensor(2) || tensor(3) || tensor(4);
  }
  if (t == "Gemm") {
    const ConstTensor* b = constant(node, 1);
    if (!b || b->dims.size() != 2 || tensor(2)) return true;
    const ConstTensor* c = constant(node, 2);
    if (!c) return false;
    // The linear layer's bias is one value, or one per output along the last axis.
    const int64_t out = attr_int(node, "transB", 0) != 0 ? b->dims[0] : b->dims[1];
    const bool row = !c->dims.empty() && c->dims.back() == out &&
                     std::all_of(c->dims.begin(), c->dims.end() - 1, [](int64_t d) { return d == 1; });
    return c->numel() != 1 && !row;
  }
  if (t == "MatMul") {
    for (int i = 0; i < 2; ++i) {
      const ConstTensor* c = constant(node, i);
      const std::optional<size_t> r = c ? std::optional<size_t>(c->dims.size()) : rank_of(node.input(i));
      if (r == 1u) return true;
    }
  }
  return false;
}



void Importer::expand(const onnx::NodeProto& node) {
  // The expansion of each op type (Attention's: attention()).
  using Expander = void (Importer::*)(const onnx::NodeProto&, Expansion&, const ExpandedInput&);
  static const std::map<std::string, Expander, std::less<>> kExpanders = {
      {"RMSNormalization", &Importer::expand_rms_norm},
      {"LayerNormalization", &Importer::expand_layer_norm},
      {"InstanceNormalization", &Importer::expand_channel_norm},
      {"BatchNormalization", &Importer::expand_channel_norm},
      {"GroupNormalization", &Importer::expand_group_norm},
      {"MeanVarianceNormalization", &Importer::expand_mean_variance_norm},
      {"LpNormalization", &Importer::expand_lp_norm},
      {"PRelu", &Importer::expand_prelu},
      {"SwiGLU", &Importer::expand_swiglu},
      {"RotaryEmbedding", &Importer::expand_rotary},
      {"CausalConvWithState", &Importer::expand_causal_conv},
      {"Mod", &Importer::expand_mod},
      {"Upsample", &Importer::expand_upsample},
      {"Col2Im", &Importer::expand_col2im},
      {"DeformConv", &Importer::expand_deform_conv}, {"FlexAttention", &Importer::expand_flex_attention},
      {"Det", &Importer::expand_det},
      {"Conv", &Importer::expand_conv3d}, {"ConvTranspose", &Importer::expand_conv_transpose},
      {"MaxPool", &Importer::expand_separable_pool}, {"AveragePool", &Importer::expand_separable_pool},
      {"DFT", &Importer::expand_dft},
      {"LinearAttention", &Importer::expand_linear_attention},
      {"Gemm", &Importer::expand_gemm},
      {"MatMul", &Importer::expand_matmul},
      {"LpPool", &Importer::expand_lp_pool},
      {"GlobalAveragePool", &Importer::expand_global_pool}, {"GlobalMaxPool", &Importer::expand_global_pool},
      {"Gather", &Importer::expand_gather}, {"Trilu", &Importer::expand_trilu},
      {"GatherND", &Importer::expand_gather_nd},
  };
  const std::string& t = node.op_type();
  const std::optional<size_t> known = rank_of(node.input(0));
  ExpandedInput in;
  in.rank = known ? *known : constant(node, 0) ? constant(node, 0)->dims.size() : 0;
  if (in.rank == 0) fail(node, "the input must have rank 1 or more");
  in.dims = dims_at(node, 0);  // a graph value, a pending view (of another rank) or a constant
  in.per_channel.assign(in.rank - 1, 1);
  if (in.rank >= 2) in.per_channel[0] = in.dims[1];
  Expansion e(*this, node);
  if (const auto expander = kExpanders.find(t); expander != kExpanders.end()) {
    (this->*expander->second)(node, e, in);
  } else if (t == "Attention") {
    attention(node, e);
  } else {
    fail(node, "this op has no expansion");
  }
  e.finish();
}

int64_t Importer::axis_in(const onnx::NodeProto& node, int64_t a, size_t rank) const {
  if (a < 0) a += static_cast<int64_t>(rank);
  if (a < 0 || a >= static_cast<int64_t>(rank)) fail(node, cat("axis ", a, " is outside a tensor of rank ", rank));
  return a;
}

void Importer::expand_rms_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // x / sqrt(mean(x²) + eps) · scale over the axes from `axis` on.
  const std::string& x = node.input(0);
  const float eps = attr_float(node, "epsilon", 1e-5f);
  const std::vector<int64_t> axes = trailing_axes(axis_in(node, attr_int(node, "axis", -1), in.rank), in.rank);
  const std::string ms = e.reduce("ReduceMean", e.op("Mul", {x, x}), axes);
  const std::string inv = e.op("Reciprocal", {e.op("Sqrt", {e.op("Add", {ms, e.scalar(eps)})})});
  e.op("Mul", {e.op("Mul", {x, inv}), node.input(1)}, {}, output_of(node, 0));
}

void Importer::expand_layer_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  const float eps = attr_float(node, "epsilon", 1e-5f);
  const std::vector<int64_t> axes = trailing_axes(axis_in(node, attr_int(node, "axis", -1), in.rank), in.rank);
  std::string y = e.op("Mul", {e.normalised(node.input(0), axes, eps, output_of(node, 1), output_of(node, 2)), node.input(1)});
  if (has_input(node, 2)) y = e.op("Add", {y, node.input(2)});
  e.op("Identity", {y}, {}, output_of(node, 0));
}

void Importer::expand_channel_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // InstanceNormalization, or BatchNormalization in inference: per channel.
  const std::string& x = node.input(0);
  const float eps = attr_float(node, "epsilon", 1e-5f);
  if (in.rank < 2) fail(node, cat("the input must have rank >= 2, got ", in.rank));
  std::string n;
  if (node.op_type() == "InstanceNormalization") {
    n = e.normalised(x, trailing_axes(2, in.rank), eps);
  } else if (attr_int(node, "training_mode", 0) != 0) {
    // Training mode (opset 14+): the batch's own mean and (population) variance over every axis
    // but the channels; the running statistics, when asked for, are input · momentum + batch ·
    // (1 - momentum).
    std::vector<int64_t> axes = {0};
    for (size_t a = 2; a < in.rank; ++a) axes.push_back(static_cast<int64_t>(a));
    const std::string mean = e.reduce("ReduceMean", x, axes);
    const std::string d = e.op("Sub", {x, mean});
    const std::string var = e.reduce("ReduceMean", e.op("Mul", {d, d}), axes);
    n = e.op("Div", {d, e.op("Sqrt", {e.op("Add", {var, e.scalar(eps)})})});
    const float momentum = attr_float(node, "momentum", 0.9f);
    const int64_t channels = in.dims[1];
    for (int slot : {1, 2}) {
      if (output_of(node, slot).empty()) continue;
      const std::string batch = e.reshape(slot == 1 ? mean : var, {channels});
      e.op("Add", {e.op("Mul", {node.input(slot + 2), e.scalar(momentum)}), e.op("Mul", {batch, e.scalar(1.0f - momentum)})},
           {}, output_of(node, slot));
    }
  } else {  // inference: the given mean and variance per channel
    const std::string mean = e.reshape(node.input(3), in.per_channel);
    const std::string var = e.reshape(node.input(4), in.per_channel);
    n = e.op("Div", {e.op("Sub", {x, mean}), e.op("Sqrt", {e.op("Add", {var, e.scalar(eps)})})});
  }
  const std::string y = e.op("Mul", {n, e.reshape(node.input(1), in.per_channel)});
  e.op("Add", {y, e.reshape(node.input(2), in.per_channel)}, {}, output_of(node, 0));
}

void Importer::expand_group_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // [N, C, ...] as [N, G, C / G · ...], normalised over the last axis. Scale and bias: one per
  // group before opset 21, one per channel from it.
  const std::vector<int64_t>& dims = in.dims;
  const int64_t groups = attr_int(node, "num_groups", 0);
  if (in.rank < 3) fail(node, cat("the input must have rank >= 3, got ", in.rank));
  if (groups < 1 || dims[1] % groups != 0) fail(node, cat("num_groups ", groups, " does not divide the ", dims[1], " channels"));
  const std::vector<int64_t> grouped = {dims[0], groups, product(dims, 1, in.rank) / groups};
  const std::string n = e.normalised(e.reshape(node.input(0), grouped), {2}, attr_float(node, "epsilon", 1e-5f));
  if (opset_ < 21) {
    const std::string y = e.op("Mul", {n, e.reshape(node.input(1), {groups, 1})});
    e.reshape(e.op("Add", {y, e.reshape(node.input(2), {groups, 1})}), dims, output_of(node, 0));
  } else {
    const std::string y = e.op("Mul", {e.reshape(n, dims), e.reshape(node.input(1), in.per_channel)});
    e.op("Add", {y, e.reshape(node.input(2), in.per_channel)}, {}, output_of(node, 0));
  }
}

void Importer::expand_mean_variance_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // ONNX's definition: (x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9) over `axes` (0, 2, 3).
  const std::string& x = node.input(0);
  std::vector<int64_t> axes = attr_ints(node, "axes");
  if (!attribute(node, "axes")) axes = {0, 2, 3};
  for (int64_t& a : axes) a = axis_in(node, a, in.rank);
  const std::string mean = e.reduce("ReduceMean", x, axes);
  const std::string var = e.op("Sub", {e.reduce("ReduceMean", e.op("Mul", {x, x}), axes), e.op("Mul", {mean, mean})});
  const std::string sd = e.op("Add", {e.op("Sqrt", {var}), e.scalar(1e-9f)});
  e.op("Div", {e.op("Sub", {x, mean}), sd}, {}, output_of(node, 0));
}

void Importer::expand_lp_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  const std::string& x = node.input(0);
  const int64_t p = attr_int(node, "p", 2);
  if (p != 1 && p != 2) fail(node, cat("p ", p, " is not supported (1 or 2)"));
  const std::vector<int64_t> axes = {axis_in(node, attr_int(node, "axis", -1), in.rank)};
  const std::string norm = p == 1 ? e.reduce("ReduceSum", e.op("Abs", {x}), axes)
                                  : e.op("Sqrt", {e.reduce("ReduceSum", e.op("Mul", {x, x}), axes)});
  // A zero norm (every element 0) gives zeros, as ONNX's reference: the norm is at least the
  // smallest normal float.
  e.op("Div", {x, e.op("Max", {norm, e.scalar(std::numeric_limits<float>::min())})}, {}, output_of(node, 0));
}

void Importer::expand_prelu(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // max(x, 0) + slope · min(x, 0); one slope for every element is a leaky ReLU.
  const std::string& x = node.input(0);
  const ConstTensor* slope = constant(node, 1);
  std::vector<float> s = slope ? slope->floats() : std::vector<float>{};
  if (slope && !s.empty() && std::all_of(s.begin(), s.end(), [&](float v) { return v == s[0]; }) &&
      slope->numel() <= product(in.dims, 0, in.rank)) {
    onnx::AttributeProto alpha;
    alpha.set_name("alpha");
    alpha.set_type(onnx::AttributeProto::FLOAT);
    alpha.set_f(s[0]);
    std::vector<int64_t> broadcast_dims = slope->dims;
    if (broadcast(in.dims, broadcast_dims) == in.dims) {
      e.op("LeakyRelu", {x}, {alpha}, output_of(node, 0));
      return;
    }
  }
  const std::string zero = e.scalar(0.0f);
  e.op("Add", {e.op("Max", {x, zero}), e.op("Mul", {e.op("Min", {x, zero}), node.input(1)})}, {}, output_of(node, 0));
}

void Importer::expand_swiglu(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // Swish_alpha(A) · B, A and B of one shape (ONNX's own function body).
  if (!rank_of(node.input(1)) || dims_of(shape(input(node, 1))) != in.dims) {
    fail(node, "the gate A and the value B must have the same shape (SwiGLU does not broadcast)");
  }
  onnx::AttributeProto alpha;
  alpha.set_name("alpha");
  alpha.set_type(onnx::AttributeProto::FLOAT);
  alpha.set_f(attr_float(node, "alpha", 1.0f));
  e.op("Mul", {e.op("Swish", {node.input(0)}, {alpha}), node.input(1)}, {}, output_of(node, 0));
}

void Importer::expand_rotary(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // ONNX's definition (opset 23): x as [B, S, heads, D] (4-D [B, heads, S, D] transposed, 3-D
  // [B, S, heads * D] reshaped); its first rotary_embedding_dim features rotated by the caches
  // ([B, S, dim / 2], or rows of [positions, dim / 2] picked by constant position ids): halves, or
  // even and odd features with `interleaved`, as (x1 cos - x2 sin, x1 sin + x2 cos); the rest kept.
  if (in.rank != 3 && in.rank != 4) fail(node, cat("the input must be 3-D or 4-D, got rank ", in.rank));
  const int64_t b = in.dims[0];
  int64_t s = in.dims[1], heads = 0, d = 0;
  std::string x = node.input(0);
  if (in.rank == 4) {
    heads = in.dims[1], s = in.dims[2], d = in.dims[3];
    x = e.op("Transpose", {x}, {ints_attr("perm", {0, 2, 1, 3})});
  } else {
    heads = attr_int(node, "num_heads", 0);
    if (heads < 1 || in.dims[2] % heads != 0) fail(node, cat("num_heads (", heads, ") must divide the hidden size ", in.dims[2]));
    d = in.dims[2] / heads;
    x = e.reshape(x, {b, s, heads, d});
  }
  int64_t dim = attr_int(node, "rotary_embedding_dim", 0);
  if (dim == 0) dim = d;
  if (dim < 2 || dim > d || dim % 2 != 0) fail(node, cat("rotary_embedding_dim ", dim, " must be even and at most the head size ", d));
  const bool interleaved = attr_int(node, "interleaved", 0) != 0;
  std::string cos = node.input(1), sin = node.input(2);
  if (has_input(node, 3)) {  // rows of the caches at the positions
    if (!constant(node, 3)) fail_not_constant(node, 3, "the position ids must be constant");
    cos = e.op("Gather", {cos, node.input(3)}, {int_attr("axis", 0)});
    sin = e.op("Gather", {sin, node.input(3)}, {int_attr("axis", 0)});
  }
  cos = e.unsqueeze("Unsqueeze", cos, {2});
  sin = e.unsqueeze("Unsqueeze", sin, {2});
  const auto slice = [&](const std::string& t, int64_t begin, int64_t end, int64_t step) {
    return e.op("Slice", {t, e.ints({begin}), e.ints({end}), e.ints({3}), e.ints({step})});
  };
  const std::string rotated = dim == d ? x : slice(x, 0, dim, 1);
  const std::string x1 = interleaved ? slice(rotated, 0, dim, 2) : slice(rotated, 0, dim / 2, 1);
  const std::string x2 = interleaved ? slice(rotated, 1, dim, 2) : slice(rotated, dim / 2, dim, 1);
  const std::string real = e.op("Sub", {e.op("Mul", {x1, cos}), e.op("Mul", {x2, sin})});
  const std::string imag = e.op("Add", {e.op("Mul", {x1, sin}), e.op("Mul", {x2, cos})});
  std::string y;
  if (interleaved) {  // (real, imag) pairs back in place: [.., dim / 2, 2] -> [.., dim]
    const std::string pairs = e.op("Concat", {e.unsqueeze("Unsqueeze", real, {4}), e.unsqueeze("Unsqueeze", imag, {4})},
                                   {int_attr("axis", 4)});
    y = e.reshape(pairs, {b, s, heads, dim});
  } else {
    y = e.op("Concat", {real, imag}, {int_attr("axis", 3)});
  }
  if (dim < d) y = e.op("Concat", {y, slice(x, dim, d, 1)}, {int_attr("axis", 3)});
  if (in.rank == 4) {
    e.op("Transpose", {y}, {ints_attr("perm", {0, 2, 1, 3})}, output_of(node, 0));
  } else {
    e.reshape(y, {b, s, heads * d}, output_of(node, 0));
  }
}

void Importer::expand_causal_conv(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // ONNX's definition (opset 27, Mamba's and Gated DeltaNet's): the past state (k - 1 positions,
  // zeros when absent) joined before the input [B, C, L], a depthwise convolution of width k
  // without padding, the optional SiLU; the present state is the last k - 1 positions joined.
  if (in.rank != 3) fail(node, cat("the input must be [batch, channels, length], got rank ", in.rank));
  const ConstTensor* w = constant(node, 1);
  if (!w) fail_not_constant(node, 1, "the weight must be constant");
  if (w->dims.size() != 3 || w->dims[0] != in.dims[1] || w->dims[1] != 1) {
    fail(node, cat("the weight must be [channels, 1, k] = [", in.dims[1], ", 1, k], got [", join(w->dims, ", "), "]"));
  }
  const int64_t k = w->dims[2];
  const std::string activation = attr_string(node, "activation").empty() ? "none" : attr_string(node, "activation");
  if (activation != "none" && activation != "silu" && activation != "swish") {
    fail(node, cat("activation '", activation, "' is not none, silu or swish"));
  }
  std::string padded = node.input(0);
  if (k > 1) {
    const std::string past = has_input(node, 3) ? node.input(3)
                                                : e.floats(std::vector<float>(static_cast<size_t>(in.dims[0] * in.dims[1] * (k - 1)), 0.0f),
                                                           {in.dims[0], in.dims[1], k - 1});
    padded = e.op("Concat", {past, node.input(0)}, {int_attr("axis", 2)});
  }
  std::vector<std::string> conv_inputs = {padded, node.input(1)};
  if (has_input(node, 2)) conv_inputs.push_back(node.input(2));
  const bool silu = activation != "none";
  const std::string y = e.op("Conv", conv_inputs, {int_attr("group", in.dims[1]), ints_attr("kernel_shape", {k})},
                             silu ? "" : output_of(node, 0));
  if (silu) e.op("Mul", {y, e.op("Sigmoid", {y})}, {}, output_of(node, 0));
  if (!output_of(node, 1).empty()) {
    // width 1: an empty slice, an empty constant output
    const int64_t length = in.dims[2] + k - 1;
    e.op("Slice", {padded, e.ints({length - (k - 1)}), e.ints({length}), e.ints({2})}, {}, output_of(node, 1));
  }
}

void Importer::expand_upsample(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // Upsample (deprecated at opset 10) is Resize by scales with asymmetric coordinates (an output
  // index i reads i / scale), nearest rounding down; its scales an attribute before version 9.
  std::string mode = attr_string(node, "mode");
  if (mode.empty()) mode = "nearest";
  if (mode == "bilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear") fail(node, cat("mode '", mode, "' is not supported (nearest, linear)"));
  std::string scales;
  if (has_input(node, 1)) {
    scales = node.input(1);
  } else {
    const std::vector<float> given = attr_floats(node, "scales");
    if (given.size() != in.rank) fail(node, cat("scales has ", given.size(), " values for a tensor of rank ", in.rank));
    scales = e.floats(given, {static_cast<int64_t>(given.size())});
  }
  e.op("Resize", {node.input(0), "", scales},
       {string_attr("mode", mode), string_attr("coordinate_transformation_mode", "asymmetric"),
        string_attr("nearest_mode", "floor")},
       output_of(node, 0));
}

void Importer::expand_col2im(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // Col2Im sums every column's block back into the image: a transposed convolution over the
  // columns [N, C·kh·kw, Lh, Lw], grouped by channel, whose weight puts input channel (c, i, j) at
  // position (i, j) of output channel c (MobileViT's folding).
  const std::vector<int64_t> image = constant_ints(node, 1, "image_shape");
  const std::vector<int64_t> block = constant_ints(node, 2, "block_shape");
  if (image.size() != 2 || block.size() != 2) fail(node, cat("only 2-D images are supported, got ", image.size(), "-D"));
  if (in.rank != 3) fail(node, cat("the input must be [N, C · block, L], got rank ", in.rank));
  std::vector<int64_t> strides = attr_ints(node, "strides"), dilations = attr_ints(node, "dilations"), pads = attr_ints(node, "pads");
  if (strides.empty()) strides = {1, 1};
  if (dilations.empty()) dilations = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  const int64_t taps = block[0] * block[1];
  if (in.dims[1] % taps != 0) fail(node, cat("the input's ", in.dims[1], " rows are not a multiple of the block's ", taps, " taps"));
  const int64_t channels = in.dims[1] / taps;
  std::vector<int64_t> grid(2);
  for (size_t d = 0; d < 2; ++d) {
    grid[d] = (image[d] + pads[d] + pads[d + 2] - dilations[d] * (block[d] - 1) - 1) / strides[d] + 1;
  }
  if (grid[0] < 1 || grid[1] < 1 || grid[0] * grid[1] != in.dims[2]) {
    fail(node, cat("the input's ", in.dims[2], " columns are not the ", grid[0], " x ", grid[1], " blocks of the image"));
  }
  std::vector<float> weight(static_cast<size_t>(channels * taps * taps), 0.0f);  // [C·taps, 1, kh, kw]
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < taps; ++t) weight[static_cast<size_t>((c * taps + t) * taps + t)] = 1.0f;
  // The rows and columns of the image no block reaches (a stride that does not divide it): the
  // transposed convolution's output_padding.
  std::vector<int64_t> extra(2);
  for (size_t d = 0; d < 2; ++d) {
    extra[d] = image[d] - ((grid[d] - 1) * strides[d] + dilations[d] * (block[d] - 1) + 1 - pads[d] - pads[d + 2]);
  }
  const std::string columns = e.reshape(node.input(0), {in.dims[0], in.dims[1], grid[0], grid[1]});
  e.op("ConvTranspose", {columns, e.floats(weight, {channels * taps, 1, block[0], block[1]})},
       {ints_attr("strides", strides), ints_attr("dilations", dilations), ints_attr("pads", pads),
        int_attr("group", channels), ints_attr("output_padding", extra)},
       output_of(node, 0));
}

void Importer::expand_mod(const onnx::NodeProto& node, Expansion& e, const ExpandedInput&) {
  // fmod 0 (the sign of the divisor, as Python's % and numpy.mod): C's remainder r, plus the
  // divisor where r is not 0 and its sign differs from the divisor's. NaN, infinities and zeros
  // come out as numpy.mod gives them (x mod inf: x, or inf for a negative x; x mod 0: NaN).
  const std::string& x = node.input(0);
  const std::string& y = node.input(1);
  const std::string r = e.op("Mod", {x, y}, {int_attr("fmod", 1)});
  const std::string zero = e.scalar(0.0f);
  const std::string differs = e.op("Xor", {e.op("Less", {r, zero}), e.op("Less", {y, zero})});
  const std::string shift = e.op("And", {e.op("Not", {e.op("Equal", {r, zero})}), differs});
  e.op("Where", {shift, e.op("Add", {r, y}), r}, {}, output_of(node, 0));
}

void Importer::expand_gemm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput&) {
  // alpha · A' · B' + beta · C.
  std::string a = node.input(0), b = node.input(1);
  if (attr_int(node, "transA", 0) != 0) a = e.op("Transpose", {a}, {ints_attr("perm", {1, 0})});
  if (attr_int(node, "transB", 0) != 0) b = e.op("Transpose", {b}, {ints_attr("perm", {1, 0})});
  std::string y = e.op("MatMul", {a, b});
  const float alpha = attr_float(node, "alpha", 1.0f), beta = attr_float(node, "beta", 1.0f);
  if (alpha != 1.0f) y = e.op("Mul", {y, e.scalar(alpha)});
  if (has_input(node, 2) && beta != 0.0f) {
    const std::string c = beta == 1.0f ? node.input(2) : e.op("Mul", {node.input(2), e.scalar(beta)});
    y = e.op("Add", {y, c});
  }
  e.op("Identity", {y}, {}, output_of(node, 0));
}

void Importer::expand_matmul(const onnx::NodeProto& node, Expansion& e, const ExpandedInput&) {
  // A vector operand as a matrix ([K] as [1, K] first, [K, 1] second), the added axis dropped.
  const auto vector = [&](int slot) {
    const ConstTensor* c = constant(node, slot);
    return (c ? c->dims.size() : rank_of(node.input(slot)).value_or(0)) == 1;
  };
  const bool first = vector(0), second = vector(1);
  if (first && second) fail(node, "the product of two vectors is a scalar (rank 0): not supported");
  const std::string a = first ? e.unsqueeze("Unsqueeze", node.input(0), {0}) : node.input(0);
  const std::string b = second ? e.unsqueeze("Unsqueeze", node.input(1), {1}) : node.input(1);
  e.unsqueeze("Squeeze", e.op("MatMul", {a, b}), {first ? -2 : -1}, output_of(node, 0));
}

void Importer::expand_lp_pool(const onnx::NodeProto& node, Expansion& e, const ExpandedInput&) {
  // (Σ |x|^p over each window)^(1/p): an average pool (zeros for padding, counted) of |x|^p
  // times the window size.
  const int64_t p = attr_int(node, "p", 2);
  if (p < 1) fail(node, cat("p ", p, " is not supported (>= 1)"));
  const std::string a = e.op("Abs", {node.input(0)});
  const std::string powered = p == 1 ? a : p == 2 ? e.op("Mul", {a, a}) : e.op("Pow", {a, e.scalar(static_cast<float>(p))});
  std::vector<onnx::AttributeProto> attrs;
  for (const auto& at : node.attribute()) {
    if (at.name() != "p") attrs.push_back(at);
  }
  attrs.push_back(int_attr("count_include_pad", 1));
  const std::vector<int64_t> kernel = attr_ints(node, "kernel_shape");
  const int64_t window = std::accumulate(kernel.begin(), kernel.end(), int64_t{1}, std::multiplies<>());
  const std::string sum = e.op("Mul", {e.op("AveragePool", {powered}, attrs), e.scalar(static_cast<float>(window))});
  if (p == 1) e.op("Identity", {sum}, {}, output_of(node, 0));
  else if (p == 2) e.op("Sqrt", {sum}, {}, output_of(node, 0));
  else e.op("Pow", {sum, e.scalar(1.0f / static_cast<float>(p))}, {}, output_of(node, 0));
}

void Importer::expand_global_pool(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // Over every axis after the channels, kept as 1s.
  if (in.rank < 3) fail(node, cat("the input must have rank >= 3, got ", in.rank));
  e.reduce(node.op_type() == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax", node.input(0), trailing_axes(2, in.rank),
           output_of(node, 0));
}

void Importer::attention(const onnx::NodeProto& node, Expansion& e) {
  // ONNX's definition (opsets 23 to 25): Q, K, V as [B, heads, S, d] (3-D inputs [B, S, heads · d]
  // split by q_num_heads / kv_num_heads), past keys and values joined before K and V (present_*),
  // K and V heads repeated for grouped queries, softmax(Q·Kᵀ · scale, softcapped, plus the mask
  // and the causal / sliding-window bias) · V. The bias that depends on positions only is a
  // constant; a row it masks entirely gives zeros, as ONNX's guard.
  const auto output = [&](int slot) { return slot < node.output_size() ? node.output(slot) : std::string(); };
  if (has_input(node, 6)) fail(node, "nonpad_kv_seqlen (input 6) is not supported");
  if (has_input(node, 4) != has_input(node, 5)) fail(node, "past_key and past_value must be given together");
  const auto rank = [&](int slot) {
    const std::optional<size_t> r = rank_of(node.input(slot));
    if (!r) fail(node, cat("input ", slot, " must be a tensor of the model"));
    return *r;
  };
  const auto dims = [&](int slot) { return dims_of(shape(input(node, slot))); };
  const size_t r = rank(0);
  if (r != 3 && r != 4) fail(node, cat("Q must have rank 3 or 4, got ", r));
  if (rank(1) != r || rank(2) != r) fail(node, "Q, K and V must have the same rank");
  std::vector<int64_t> q = dims(0), k = dims(1), v = dims(2);
  const int64_t batch = q[0];
  std::string qs = node.input(0), ks = node.input(1), vs = node.input(2);
  if (r == 3) {
    const int64_t qh = attr_int(node, "q_num_heads", 0), kvh = attr_int(node, "kv_num_heads", 0);
    if (qh < 1 || kvh < 1 || q[2] % qh != 0 || k[2] % kvh != 0 || v[2] % kvh != 0) {
      fail(node, "3-D inputs need q_num_heads and kv_num_heads dividing their hidden sizes");
    }
    const auto heads = [&](const std::string& x, const std::vector<int64_t>& d, int64_t h) {
      return e.op("Transpose", {e.reshape(x, {d[0], d[1], h, d[2] / h})}, {ints_attr("perm", {0, 2, 1, 3})});
    };
    qs = heads(qs, q, qh);
    ks = heads(ks, k, kvh);
    vs = heads(vs, v, kvh);
    q = {batch, qh, q[1], q[2] / qh};
    k = {batch, kvh, k[1], k[2] / kvh};
    v = {batch, kvh, v[1], v[2] / kvh};
  }
  int64_t past = 0;
  if (has_input(node, 4)) {
    past = dims(4)[2];
    ks = e.op("Concat", {node.input(4), ks}, {int_attr("axis", 2)});
    vs = e.op("Concat", {node.input(5), vs}, {int_attr("axis", 2)});
    k[2] += past;
    v[2] += past;
  }
  if (!output(1).empty()) e.op("Identity", {ks}, {}, output(1));
  if (!output(2).empty()) e.op("Identity", {vs}, {}, output(2));
  const int64_t q_heads = q[1], kv_heads = k[1], s = q[2], l = k[2];
  if (q_heads != kv_heads) {  // grouped queries: each K and V head repeated, in place
    if (q_heads % kv_heads != 0) fail(node, cat(q_heads, " query heads are not a multiple of ", kv_heads, " key heads"));
    ks = e.repeat_heads(ks, k, q_heads);
    vs = e.repeat_heads(vs, v, q_heads);
  }
  // Q·Kᵀ with √scale on each side, as ONNX's definition.
  const float scale = attr_float(node, "scale", 1.0f / std::sqrt(static_cast<float>(q[3])));
  std::string scores = e.scaled_scores(qs, ks, scale);
  const float softcap = attr_float(node, "softcap", 0.0f);
  if (softcap > 0) scores = e.op("Mul", {e.op("Tanh", {e.op("Div", {scores, e.scalar(softcap)})}), e.scalar(softcap)});
  const std::string capped = scores;
  // The positional bias [S, L]: 0 where query i (at position past + i) may read key j.
  const bool causal = attr_int(node, "is_causal", 0) != 0;
  const int64_t left = attr_int(node, "left_window_size", -1), right = attr_int(node, "right_window_size", -1);
  std::vector<float> bias(static_cast<size_t>(s * l), 0.0f);
  std::vector<float> rows_open(static_cast<size_t>(s), 1.0f);
  bool positional = false;
  for (int64_t i = 0; i < s; ++i) {
    bool any = false;
    for (int64_t j = 0; j < l; ++j) {
      const int64_t d = past + i - j;
      const bool allowed = (!causal || d >= 0) && (left < 0 || d <= left) && (right < 0 || -d <= right);
      if (!allowed) {
        bias[static_cast<size_t>(i * l + j)] = -INFINITY;
        positional = true;
      }
      any = any || allowed;
    }
    if (!any) rows_open[static_cast<size_t>(i)] = 0.0f;
  }
  const bool closed_rows = std::find(rows_open.begin(), rows_open.end(), 0.0f) != rows_open.end();
  if (closed_rows) {
    // Those rows' bias becomes 0 (a finite softmax) and their probabilities are zeroed below.
    for (int64_t i = 0; i < s; ++i)
      if (rows_open[static_cast<size_t>(i)] == 0.0f) std::fill_n(bias.begin() + i * l, l, 0.0f);
  }
  std::string mask;
  if (has_input(node, 3)) {
    mask = node.input(3);
    const ConstTensor* c = constant(node, 3);
    const std::vector<int64_t> md = c ? c->dims : dims(3);
    if (md.empty() || md.back() > l) fail(node, cat("the mask's last dimension must be at most ", l));
    if (md.back() < l) {  // keys past the mask are masked
      std::vector<int64_t> pads(2 * md.size(), 0);
      pads[2 * md.size() - 1] = l - md.back();
      mask = e.op("Pad", {mask, e.ints(pads), e.scalar(-INFINITY)});
    }
  }
  std::string with_bias = scores;
  if (positional) with_bias = e.op("Add", {with_bias, e.floats(bias, {s, l})});
  if (!mask.empty()) with_bias = e.op("Add", {with_bias, mask});
  std::string probs = e.op("Softmax", {with_bias}, {int_attr("axis", -1)});
  if (closed_rows) probs = e.op("Mul", {probs, e.floats(rows_open, {s, 1})});
  const int64_t mode = attr_int(node, "qk_matmul_output_mode", 0);
  if (!output(3).empty()) {
    const std::string& chosen = mode == 3 ? probs : mode == 2 ? with_bias : capped;
    e.op("Identity", {chosen}, {}, output(3));
  }
  std::string y = e.op("MatMul", {probs, vs});
  if (r == 3) {
    e.reshape(e.op("Transpose", {y}, {ints_attr("perm", {0, 2, 1, 3})}), {batch, s, q_heads * v[3]}, output(0));
  } else {
    e.op("Identity", {y}, {}, output(0));
  }
}

}  // namespace stagecraft::graph::onnx_import
