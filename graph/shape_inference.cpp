#include "graph/shape_inference.h"

#include <algorithm>

#include "common/strings.h"
#include "graph/activation_kinds.h"
#include "graph/errors.h"

namespace stagecraft::graph {

namespace {

// Builds errors that start with the op's name and kind, so every message names its culprit.
class Checker {
 public:
  explicit Checker(const Op& op) : op_(op) {}

  [[noreturn]] void fail(const std::string& rule) const {
    throw ShapeError(cat("op '", op_.name, "' (", to_string(op_.kind), "): ", rule));
  }
  void require(bool ok, const std::string& rule) const {
    if (!ok) fail(rule);
  }
  void arity(const std::vector<TensorDesc>& inputs, size_t min, size_t max) const {
    if (inputs.size() >= min && inputs.size() <= max) return;
    const std::string expected = min == max ? cat(min) : max == SIZE_MAX ? cat("at least ", min)
                                                                         : cat(min, " to ", max);
    throw GraphError(cat("op '", op_.name, "' (", to_string(op_.kind), "): takes ", expected,
                         " input(s), got ", inputs.size()));
  }
  void rank(const TensorDesc& desc, size_t rank, const char* what = "input") const {
    require(desc.shape.rank() == rank, cat(what, " must have rank ", rank, ", got ",
                                           desc.shape.to_string()));
  }
  void positive(const Hw& hw, const char* field) const {
    require(hw.h >= 1 && hw.w >= 1, cat(field, " must be >= 1, got [", hw.h, ", ", hw.w, "]"));
  }
  void non_negative(const Pads& p, const char* field) const {
    require(p.top >= 0 && p.left >= 0 && p.bottom >= 0 && p.right >= 0,
            cat(field, " must be >= 0, got [", p.top, ", ", p.left, ", ", p.bottom, ", ", p.right,
                "]"));
  }

