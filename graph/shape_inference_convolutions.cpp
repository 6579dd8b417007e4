// Shape inference of the convolutions' ops (rank-4 tensors): convolutions, batch normalisation,
// local response normalisation, pools, padding, space-to-depth and resizing; and the ops on their
// channels and shapes: concat, split, slice, channel shuffle, flatten and reshape.
#include <algorithm>

#include "graph/shape_inference.h"
#include "graph/shape_rules.h"

namespace stagecraft::graph::shape_rules {

namespace {

// Output H and W of a 2-D window op; fails when the window does not fit the padded input.
Shape window_shape(const Checker& check, const Shape& in, int64_t channels, const Hw& kernel,
                   const Hw& stride, const Pads& pad, const Hw& dilation, bool ceil_mode) {
  const int64_t oh = window_output_size(in[2], pad.top, pad.bottom, kernel.h, stride.h, dilation.h,
                                        ceil_mode);
  const int64_t ow = window_output_size(in[3], pad.left, pad.right, kernel.w, stride.w,
                                        dilation.w, ceil_mode);
  check.require(oh >= 1 && ow >= 1,
                cat("window ", kernel.h, "x", kernel.w, " does not fit input ", in[2], "x", in[3],
                    " with padding [", pad.top, ", ", pad.left, ", ", pad.bottom, ", ", pad.right,
                    "]"));
  return Shape{in[0], channels, oh, ow};
}

std::vector<TensorDesc> infer_conv(const Checker& check, const Conv2dAttrs& a,
                                   const TensorDesc& x) {
  check.rank(x, 4);
  check.require(a.in_channels >= 1 && a.out_channels >= 1,
                cat("in_channels and out_channels must be >= 1, got ", a.in_channels, " and ",
                    a.out_channels));
  check.positive(a.kernel, "kernel");
  check.positive(a.stride, "stride");
  check.positive(a.dilation, "dilation");
  check.non_negative(a.padding, "padding");
  check.require(a.groups >= 1, cat("groups must be >= 1, got ", a.groups));
  check.require(a.in_channels % a.groups == 0 && a.out_channels % a.groups == 0,
                cat("groups ", a.groups, " must divide in_channels ", a.in_channels,
                    " and out_channels ", a.out_channels));
  check.require(x.shape[1] == a.in_channels, cat("input has ", x.shape[1],
                                                 " channels but in_channels is ", a.in_channels));
  return {with_shape(x, window_shape(check, x.shape, a.out_channels, a.kernel, a.stride, a.padding,
                                     a.dilation, false))};
}

// A convolution, with its fused residual input (the output's shape and type; of a quantised one,
// either 8-bit type at its own scale) where it has one.
std::vector<TensorDesc> infer_conv_with_residual(const Checker& check, const Conv2dAttrs& a,
                                                 const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, a.residual ? 2 : 1, a.residual ? 2 : 1);
  std::vector<TensorDesc> out = infer_conv(check, a, inputs[0]);
  if (a.residual) {
    const bool same_type = inputs[1].dtype == out[0].dtype || (is_int8(inputs[1].dtype) && is_int8(out[0].dtype));
    check.require(inputs[1].shape == out[0].shape && same_type,
                  cat("the residual input must be ", out[0].shape.to_string(), " ",
                      to_string(out[0].dtype), " like the output (got ",
                      inputs[1].shape.to_string(), " ", to_string(inputs[1].dtype), ")"));
  }
  return out;
}

std::vector<TensorDesc> infer_conv_transpose(const Checker& check, const ConvTranspose2dAttrs& a,
                                             const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  check.require(!is_int8(inputs[0].dtype), "conv_transpose2d runs on floating-point tensors (dequantise first)");
  check.require(a.in_channels >= 1 && a.out_channels >= 1,
                cat("in_channels and out_channels must be >= 1, got ", a.in_channels, " and ", a.out_channels));
  check.positive(a.kernel, "kernel");
  check.positive(a.stride, "stride");
  check.positive(a.dilation, "dilation");
  check.non_negative(a.padding, "padding");
  check.require(a.groups >= 1 && a.in_channels % a.groups == 0 && a.out_channels % a.groups == 0,
                cat("groups ", a.groups, " must be >= 1 and divide in_channels ", a.in_channels,
                    " and out_channels ", a.out_channels));
  check.require(inputs[0].shape[1] == a.in_channels,
                cat("input has ", inputs[0].shape[1], " channels but in_channels is ", a.in_channels));
  check.require(a.output_padding.h >= 0 && a.output_padding.w >= 0 &&
                    a.output_padding.h < std::max(a.stride.h, a.dilation.h) &&
                    a.output_padding.w < std::max(a.stride.w, a.dilation.w),
                "output_padding must be >= 0 and smaller than the stride or the dilation");
  const auto extent = [](int64_t in, int64_t k, int64_t s, int64_t d, int64_t out_pad, int64_t before, int64_t after) {
    return s * (in - 1) + d * (k - 1) + 1 + out_pad - before - after;
  };
  const int64_t h = extent(inputs[0].shape[2], a.kernel.h, a.stride.h, a.dilation.h, a.output_padding.h,
                           a.padding.top, a.padding.bottom);
  const int64_t w = extent(inputs[0].shape[3], a.kernel.w, a.stride.w, a.dilation.w, a.output_padding.w,
                           a.padding.left, a.padding.right);
  check.require(h >= 1 && w >= 1, cat("the padding leaves an output of ", h, "x", w));
  return {with_shape(inputs[0], Shape{inputs[0].shape[0], a.out_channels, h, w})};
}

std::vector<TensorDesc> infer_batch_norm(const Checker& check, const BatchNormAttrs& a,
                                         const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  check.require(a.eps > 0, "eps must be > 0");
  return {inputs[0]};
}

std::vector<TensorDesc> infer_lrn(const Checker& check, const LrnAttrs& a,
                                  const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  check.require(!is_int8(inputs[0].dtype), "lrn runs on floating-point tensors (dequantise first)");
  check.require(a.size >= 1 && a.size % 2 == 1, cat("size must be odd and >= 1, got ", a.size));
  check.require(a.bias > 0, cat("bias must be > 0, got ", a.bias));
  return {inputs[0]};
}

template <class PoolAttrs>
std::vector<TensorDesc> infer_pool(const Checker& check, const PoolAttrs& a,
                                   const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  const TensorDesc& x = inputs[0];
  check.rank(x, 4);
  check.positive(a.kernel, "kernel");
  check.positive(a.stride, "stride");
  check.non_negative(a.padding, "padding");
  check.require(a.padding.top < a.kernel.h && a.padding.bottom < a.kernel.h &&
                    a.padding.left < a.kernel.w && a.padding.right < a.kernel.w,
                "padding must be smaller than the window on every side");
  return {with_shape(x, window_shape(check, x.shape, x.shape[1], a.kernel, a.stride, a.padding,
                                     Hw{1, 1}, a.ceil_mode))};
}

std::vector<TensorDesc> infer_global_pool(const Checker& check, const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  const Shape& s = inputs[0].shape;
  return {with_shape(inputs[0], Shape{s[0], s[1], 1, 1})};
}

std::vector<TensorDesc> infer_resize(const Checker& check, const ResizeAttrs& a,
                                     const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  check.require(a.size.h > 0 && a.size.w > 0, "size must be positive");
  check.require(a.scale_h > 0 && a.scale_w > 0, "scale_h and scale_w must be positive");
  check.require(!(a.linear && a.cubic), "linear and cubic exclude each other");
  const Shape& s = inputs[0].shape;
  return {with_shape(inputs[0], Shape{s[0], s[1], a.size.h, a.size.w})};
}

std::vector<TensorDesc> infer_pad(const Checker& check, const PadAttrs& a,
                                  const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  const auto& p = a.pads;
  Shape s = inputs[0].shape;
  if (a.reflect) {
    check.require(std::min({p.top, p.bottom, p.left, p.right}) >= 0 &&
                      std::max(p.top, p.bottom) < s[2] && std::max(p.left, p.right) < s[3],
                  cat("reflect padding must be >= 0 and smaller than the side it extends (",
                      s.to_string(), ")"));
  }
  s[2] += p.top + p.bottom;
  s[3] += p.left + p.right;
  check.require(s[2] >= 1 && s[3] >= 1,
                cat("padding leaves an empty output ", s.to_string()));
  return {with_shape(inputs[0], s)};
}

std::vector<TensorDesc> infer_space_to_depth(const Checker& check, const SpaceToDepthAttrs& a,
                                             const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  const int64_t b = a.block;
  const Shape& s = inputs[0].shape;
  check.require(b >= 1 && s[2] % b == 0 && s[3] % b == 0,
                cat("the block (", b, ") must divide H and W (", s[2], "x", s[3], ")"));
  TensorDesc out = inputs[0];
  out.shape = Shape{s[0], s[1] * b * b, s[2] / b, s[3] / b};
  return {out};
}

// Along dimension 1: the channels of rank-4 tensors, the second axis of row-major ones.
std::vector<TensorDesc> infer_concat(const Checker& check, const std::vector<TensorDesc>& inputs) {
  int64_t channels = 0;
  const size_t rank = inputs[0].shape.rank();
  check.require(rank == 4 || inputs[0].layout == Layout::kRowMajor,
                cat("inputs must have rank 4 or be row-major, got ", inputs[0].shape.to_string()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    check.rank(inputs[i], rank, "every input");
    const Shape& s = inputs[i].shape;
    const Shape& s0 = inputs[0].shape;
    bool agree = true;
    for (size_t d = 0; d < rank; ++d) agree = agree && (d == 1 || s[d] == s0[d]);
    check.require(agree, cat("input ", i, " is ", s.to_string(), " but input 0 is ", s0.to_string(),
                             ": concatenated inputs must agree in every dimension but the second"));
    channels += s[1];
  }
  check_same_dtype(check, inputs);
  Shape out = inputs[0].shape;
  out[1] = channels;
  return {with_shape(inputs[0], out)};
}

// Of the concatenation of its inputs.
std::vector<TensorDesc> infer_channel_shuffle(const Checker& check, const ChannelShuffleAttrs& a,
                                              const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, SIZE_MAX);
  std::vector<TensorDesc> out = infer_concat(check, inputs);
  const int64_t g = a.groups;
  check.require(g >= 1 && out[0].shape[1] % g == 0,
                cat("groups ", g, " must divide the ", out[0].shape[1], " channels"));
  return out;
}

std::vector<TensorDesc> infer_split(const Checker& check, const SplitAttrs& a,
                                    const TensorDesc& x) {
  check.rank(x, 4);
  check.require(!a.sizes.empty(), "sizes must not be empty");
  int64_t total = 0;
  for (int64_t size : a.sizes) {
    check.require(size >= 1, cat("every size must be >= 1, got ", size));
    total += size;
  }
  check.require(total == x.shape[1], cat("sizes add up to ", total, " but the input has ",
                                         x.shape[1], " channels"));
  std::vector<TensorDesc> outputs;
  for (int64_t size : a.sizes) {
    Shape s = x.shape;
    s[1] = size;
    outputs.push_back(with_shape(x, s));
  }
  return outputs;
}

std::vector<TensorDesc> infer_slice(const Checker& check, const SliceAttrs& a,
                                    const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.rank(inputs[0], 4);
  check.require(a.begin >= 0 && a.begin < a.end && a.end <= inputs[0].shape[1],
                cat("channel range [", a.begin, ", ", a.end, ") is not inside [0, ",
                    inputs[0].shape[1], ")"));
  Shape s = inputs[0].shape;
  s[1] = a.end - a.begin;
  return {with_shape(inputs[0], s)};
}

std::vector<TensorDesc> infer_flatten(const Checker& check, const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  const Shape& s = inputs[0].shape;
  check.require(s.rank() >= 2, cat("input must have rank >= 2, got ", s.to_string()));
  return {with_shape(inputs[0], Shape{s[0], s.numel() / s[0]})};
}

std::vector<TensorDesc> infer_reshape(const Checker& check, const ReshapeAttrs& a,
                                      const TensorDesc& x) {
  if (a.full) {
    check.require(!a.dims.empty(), "dims must not be empty");
    int64_t n = 1;
    for (int64_t d : a.dims) {
      check.require(d >= 1, "dims must be >= 1");
      n *= d;
    }
    check.require(n == x.shape.numel(), cat("cannot reshape ", x.shape.to_string(), " (",
                                            x.shape.numel(), " elements) to ",
                                            Shape(a.dims).to_string()));
    TensorDesc out = x;
    out.shape = Shape(a.dims);
    out.layout = row_major_layout(a.dims.size());
    return {out};
  }
  check.require(x.shape.rank() == 2 || x.shape.rank() == 4 || x.layout == Layout::kRowMajor,
                cat("input must have rank 2 or 4, or be row-major, got ", x.shape.to_string()));
  check.require(a.dims.size() == 1 || a.dims.size() == 3,
                cat("dims must give 1 or 3 dimensions after the batch (rank 2 or 4), got ",
                    a.dims.size()));
  int64_t n = 1;
  for (int64_t d : a.dims) {
    check.require(d >= 1, cat("dims must be >= 1"));
    n *= d;
  }
  const int64_t batch = x.shape[0];
  check.require(n * batch == x.shape.numel(),
                cat("cannot reshape ", x.shape.to_string(), " (", x.shape.numel() / batch,
                    " elements per sample) to ", n, " elements per sample"));
  std::vector<int64_t> dims{batch};
  dims.insert(dims.end(), a.dims.begin(), a.dims.end());
  TensorDesc out = x;  // a tensor of the convolutions (or N×C), also from a row-major one
  out.shape = Shape(dims);
  out.layout = *default_layout(dims.size());
  return {out};
}

}  // namespace