 private:
  const Op& op_;
};

TensorDesc with_shape(const TensorDesc& like, Shape shape) {
  TensorDesc desc = like;
  if (shape.rank() != like.shape.rank()) {
    desc.layout = default_layout(shape.rank()).value_or(like.layout);
  }
  desc.shape = std::move(shape);
  return desc;
}

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

void check_same_dtype(const Checker& check, const std::vector<TensorDesc>& inputs) {
  for (size_t i = 1; i < inputs.size(); ++i) {
    // Quantised inputs may mix u8 and i8 (each carries its scale; kernels rescale).
    const bool both_int8 = is_int8(inputs[i].dtype) && is_int8(inputs[0].dtype);
    check.require(inputs[i].dtype == inputs[0].dtype || both_int8,
                  cat("input ", i, " is ", to_string(inputs[i].dtype), " but input 0 is ",
                      to_string(inputs[0].dtype)));
  }
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

template <class PoolAttrs>
std::vector<TensorDesc> infer_pool(const Checker& check, const PoolAttrs& a, const TensorDesc& x) {
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

// The shape of a broadcast binary op's operands and result (NumPy rules: trailing dimensions
// aligned, each pair equal or one of them 1).
Shape broadcast_shape(const Checker& check, const Shape& a, std::vector<int64_t> b) {
  check.require(b.size() <= a.rank(), cat("the second operand ", Shape(b).to_string(),
                                          " has a higher rank than the first ", a.to_string()));
  b.insert(b.begin(), a.rank() - b.size(), 1);
  std::vector<int64_t> out(a.dims().begin(), a.dims().end());
  for (size_t i = 0; i < out.size(); ++i) {
    check.require(b[i] == out[i] || b[i] == 1 || out[i] == 1,
                  cat("shapes ", a.to_string(), " and ", Shape(b).to_string(),
                      " do not broadcast (dimension ", i, ")"));
    out[i] = std::max(out[i], b[i]);
  }
  return Shape(out);
}

std::vector<TensorDesc> infer_binary(const Checker& check, const BinaryAttrs& a,
                                     const std::vector<TensorDesc>& inputs) {
  const bool constant = !a.constant.empty();
  check.arity(inputs, constant ? 1 : 2, constant ? 1 : 2);
  const TensorDesc& x = inputs[0];
  check.require(x.shape.rank() >= 1, "input must have rank >= 1");
  if (constant) {
    for (int64_t d : a.constant) check.require(d >= 1, cat("constant dimensions must be >= 1"));
    const Shape out = broadcast_shape(check, x.shape, a.constant);
    check.require(out == x.shape, cat("the constant ", Shape(a.constant).to_string(),
                                      " must broadcast to the input ", x.shape.to_string()));
    return {x};
  }
  check.require(!a.constant_first, "constant_first needs a constant");
  check.require(inputs[1].shape.rank() == x.shape.rank(),
                cat("inputs must have the same rank, got ", x.shape.to_string(), " and ",
                    inputs[1].shape.to_string()));
  check_same_dtype(check, inputs);
  const std::vector<int64_t> b(inputs[1].shape.dims().begin(), inputs[1].shape.dims().end());
  return {with_shape(x, broadcast_shape(check, x.shape, b))};
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

// Row-major tensors (transformers): matmul, transpose, narrow, concat_constant.
std::vector<TensorDesc> infer_matmul(const Checker& check, const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 2, 2);
  const Shape& a = inputs[0].shape;
  const Shape& b = inputs[1].shape;
  const size_t r = a.rank();
  check.require(r >= 3 && b.rank() == r,
                cat("inputs must have the same rank >= 3, got ", a.to_string(), " and ",
                    b.to_string()));
  check.require(a[r - 1] == b[r - 2], cat("inner dimensions differ: ", a.to_string(), " x ",
                                          b.to_string()));
  check_same_dtype(check, inputs);
  std::vector<int64_t> out(r);
  for (size_t i = 0; i + 2 < r; ++i) {
    check.require(a[i] == b[i] || a[i] == 1 || b[i] == 1,
                  cat("batch dimensions of ", a.to_string(), " and ", b.to_string(),
                      " do not broadcast (dimension ", i, ")"));
    out[i] = std::max(a[i], b[i]);
  }
  out[r - 2] = a[r - 2];
  out[r - 1] = b[r - 1];
  TensorDesc desc = inputs[0];
  desc.shape = Shape(out);
  desc.layout = row_major_layout(r);
  return {desc};
}

std::vector<TensorDesc> infer_transpose(const Checker& check, const TransposeAttrs& a,
                                        const TensorDesc& x) {
  const size_t r = x.shape.rank();
  std::vector<int64_t> sorted = a.perm;
  std::sort(sorted.begin(), sorted.end());
  bool permutation = sorted.size() == r;
  for (size_t i = 0; permutation && i < r; ++i) permutation = sorted[i] == static_cast<int64_t>(i);
  check.require(permutation, cat("perm must be a permutation of 0 .. ", r - 1, " for ",
                                 x.shape.to_string()));
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) out[i] = x.shape[static_cast<size_t>(a.perm[i])];
  TensorDesc desc = x;
  desc.shape = Shape(out);
  desc.layout = row_major_layout(r);
  return {desc};
}

std::vector<TensorDesc> infer_narrow(const Checker& check, const NarrowAttrs& a,
                                     const TensorDesc& x) {
  const int64_t r = static_cast<int64_t>(x.shape.rank());
  check.require(a.axis >= 0 && a.axis < r, cat("axis ", a.axis, " is not a dimension of ",
                                               x.shape.to_string()));
  const int64_t size = x.shape[static_cast<size_t>(a.axis)];
  check.require(a.begin >= 0 && a.begin < a.end && a.end <= size,
                cat("range [", a.begin, ", ", a.end, ") is not inside [0, ", size, ") of axis ",
                    a.axis));
  TensorDesc out = x;
  out.shape[static_cast<size_t>(a.axis)] = a.end - a.begin;
  out.layout = row_major_layout(out.shape.rank());
  return {out};
}

std::vector<TensorDesc> infer_concat_constant(const Checker& check, const ConcatConstantAttrs& a,
                                              const TensorDesc& x) {
  const int64_t r = static_cast<int64_t>(x.shape.rank());
  check.require(a.axis >= 1 && a.axis < r, cat("axis ", a.axis, " must be in [1, ", r, ")"));
  check.require(a.count >= 1, cat("count must be >= 1, got ", a.count));
  TensorDesc out = x;
  out.shape[static_cast<size_t>(a.axis)] += a.count;
  out.layout = row_major_layout(out.shape.rank());
  return {out};
}

}  // namespace

int64_t window_output_size(int64_t size, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                           int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t room = size + pad_begin + pad_end - span;
  if (room < 0 || stride < 1) return 0;
  int64_t out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  // PyTorch: the last window must start inside the input or the leading padding.
  if (ceil_mode && (out - 1) * stride >= size + pad_begin) --out;
  return out;
}

size_t num_outputs(OpKind kind, const OpAttrs& attrs) {
  if (kind == OpKind::kSplit) {
    if (const auto* split = std::get_if<SplitAttrs>(&attrs)) return split->sizes.size();
  }
  return 1;
}

std::vector<TensorDesc> infer_output_descs(const Op& op, const std::vector<TensorDesc>& inputs) {
  const Checker check(op);
  if (!attrs_match(op.kind, op.attrs)) {
    throw GraphError(cat("op '", op.name, "' (", to_string(op.kind),
                         "): attributes of another op kind were given"));
  }
  switch (op.kind) {
    case OpKind::kConv2d: {
      const auto& a = op.attrs_as<Conv2dAttrs>();
      check.arity(inputs, a.residual ? 2 : 1, a.residual ? 2 : 1);
      std::vector<TensorDesc> out = infer_conv(check, a, inputs[0]);
      if (a.residual) {
        check.require(inputs[1].shape == out[0].shape && inputs[1].dtype == out[0].dtype,
                      cat("the residual input must be ", out[0].shape.to_string(), " ",
                          to_string(out[0].dtype), " like the output (got ",
                          inputs[1].shape.to_string(), " ", to_string(inputs[1].dtype), ")"));
      }
      return out;
    }
    case OpKind::kConvTranspose2d: {
      const auto& a = op.attrs_as<ConvTranspose2dAttrs>();
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
    case OpKind::kBatchNorm:
      check.arity(inputs, 1, 1);
      check.rank(inputs[0], 4);
      check.require(op.attrs_as<BatchNormAttrs>().eps > 0, "eps must be > 0");
      return {inputs[0]};
    STAGECRAFT_PLAIN_ACTIVATION_KINDS:
    case OpKind::kIdentity:
    case OpKind::kScale:
    case OpKind::kLeakyRelu:
      check.arity(inputs, 1, 1);
      return {inputs[0]};
    case OpKind::kLrn: {
      check.arity(inputs, 1, 1);
      check.rank(inputs[0], 4);
      check.require(!is_int8(inputs[0].dtype), "lrn runs on floating-point tensors (dequantise first)");
      const auto& a = op.attrs_as<LrnAttrs>();
      check.require(a.size >= 1 && a.size % 2 == 1, cat("size must be odd and >= 1, got ", a.size));
      check.require(a.bias > 0, cat("bias must be > 0, got ", a.bias));
      return {inputs[0]};
    }
    case OpKind::kUnary: {
      check.arity(inputs, 1, 1);
      check.require(!is_int8(inputs[0].dtype), "unary runs on floating-point tensors (dequantise first)");
      const auto& a = op.attrs_as<UnaryAttrs>();
      check.require(a.fn != UnaryFn::kCelu || a.alpha != 0, "celu's alpha must not be 0");
      return {inputs[0]};
    }
    case OpKind::kLayerNorm:
      check.arity(inputs, 1, 1);
      check.require(inputs[0].shape.rank() >= 2,
                    cat("layer_norm needs rank >= 2 (got ", inputs[0].shape.to_string(), ")"));
      check.require(op.attrs_as<LayerNormAttrs>().eps > 0, "eps must be > 0");
      return {inputs[0]};
    case OpKind::kClip:
      check.arity(inputs, 1, 1);
      check.require(op.attrs_as<ClipAttrs>().min <= op.attrs_as<ClipAttrs>().max, "min must not be above max");
      return {inputs[0]};
    case OpKind::kHardSigmoid:
      check.arity(inputs, 1, 1);
      check.require(op.attrs_as<HardSigmoidAttrs>().alpha != 0, "alpha must not be 0");
      return {inputs[0]};
    case OpKind::kBinary:
      return infer_binary(check, op.attrs_as<BinaryAttrs>(), inputs);
    case OpKind::kWhere: {
      const auto& a = op.attrs_as<WhereAttrs>();
      const size_t given = 3 - static_cast<size_t>(a.condition_constant) - static_cast<size_t>(a.x_constant) -
                           static_cast<size_t>(a.y_constant);
      check.require(given >= 1, "at least one operand must be an input (a where of constants is a constant)");
      check.arity(inputs, given, given);
      check_same_dtype(check, inputs);
      check.require(!is_int8(inputs[0].dtype), "where runs on floating-point tensors (dequantise first)");
      std::vector<std::vector<int64_t>> dims;
      for (const TensorDesc& d : inputs) dims.push_back(d.shape.dims());
      size_t rank = 0;
      for (const auto& s : where_operand_shapes(a, dims)) rank = std::max(rank, s.size());
      check.require(rank >= 1, "the operands must have rank >= 1");
      Shape out(std::vector<int64_t>(rank, 1));
      for (const auto& s : where_operand_shapes(a, dims)) {
        for (int64_t d : s) check.require(d >= 1, "dimensions must be >= 1");
        out = broadcast_shape(check, out, s);
      }
      TensorDesc y = with_shape(inputs[0], out);
      if (out.rank() != inputs[0].shape.rank()) y.layout = row_major_layout(out.rank());
      return {y};
    }
    case OpKind::kGridSample: {
      check.arity(inputs, 2, 2);
      const auto& a = op.attrs_as<GridSampleAttrs>();
      check.require(a.mode >= 0 && a.mode <= 2, "mode must be 0 (nearest), 1 (linear) or 2 (cubic)");
      check.require(a.padding >= 0 && a.padding <= 2, "padding must be 0 (zeros), 1 (border) or 2 (reflection)");
      check_same_dtype(check, inputs);
      check.require(inputs[0].dtype == DataType::kF32, "grid_sample runs in f32");
      const Shape &x = inputs[0].shape, &grid = inputs[1].shape;
      check.require(x.rank() == 4 || x.rank() == 5, "the input must be 4-D or 5-D (2-D or 3-D sampling)");
      check.require(grid.rank() == x.rank(), "the grid must have the input's rank");
      check.require(grid[0] == x[0], "the grid's batch must be the input's");
      check.require(grid[grid.rank() - 1] == static_cast<int64_t>(x.rank()) - 2,
                    "the grid's last dimension must be the number of spatial dimensions");
      std::vector<int64_t> out = {x[0], x[1]};
      for (size_t d = 1; d + 1 < grid.rank(); ++d) out.push_back(grid[d]);
      TensorDesc y = with_shape(inputs[0], Shape(out));
      y.layout = row_major_layout(out.size());
      return {y};
    }
    case OpKind::kReshape:
      check.arity(inputs, 1, 1);
      return infer_reshape(check, op.attrs_as<ReshapeAttrs>(), inputs[0]);
    case OpKind::kChannelShuffle: {  // of the concatenation of its inputs
      check.arity(inputs, 1, SIZE_MAX);
      std::vector<TensorDesc> out = infer_concat(check, inputs);
      const int64_t g = op.attrs_as<ChannelShuffleAttrs>().groups;
      check.require(g >= 1 && out[0].shape[1] % g == 0,
                    cat("groups ", g, " must divide the ", out[0].shape[1], " channels"));
      return out;
    }
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceSum:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd: {
      check.arity(inputs, 1, 1);
      const auto rank = static_cast<int64_t>(inputs[0].shape.rank());
      check.require(rank >= 1, "input must have rank >= 1");
      const auto& axes = op.attrs_as<ReduceAttrs>().axes;
      check.require(!axes.empty() && std::is_sorted(axes.begin(), axes.end()) &&
                        std::adjacent_find(axes.begin(), axes.end()) == axes.end() && axes.front() >= 0 &&
                        axes.back() < rank,
                    cat("axes must be distinct, ascending, among 0 .. ", rank - 1));
      TensorDesc out = inputs[0];
      for (int64_t a : axes) out.shape[static_cast<size_t>(a)] = 1;
      return {out};
    }
    case OpKind::kSpaceToDepth: {
      check.arity(inputs, 1, 1);
      check.rank(inputs[0], 4);
      const int64_t b = op.attrs_as<SpaceToDepthAttrs>().block;
      const Shape& s = inputs[0].shape;
      check.require(b >= 1 && s[2] % b == 0 && s[3] % b == 0,
                    cat("the block (", b, ") must divide H and W (", s[2], "x", s[3], ")"));
      TensorDesc out = inputs[0];
      out.shape = Shape{s[0], s[1] * b * b, s[2] / b, s[3] / b};
      return {out};
    }
    case OpKind::kResize: {
      check.arity(inputs, 1, 1);
      check.rank(inputs[0], 4);
      const auto& a = op.attrs_as<ResizeAttrs>();
      check.require(a.size.h > 0 && a.size.w > 0, "size must be positive");
      check.require(a.scale_h > 0 && a.scale_w > 0, "scale_h and scale_w must be positive");
      check.require(!(a.linear && a.cubic), "linear and cubic exclude each other");
      const Shape& s = inputs[0].shape;
      return {with_shape(inputs[0], Shape{s[0], s[1], a.size.h, a.size.w})};
    }
    case OpKind::kMaxPool:
      check.arity(inputs, 1, 1);
      return infer_pool(check, op.attrs_as<MaxPoolAttrs>(), inputs[0]);
    case OpKind::kAvgPool:
      check.arity(inputs, 1, 1);
      return infer_pool(check, op.attrs_as<AvgPoolAttrs>(), inputs[0]);
    case OpKind::kGlobalAvgPool:
    case OpKind::kGlobalMaxPool: {
      check.arity(inputs, 1, 1);
      check.rank(inputs[0], 4);
      const Shape& s = inputs[0].shape;
      return {with_shape(inputs[0], Shape{s[0], s[1], 1, 1})};
    }
    case OpKind::kAdd:
      check.arity(inputs, 2, SIZE_MAX);
      for (size_t i = 1; i < inputs.size(); ++i) {
        check.require(inputs[i].shape == inputs[0].shape,
                      cat("input ", i, " is ", inputs[i].shape.to_string(), " but input 0 is ",
                          inputs[0].shape.to_string(), ": added inputs must have the same shape"));
      }
      check_same_dtype(check, inputs);
      return {inputs[0]};
    case OpKind::kConcat:
      check.arity(inputs, 1, SIZE_MAX);
      return infer_concat(check, inputs);
    case OpKind::kSplit:
      check.arity(inputs, 1, 1);
      return infer_split(check, op.attrs_as<SplitAttrs>(), inputs[0]);
    case OpKind::kSlice: {
      check.arity(inputs, 1, 1);
      check.rank(inputs[0], 4);
      const auto& a = op.attrs_as<SliceAttrs>();
      check.require(a.begin >= 0 && a.begin < a.end && a.end <= inputs[0].shape[1],
                    cat("channel range [", a.begin, ", ", a.end, ") is not inside [0, ",
                        inputs[0].shape[1], ")"));
      Shape s = inputs[0].shape;
      s[1] = a.end - a.begin;
      return {with_shape(inputs[0], s)};
    }
    case OpKind::kPad: {
      check.arity(inputs, 1, 1);
      check.rank(inputs[0], 4);
      const auto& p = op.attrs_as<PadAttrs>().pads;
      Shape s = inputs[0].shape;
      if (op.attrs_as<PadAttrs>().reflect) {
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
    case OpKind::kFlatten: {
      check.arity(inputs, 1, 1);
      const Shape& s = inputs[0].shape;
      check.require(s.rank() >= 2, cat("input must have rank >= 2, got ", s.to_string()));
      return {with_shape(inputs[0], Shape{s[0], s.numel() / s[0]})};
    }
    case OpKind::kLinear: {
      check.arity(inputs, 1, 1);
      const Shape& s = inputs[0].shape;
      check.require(s.rank() == 2 || s.rank() >= 3,
                    cat("input must have rank 2 or >= 3 (features last), got ", s.to_string()));
      check.require(s.rank() != 4 || inputs[0].layout == Layout::kRowMajor,
                    "a rank-4 input must be a row-major (plain) tensor");
      const auto& a = op.attrs_as<LinearAttrs>();
      check.require(a.in_features >= 1 && a.out_features >= 1,
                    "in_features and out_features must be >= 1");
      check.require(s[s.rank() - 1] == a.in_features,
                    cat("input has ", s[s.rank() - 1], " features but in_features is ",
                        a.in_features));
      std::vector<int64_t> out = s.dims();
      out.back() = a.out_features;
      return {with_shape(inputs[0], Shape(out))};
    }
    case OpKind::kSoftmax: {
      check.arity(inputs, 1, 1);
      const int64_t axis = op.attrs_as<SoftmaxAttrs>().axis;
      check.require(axis >= 0 && axis < static_cast<int64_t>(inputs[0].shape.rank()),
                    cat("axis ", axis, " is not a dimension of ", inputs[0].shape.to_string()));
      return {inputs[0]};
    }
    case OpKind::kMatMul:
      return infer_matmul(check, inputs);
    case OpKind::kTranspose:
      check.arity(inputs, 1, 1);
      return infer_transpose(check, op.attrs_as<TransposeAttrs>(), inputs[0]);
    case OpKind::kNarrow:
      check.arity(inputs, 1, 1);
      return infer_narrow(check, op.attrs_as<NarrowAttrs>(), inputs[0]);
    case OpKind::kConcatConstant:
      check.arity(inputs, 1, 1);
      return infer_concat_constant(check, op.attrs_as<ConcatConstantAttrs>(), inputs[0]);
  }
  check.fail("unhandled op kind");
}

}  // namespace stagecraft::graph