std::vector<TensorDesc> infer_convolutions_op(const Checker& check, const Op& op,
                                              const std::vector<TensorDesc>& inputs) {
  switch (op.kind) {
    case OpKind::kConv2d:
      return infer_conv_with_residual(check, op.attrs_as<Conv2dAttrs>(), inputs);
    case OpKind::kConvTranspose2d:
      return infer_conv_transpose(check, op.attrs_as<ConvTranspose2dAttrs>(), inputs);
    case OpKind::kBatchNorm:
      return infer_batch_norm(check, op.attrs_as<BatchNormAttrs>(), inputs);
    case OpKind::kLrn:
      return infer_lrn(check, op.attrs_as<LrnAttrs>(), inputs);
    case OpKind::kMaxPool:
      return infer_pool(check, op.attrs_as<MaxPoolAttrs>(), inputs);
    case OpKind::kAvgPool:
      return infer_pool(check, op.attrs_as<AvgPoolAttrs>(), inputs);
    case OpKind::kGlobalAvgPool:
    case OpKind::kGlobalMaxPool:
      return infer_global_pool(check, inputs);
    case OpKind::kResize:
      return infer_resize(check, op.attrs_as<ResizeAttrs>(), inputs);
    case OpKind::kPad:
      return infer_pad(check, op.attrs_as<PadAttrs>(), inputs);
    case OpKind::kSpaceToDepth:
      return infer_space_to_depth(check, op.attrs_as<SpaceToDepthAttrs>(), inputs);
    case OpKind::kConcat:
      check.arity(inputs, 1, SIZE_MAX);
      return infer_concat(check, inputs);
    case OpKind::kChannelShuffle:
      return infer_channel_shuffle(check, op.attrs_as<ChannelShuffleAttrs>(), inputs);
    case OpKind::kSplit:
      check.arity(inputs, 1, 1);
      return infer_split(check, op.attrs_as<SplitAttrs>(), inputs[0]);
    case OpKind::kSlice:
      return infer_slice(check, op.attrs_as<SliceAttrs>(), inputs);
    case OpKind::kFlatten:
      return infer_flatten(check, inputs);
    case OpKind::kReshape:
      check.arity(inputs, 1, 1);
      return infer_reshape(check, op.attrs_as<ReshapeAttrs>(), inputs[0]);
    default:
      check.fail("not an op of the convolutions");
  }
}

}  // namespace stagecraft::graph::shape_rules
