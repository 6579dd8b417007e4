#pragma once
/// Operators of the graph IR: the one list of op kinds (which generates the enum, the names used
/// in files and the attribute type of each kind), the typed attributes, `Op` and `Value`.
///
/// Every attribute struct lists its fields once in `fields()`, which drives the YAML reader and
/// writer, equality, hashing and labels, so adding a field is a one-line change.
///
/// Example:
///   Conv2dAttrs a;
///   a.in_channels = 64; a.out_channels = 96; a.kernel = {3, 3}; a.padding = Pads::same(1);
///   OpAttrs attrs = a;   // given to Graph::add_op with OpKind::kConv2d

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "graph/types.h"

namespace stagecraft::graph {

/// Dense index of an op in its graph (also its insertion order, which is topological).
using OpId = int32_t;
/// Dense index of a value (tensor) in its graph.
using ValueId = int32_t;
/// "No op": the producer of a graph input.
inline constexpr OpId kNoOp = -1;

/// Element-wise activation fused into the epilogue of a conv, linear, add or binary op. PyTorch's
/// hard_sigmoid = relu6(x + 3) / 6, hard_swish = x · hard_sigmoid(x), silu (swish) = x · sigmoid(x).
#define STAGECRAFT_ACTIVATIONS(X) \
  X(kNone, "none")                \
  X(kRelu, "relu")                \
  X(kRelu6, "relu6")              \
  X(kSigmoid, "sigmoid")          \
  X(kHardSigmoid, "hard_sigmoid") \
  X(kHardSwish, "hard_swish")     \
  X(kSilu, "silu")                \
  X(kGelu, "gelu")                \
  X(kGeluTanh, "gelu_tanh")       \
  X(kTanh, "tanh")                \
  X(kSqrt, "sqrt")

/// A fused activation function.
enum class Activation : uint8_t {
#define STAGECRAFT_X(value, name) value,
  STAGECRAFT_ACTIVATIONS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

/// Name used in files ("relu").
std::string_view to_string(Activation activation);
/// Parses a name; nullopt when unknown.
std::optional<Activation> parse_activation(std::string_view name);
/// Every activation name.
std::vector<std::string> activation_names();

/// The operation of a binary element-wise op. The comparisons and logical ops give 1 (true) or 0
/// (false): a boolean tensor is a float tensor of 0s and 1s (ONNX's masks), and the logical ops
/// read any non-zero value as true.
#define STAGECRAFT_BINARY_OPS(X)       \
  X(kAdd, "add")                       \
  X(kSub, "sub")                       \
  X(kMul, "mul")                       \
  X(kDiv, "div")                       \
  X(kPow, "pow")                       \
  X(kMax, "max")                       \
  X(kMin, "min")                       \
  X(kMod, "mod")                       \
  X(kEqual, "equal")                   \
  X(kLess, "less")                     \
  X(kLessEqual, "less_equal")          \
  X(kGreater, "greater")               \
  X(kGreaterEqual, "greater_equal")    \
  X(kAnd, "and")                       \
  X(kOr, "or")                         \
  X(kXor, "xor")

/// An element-wise binary operation.
enum class BinaryOp : uint8_t {
#define STAGECRAFT_X(value, name) value,
  STAGECRAFT_BINARY_OPS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

/// Name used in files ("mul").
std::string_view to_string(BinaryOp op);
/// Parses a name; nullopt when unknown.
std::optional<BinaryOp> parse_binary_op(std::string_view name);
/// Every binary operation name.
std::vector<std::string> binary_op_names();
/// Whether `op` is add, sub, mul or div: the operations a constant operand of which folds into a
/// convolution's or linear layer's weights and bias. pow, max, min and mod (C's fmod: the sign of
/// the first operand, ONNX Mod with fmod 1) do not.
inline bool is_arithmetic(BinaryOp op) { return op <= BinaryOp::kDiv; }
/// Whether `op` gives a boolean (0 or 1): the comparisons and logical ops.
inline bool is_boolean(BinaryOp op) { return op >= BinaryOp::kEqual; }
/// Whether a OP b == b OP a.
inline bool is_commutative(BinaryOp op) {
  return op == BinaryOp::kAdd || op == BinaryOp::kMul || op == BinaryOp::kMax || op == BinaryOp::kMin ||
         op == BinaryOp::kEqual || op == BinaryOp::kAnd || op == BinaryOp::kOr || op == BinaryOp::kXor;
}
/// a OP b in float (max and min propagate a NaN, as NumPy's maximum and minimum do).
float apply_binary(BinaryOp op, float a, float b);

/// The function of a unary op: ONNX's element-wise math on tensors of any rank, with its two
/// parameters where it has them (alpha, beta of UnaryAttrs): elu(alpha), selu(alpha, beta = gamma),
/// celu(alpha), thresholded_relu(alpha), shrink(alpha = lambd, beta = bias), swish(alpha),
/// is_inf(alpha = detect_negative, beta = detect_positive). not, is_nan and is_inf give 1 or 0 (a
/// boolean tensor, as the comparisons).
#define STAGECRAFT_UNARY_FNS(X)            \
  X(kAbs, "abs", "Abs")                    \
  X(kExp, "exp", "Exp")                    \
  X(kLog, "log", "Log")                    \
  X(kCeil, "ceil", "Ceil")                 \
  X(kFloor, "floor", "Floor")              \
  X(kRound, "round", "Round")              \
  X(kSign, "sign", "Sign")                 \
  X(kSin, "sin", "Sin")                    \
  X(kCos, "cos", "Cos")                    \
  X(kTan, "tan", "Tan")                    \
  X(kAsin, "asin", "Asin")                 \
  X(kAcos, "acos", "Acos")                 \
  X(kAtan, "atan", "Atan")                 \
  X(kSinh, "sinh", "Sinh")                 \
  X(kCosh, "cosh", "Cosh")                 \
  X(kAsinh, "asinh", "Asinh")              \
  X(kAcosh, "acosh", "Acosh")              \
  X(kAtanh, "atanh", "Atanh")              \
  X(kErf, "erf", "Erf")                    \
  X(kSoftplus, "softplus", "Softplus")     \
  X(kSoftsign, "softsign", "Softsign")     \
  X(kMish, "mish", "Mish")                 \
  X(kElu, "elu", "Elu")                    \
  X(kSelu, "selu", "Selu")                 \
  X(kCelu, "celu", "Celu")                 \
  X(kThresholdedRelu, "thresholded_relu", "ThresholdedRelu") \
  X(kShrink, "shrink", "Shrink")           \
  X(kSwish, "swish", "Swish")              \
  X(kNot, "not", "Not")                    \
  X(kIsNaN, "is_nan", "IsNaN")             \
  X(kIsInf, "is_inf", "IsInf")

/// A unary element-wise function (the third column of the list: its ONNX op type).
enum class UnaryFn : uint8_t {
#define STAGECRAFT_X(value, name, onnx) value,
  STAGECRAFT_UNARY_FNS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

/// Name used in files ("abs").
std::string_view to_string(UnaryFn fn);
/// Parses a name; nullopt when unknown.
std::optional<UnaryFn> parse_unary_fn(std::string_view name);
/// Every unary function name.
std::vector<std::string> unary_fn_names();
/// The ONNX op type that computes `fn` ("Abs").
std::string_view onnx_op_type(UnaryFn fn);
/// The function ONNX op type `type` computes; nullopt when it is not one of the list.
std::optional<UnaryFn> unary_fn_of_onnx(std::string_view type);

/// A (height, width) pair: kernel, stride or dilation.
struct Hw {
  int64_t h = 1;  ///< height component
  int64_t w = 1;  ///< width component
  /// The same value for both.
  static Hw square(int64_t v) { return {v, v}; }
  bool operator==(const Hw&) const = default;
};

/// Zero padding on each side of a 2-D window (negative values crop, for Pad only).
struct Pads {
  int64_t top = 0;     ///< rows added above
  int64_t left = 0;    ///< columns added on the left
  int64_t bottom = 0;  ///< rows added below
  int64_t right = 0;   ///< columns added on the right
  /// The same padding on every side.
  static Pads same(int64_t p) { return {p, p, p, p}; }
  /// Symmetric padding: `h` above and below, `w` left and right.
  static Pads symmetric(int64_t h, int64_t w) { return {h, w, h, w}; }
  bool operator==(const Pads&) const = default;
};

/// Whether a field must appear in a graph file.
enum class FieldRule : uint8_t {
  kRequired,  ///< must be present
  kOptional,  ///< may be omitted; defaults to the value of a default-constructed struct
};

/// Attributes of kinds that have none.
struct NoAttrs {
  template <class Self, class Visitor>
  static void fields(Self&, Visitor&&) {}
  bool operator==(const NoAttrs&) const = default;
};

/// 2-D convolution. Weights are [out_channels, in_channels / groups, kernel.h, kernel.w].
struct Conv2dAttrs {
  int64_t in_channels = 0;                  ///< input channels (weight shape)
  int64_t out_channels = 0;                 ///< output channels
  Hw kernel{0, 0};                          ///< kernel size
  Hw stride{1, 1};                          ///< stride
  Pads padding;                             ///< zero padding
  Hw dilation{1, 1};                        ///< dilation
  int64_t groups = 1;                       ///< channel groups (in_channels for depthwise)
  bool bias = false;                        ///< whether a bias is added
  Activation activation = Activation::kNone;  ///< fused activation
  /// A second input added before the activation: y = act(conv(x) + bias + residual), a ResNet
  /// shortcut fused into the convolution (fuse_residual_adds).
  bool residual = false;

  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("in_channels", a.in_channels, FieldRule::kRequired);
    v("out_channels", a.out_channels, FieldRule::kRequired);
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("dilation", a.dilation, FieldRule::kOptional);
    v("groups", a.groups, FieldRule::kOptional);
    v("bias", a.bias, FieldRule::kOptional);
    v("activation", a.activation, FieldRule::kOptional);
    v("residual", a.residual, FieldRule::kOptional);
  }
  bool operator==(const Conv2dAttrs&) const = default;
};

/// Transposed 2-D convolution (ONNX ConvTranspose, PyTorch's ConvTranspose2d: a segmentation
/// head's learned upsampling): input pixel (y, x) adds weight · x to output pixels
/// (y · stride + ky · dilation - padding.top, ...). Output size per axis: stride · (in - 1) +
/// dilation · (kernel - 1) + 1 + output_padding - padding at both ends. Weights are
/// [out_channels, in_channels / groups, kernel.h, kernel.w], as a convolution's (the importer
/// reorders ONNX's [in, out / groups, ...]).
struct ConvTranspose2dAttrs {
  int64_t in_channels = 0;   ///< input channels
  int64_t out_channels = 0;  ///< output channels
  Hw kernel{0, 0};           ///< kernel size
  Hw stride{1, 1};           ///< stride (the upsampling factor)
  Pads padding;              ///< removed from the output's edges
  Hw output_padding{0, 0};   ///< added to the output's bottom and right (each < stride or dilation)
  Hw dilation{1, 1};         ///< dilation
  int64_t groups = 1;        ///< channel groups
  bool bias = false;         ///< whether a bias is added

  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("in_channels", a.in_channels, FieldRule::kRequired);
    v("out_channels", a.out_channels, FieldRule::kRequired);
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("output_padding", a.output_padding, FieldRule::kOptional);
    v("dilation", a.dilation, FieldRule::kOptional);
    v("groups", a.groups, FieldRule::kOptional);
    v("bias", a.bias, FieldRule::kOptional);
  }
  bool operator==(const ConvTranspose2dAttrs&) const = default;
};

/// Batch normalisation in inference form: y = act((x - mean) / sqrt(var + eps) * gamma + beta).
struct BatchNormAttrs {
  double eps = 1e-5;                          ///< variance epsilon
  Activation activation = Activation::kNone;  ///< fused activation (a pre-activation DenseNet's BN+ReLU)
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("eps", a.eps, FieldRule::kOptional);
    v("activation", a.activation, FieldRule::kOptional);
  }
  bool operator==(const BatchNormAttrs&) const = default;
};

/// Max pooling over 2-D windows.
struct MaxPoolAttrs {
  Hw kernel{0, 0};         ///< window size
  Hw stride{1, 1};         ///< stride
  Pads padding;            ///< implicit padding (never selected)
  bool ceil_mode = false;  ///< round the output size up, as PyTorch's ceil_mode
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("ceil_mode", a.ceil_mode, FieldRule::kOptional);
  }
  bool operator==(const MaxPoolAttrs&) const = default;
};

/// Average pooling over 2-D windows.
struct AvgPoolAttrs {
  Hw kernel{0, 0};                 ///< window size
  Hw stride{1, 1};                 ///< stride
  Pads padding;                    ///< zero padding
  bool ceil_mode = false;          ///< round the output size up
  bool count_include_pad = true;   ///< divide by the full window, padding included
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("ceil_mode", a.ceil_mode, FieldRule::kOptional);
    v("count_include_pad", a.count_include_pad, FieldRule::kOptional);
  }
  bool operator==(const AvgPoolAttrs&) const = default;
};

/// Element-wise sum of two or more same-shaped inputs, with an optional fused activation.
struct AddAttrs {
  Activation activation = Activation::kNone;  ///< fused activation
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("activation", a.activation, FieldRule::kOptional);
  }
  bool operator==(const AddAttrs&) const = default;
};

/// Split along channels into consecutive parts of the given sizes (one output per part).
struct SplitAttrs {
  std::vector<int64_t> sizes;  ///< channels of each output
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("sizes", a.sizes, FieldRule::kRequired);
  }
  bool operator==(const SplitAttrs&) const = default;
};

/// Channel slice [begin, end) of the input.
struct SliceAttrs {
  int64_t begin = 0;  ///< first channel
  int64_t end = 0;    ///< one past the last channel
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("begin", a.begin, FieldRule::kRequired);
    v("end", a.end, FieldRule::kRequired);
  }
  bool operator==(const SliceAttrs&) const = default;
};

/// Constant padding of H and W (negative amounts crop).
struct PadAttrs {
  Pads pads;          ///< amount per side
  double value = 0;   ///< fill value
  /// Mirror the pixels next to the edge instead of filling (ONNX mode "reflect": row -1 is row 1);
  /// pads must then be >= 0 and smaller than the side they extend.
  bool reflect = false;
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("pads", a.pads, FieldRule::kRequired);
    v("value", a.value, FieldRule::kOptional);
    v("reflect", a.reflect, FieldRule::kOptional);
  }
  bool operator==(const PadAttrs&) const = default;
};

/// Fully connected layer (GEMM): y = x Wᵀ + b with W [out_features, in_features], over the last
/// axis of its input (rank 2, or a row-major tensor of rank 3 or more: a transformer's tokens).
struct LinearAttrs {
  int64_t in_features = 0;                    ///< input features (weight shape)
  int64_t out_features = 0;                   ///< output features
  bool bias = true;                           ///< whether a bias is added
  Activation activation = Activation::kNone;  ///< fused activation
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("in_features", a.in_features, FieldRule::kRequired);
    v("out_features", a.out_features, FieldRule::kRequired);
    v("bias", a.bias, FieldRule::kOptional);
    v("activation", a.activation, FieldRule::kOptional);
  }
  bool operator==(const LinearAttrs&) const = default;
};

/// Multiplication by a constant: y = factor · x (ONNX Mul by a scalar).
struct ScaleAttrs {
  double factor = 1.0;  ///< the constant
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("factor", a.factor, FieldRule::kRequired);
  }
  bool operator==(const ScaleAttrs&) const = default;
};

/// PyTorch's HardSigmoid slope (1/6) and offset (1/2).
inline constexpr double kHardSigmoidAlpha = 1.0 / 6.0;
inline constexpr double kHardSigmoidBeta = 0.5;

/// Hard sigmoid: y = clamp(alpha · x + beta, 0, 1) (ONNX HardSigmoid; PyTorch's by default).
struct HardSigmoidAttrs {
  double alpha = kHardSigmoidAlpha;  ///< slope
  double beta = kHardSigmoidBeta;    ///< offset
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("alpha", a.alpha, FieldRule::kOptional);
    v("beta", a.beta, FieldRule::kOptional);
  }
  bool operator==(const HardSigmoidAttrs&) const = default;
};

/// Clip: y = min(max(x, min), max) (ONNX Clip with other bounds than ReLU's and ReLU6's).
struct ClipAttrs {
  double min = -3.4028234663852886e38;  ///< a missing bound is float's largest value
  double max = 3.4028234663852886e38;
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("min", a.min, FieldRule::kOptional);
    v("max", a.max, FieldRule::kOptional);
  }
  bool operator==(const ClipAttrs&) const = default;
};

/// Leaky ReLU: y = x for x >= 0, alpha · x otherwise.
struct LeakyReluAttrs {
  double alpha = 0.01;  ///< slope for negative inputs
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("alpha", a.alpha, FieldRule::kOptional);
  }
  bool operator==(const LeakyReluAttrs&) const = default;
};

/// Layer normalisation over the channels of each pixel (rank 4) or the features of each row
/// (rank 2), or the last axis of a row-major tensor of another rank (a transformer's tokens
/// [N, T, C]): y = (x - mean) / sqrt(var + eps) · gamma + beta, mean and (biased) variance over the
/// C values, gamma and beta per channel in the op's weights. ONNX LayerNormalization over the last
/// axis of a channels-last view (ConvNeXt, ViT).
struct LayerNormAttrs {
  double eps = 1e-5;  ///< added to the variance
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("eps", a.eps, FieldRule::kOptional);
  }
  bool operator==(const LayerNormAttrs&) const = default;
};

/// Local response normalisation across channels (AlexNet, GoogLeNet; ONNX LRN): y = x / (bias +
/// alpha / size · Σ x²)^beta, the sum over the `size` channels centred on each (odd `size`).
struct LrnAttrs {
  int64_t size = 5;     ///< channels in the window (odd)
  double alpha = 1e-4;  ///< scale of the sum of squares (divided by size)
  double beta = 0.75;   ///< exponent
  double bias = 1.0;    ///< added before the power
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("size", a.size, FieldRule::kRequired);
    v("alpha", a.alpha, FieldRule::kOptional);
    v("beta", a.beta, FieldRule::kOptional);
    v("bias", a.bias, FieldRule::kOptional);
  }
  bool operator==(const LrnAttrs&) const = default;
};

/// Softmax over one axis (1: the channels of a rank-4 tensor or the features of a rank-2 one;
/// any axis of a row-major tensor: attention scores over their keys).
struct SoftmaxAttrs {
  int64_t axis = 1;  ///< the axis normalised (non-negative)
  bool log = false;  ///< log(softmax(x)) computed as x - max - log(sum(exp(x - max))) (ONNX LogSoftmax)
  /// 1 at the first largest element along the axis, 0 elsewhere (ONNX Hardmax; `log` false)
  bool hard = false;
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("axis", a.axis, FieldRule::kOptional);
    v("log", a.log, FieldRule::kOptional);
    v("hard", a.hard, FieldRule::kOptional);
  }
  bool operator==(const SoftmaxAttrs&) const = default;
};

/// Permutation of the dimensions of a row-major tensor (real data movement): output dimension i
/// is input dimension perm[i].
struct TransposeAttrs {
  std::vector<int64_t> perm;  ///< a permutation of 0 .. rank-1
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("perm", a.perm, FieldRule::kRequired);
  }
  bool operator==(const TransposeAttrs&) const = default;
};

/// The range [begin, end) of one axis of a row-major tensor (PyTorch's narrow; ONNX Slice, Split
/// and Gather of one index on a transformer's tensors).
struct NarrowAttrs {
  int64_t axis = 0;   ///< the axis cut
  int64_t begin = 0;  ///< first index kept
  int64_t end = 0;    ///< one past the last
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("axis", a.axis, FieldRule::kRequired);
    v("begin", a.begin, FieldRule::kRequired);
    v("end", a.end, FieldRule::kRequired);
  }
  bool operator==(const NarrowAttrs&) const = default;
};

/// The input with a constant block joined before or after it along one axis of a row-major
/// tensor (a vision transformer's class and distillation tokens: Concat(Expand(token), x)). The
/// constant (weight) has the input's shape with `count` along `axis` and 1 as the first
/// dimension (the same for every sample).
struct ConcatConstantAttrs {
  int64_t axis = 1;     ///< the axis joined along (>= 1)
  int64_t count = 1;    ///< the constant's extent along it
  bool before = true;   ///< the constant comes first
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("axis", a.axis, FieldRule::kRequired);
    v("count", a.count, FieldRule::kRequired);
    v("before", a.before, FieldRule::kOptional);
  }
  bool operator==(const ConcatConstantAttrs&) const = default;
};

/// Space to depth (ONNX SpaceToDepth, TResNet's stem): each block x block patch of pixels becomes
/// channels; output channel (bh · block + bw) · C + c at (y, x) is input channel c at
/// (y · block + bh, x · block + bw). H and W must be multiples of the block.
struct SpaceToDepthAttrs {
  int64_t block = 2;  ///< patch side
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("block", a.block, FieldRule::kRequired);
  }
  bool operator==(const SpaceToDepthAttrs&) const = default;
};

/// Mean, maximum, sum, minimum or product over `axes` of a tensor of any rank, the reduced
/// dimensions kept as 1 (ONNX ReduceMean/Max/Sum/Min/Prod with keepdims; CBAM's channel pooling).
/// The importer makes reductions over H and W alone of a rank-4 tensor global pools.
struct ReduceAttrs {
  std::vector<int64_t> axes;  ///< among 0 .. rank - 1, ascending
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("axes", a.axes, FieldRule::kRequired);
  }
  bool operator==(const ReduceAttrs&) const = default;
};

/// y = act(a OP b) element-wise with NumPy broadcasting (a dimension of b may be 1 where a's is
/// not): per-channel scales, squeeze-and-excitation gates. With `constant` set, b is not an input
/// but a constant tensor of that shape held in the op's weights (weight); `constant_first` puts it
/// first (c - a, c / a).
struct BinaryAttrs {
  BinaryOp op = BinaryOp::kMul;                 ///< the operation
  std::vector<int64_t> constant;                ///< shape of a constant operand; empty: two inputs
  bool constant_first = false;                  ///< the constant is the first operand
  Activation activation = Activation::kNone;    ///< fused activation
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("op", a.op, FieldRule::kRequired);
    v("constant", a.constant, FieldRule::kOptional);
    v("constant_first", a.constant_first, FieldRule::kOptional);
    v("activation", a.activation, FieldRule::kOptional);
  }
  bool operator==(const BinaryAttrs&) const = default;
};

/// Resampling of H and W (ONNX Resize, PyTorch's interpolate/Upsample) to `size`. A destination
/// pixel y maps to the source coordinate y / scale_h (x likewise): nearest takes source pixel
/// floor(y / scale_h) (ONNX "asymmetric" with nearest_mode "floor": PyTorch's "nearest"); linear
/// interpolates between the two nearest pixels at (y + 0.5) / scale_h - 0.5 clamped to the
/// source (ONNX "half_pixel": PyTorch's "bilinear" with align_corners=False).
struct ResizeAttrs {
  Hw size;             ///< output height and width
  double scale_h = 0;  ///< coordinate scale (output / input when the model gives sizes)
  double scale_w = 0;
  bool linear = false;  ///< bilinear; nearest otherwise
  /// bicubic (linear false): the 4 x 4 pixels around the linear coordinate, unclamped, weighted by
  /// Keys' kernel with a = -0.75, edge pixels repeated (PyTorch's "bicubic")
  bool cubic = false;
  /// linear only: source coordinate y · (in - 1) / (in · scale - 1) (= (out - 1) when the size
  /// gives the scale), the corners' pixels kept (ONNX
  /// "align_corners": PyTorch's bilinear with align_corners=True, DPT's fusion stages)
  bool align_corners = false;
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("size", a.size, FieldRule::kRequired);
    v("scale_h", a.scale_h, FieldRule::kRequired);
    v("scale_w", a.scale_w, FieldRule::kRequired);
    v("linear", a.linear, FieldRule::kOptional);
    v("cubic", a.cubic, FieldRule::kOptional);
    v("align_corners", a.align_corners, FieldRule::kOptional);
  }
  bool operator==(const ResizeAttrs&) const = default;
};

/// y = condition ? x : y element-wise with NumPy broadcasting of the three (ONNX Where: masks,
/// padding with -inf); a non-zero condition is true. Each operand is an input of the op or a
/// constant in its weights (condition: gamma, x: weight, y: bias) of the shape given here; the
/// inputs are the non-constant ones in the order condition, x, y.
struct WhereAttrs {
  bool condition_constant = false;
  bool x_constant = false;
  bool y_constant = false;
  std::vector<int64_t> condition_shape;  ///< of a constant condition
  std::vector<int64_t> x_shape;          ///< of a constant x
  std::vector<int64_t> y_shape;          ///< of a constant y
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("condition_constant", a.condition_constant, FieldRule::kOptional);
    v("x_constant", a.x_constant, FieldRule::kOptional);
    v("y_constant", a.y_constant, FieldRule::kOptional);
    v("condition_shape", a.condition_shape, FieldRule::kOptional);
    v("x_shape", a.x_shape, FieldRule::kOptional);
    v("y_shape", a.y_shape, FieldRule::kOptional);
  }
  bool operator==(const WhereAttrs&) const = default;
};

/// y[n, c, p] = x[n, c] sampled at grid[n, p] (ONNX GridSample, 2-D and 3-D): x [N, C, spatial...]
/// and grid [N, out spatial..., k] of normalised coordinates in [-1, 1] (the last spatial axis
/// first, k = the spatial rank), y [N, C, out spatial...]. Row-major tensors.
struct GridSampleAttrs {
  int64_t mode = 1;     ///< 0 nearest (half to even), 1 linear, 2 cubic (Keys, a = -0.75)
  int64_t padding = 0;  ///< outside the input: 0 zeros, 1 the border's value, 2 reflected
  bool align_corners = false;  ///< -1 and 1 are the centres of the corner elements (else their edges)
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("mode", a.mode, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("align_corners", a.align_corners, FieldRule::kOptional);
  }
  bool operator==(const GridSampleAttrs&) const = default;
};

/// The shapes of a where op's three operands: the inputs' (`inputs`, in order) and the constants'.
std::vector<std::vector<int64_t>> where_operand_shapes(const WhereAttrs& a, const std::vector<std::vector<int64_t>>& inputs);

/// y = fn(x) element-wise, any rank and layout (ONNX's math functions: Abs, Exp, Sin, Erf, Elu,
/// ...). `alpha` and `beta` are the function's parameters (see STAGECRAFT_UNARY_FNS; unused by the
/// others, and then 0).
struct UnaryAttrs {
  UnaryFn fn = UnaryFn::kAbs;  ///< the function
  double alpha = 0;            ///< first parameter (elu's alpha, shrink's lambd)
  double beta = 0;             ///< second parameter (selu's gamma, shrink's bias)
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("fn", a.fn, FieldRule::kRequired);
    v("alpha", a.alpha, FieldRule::kOptional);
    v("beta", a.beta, FieldRule::kOptional);
  }
  bool operator==(const UnaryAttrs&) const = default;
};

/// fn(x) as a unary op with `attrs` computes it (in double, rounded to float): the one definition
/// every backend's kernel and the reference agree with.
float apply_unary(const UnaryAttrs& attrs, float x);

/// The shape of a binary op's constant at `rank` (leading 1s added, as NumPy aligns trailing
/// dimensions).
std::vector<int64_t> constant_shape(const BinaryAttrs& attrs, size_t rank);

/// Reshape keeping the batch: the output is [N, dims...] with the same elements in plain (NCHW or
/// NC) order; rank 2 or 4 in and out ([N, C, 1, 1] <-> [N, C], flattening, unflattening).
struct ReshapeAttrs {
  /// Output dimensions after the batch (1 or 3 of them); with `full`, every output dimension
  /// (any rank; the elements keep their row-major order, so the input must be in a plain layout).
  std::vector<int64_t> dims;
  bool full = false;  ///< `dims` includes the first dimension
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("dims", a.dims, FieldRule::kRequired);
    v("full", a.full, FieldRule::kOptional);
  }
  bool operator==(const ReshapeAttrs&) const = default;
};

/// Channel shuffle (ShuffleNet): channels viewed as [groups, C / groups], transposed, flattened:
/// output channel k · groups + g is input channel g · (C / groups) + k. With several inputs it
/// shuffles their concatenation along channels (fold_concats_into_shuffles makes those).
struct ChannelShuffleAttrs {
  int64_t groups = 1;  ///< the number of groups
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("groups", a.groups, FieldRule::kRequired);
  }
  bool operator==(const ChannelShuffleAttrs&) const = default;
};

/// The one list of op kinds: enum value, name in files, attribute type.
/// Concat, Split and Slice work on the channel axis; Softmax on the feature axis of an N×C tensor;
/// Flatten turns N×C×H×W into N×(C·H·W); the global pools reduce H and W to 1.
#define STAGECRAFT_OP_KINDS(X)                         \
  X(kConv2d, "conv2d", Conv2dAttrs)                    \
  X(kBatchNorm, "batch_norm", BatchNormAttrs)          \
  X(kRelu, "relu", NoAttrs)                            \
  X(kRelu6, "relu6", NoAttrs)                          \
  X(kSigmoid, "sigmoid", NoAttrs)                      \
  X(kMaxPool, "max_pool", MaxPoolAttrs)                \
  X(kAvgPool, "avg_pool", AvgPoolAttrs)                \
  X(kGlobalAvgPool, "global_avg_pool", NoAttrs)        \
  X(kAdd, "add", AddAttrs)                             \
  X(kConcat, "concat", NoAttrs)                        \
  X(kSplit, "split", SplitAttrs)                       \
  X(kSlice, "slice", SliceAttrs)                       \
  X(kIdentity, "identity", NoAttrs)                    \
  X(kPad, "pad", PadAttrs)                             \
  X(kFlatten, "flatten", NoAttrs)                      \
  X(kLinear, "linear", LinearAttrs)                    \
  X(kSoftmax, "softmax", SoftmaxAttrs)                 \
  X(kScale, "scale", ScaleAttrs)                       \
  X(kHardSigmoid, "hard_sigmoid", HardSigmoidAttrs)    \
  X(kHardSwish, "hard_swish", NoAttrs)                 \
  X(kSilu, "silu", NoAttrs)                            \
  X(kBinary, "binary", BinaryAttrs)                    \
  X(kGlobalMaxPool, "global_max_pool", NoAttrs)        \
  X(kReshape, "reshape", ReshapeAttrs)                 \
  X(kChannelShuffle, "channel_shuffle", ChannelShuffleAttrs) \
  X(kLeakyRelu, "leaky_relu", LeakyReluAttrs)          \
  X(kClip, "clip", ClipAttrs)                          \
  X(kResize, "resize", ResizeAttrs)                    \
  X(kGelu, "gelu", NoAttrs)                            \
  X(kGeluTanh, "gelu_tanh", NoAttrs)                   \
  X(kLayerNorm, "layer_norm", LayerNormAttrs)          \
  X(kSpaceToDepth, "space_to_depth", SpaceToDepthAttrs) \
  X(kReduceMean, "reduce_mean", ReduceAttrs)           \
  X(kReduceMax, "reduce_max", ReduceAttrs)             \
  X(kReduceSum, "reduce_sum", ReduceAttrs)            \
  X(kReduceMin, "reduce_min", ReduceAttrs)            \
  X(kReduceProd, "reduce_prod", ReduceAttrs)          \
  X(kMatMul, "matmul", NoAttrs)                        \
  X(kTranspose, "transpose", TransposeAttrs)           \
  X(kNarrow, "narrow", NarrowAttrs)                    \
  X(kConcatConstant, "concat_constant", ConcatConstantAttrs) \
  X(kTanh, "tanh", NoAttrs)                            \
  X(kSqrt, "sqrt", NoAttrs)                            \
  X(kUnary, "unary", UnaryAttrs)                       \
  X(kLrn, "lrn", LrnAttrs)                              \
  X(kConvTranspose2d, "conv_transpose2d", ConvTranspose2dAttrs) \
  X(kWhere, "where", WhereAttrs)                        \
  X(kGridSample, "grid_sample", GridSampleAttrs)

/// Kind of an operator.
enum class OpKind : uint8_t {
#define STAGECRAFT_X(value, name, attrs) value,
  STAGECRAFT_OP_KINDS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

/// matmul: the product of two activations (attention's Q·Kᵀ and P·V), ONNX MatMul semantics on
/// row-major tensors of equal rank >= 3: [..., M, K] x [..., K, N] -> [..., M, N], the leading
/// dimensions broadcast (each pair equal or one of them 1).

/// Typed attributes of any kind (the alternative must match the op's kind).
using OpAttrs = std::variant<NoAttrs, Conv2dAttrs, BatchNormAttrs, MaxPoolAttrs, AvgPoolAttrs,
                             AddAttrs, SplitAttrs, SliceAttrs, PadAttrs, LinearAttrs, ScaleAttrs,
                             HardSigmoidAttrs, BinaryAttrs, ReshapeAttrs, ChannelShuffleAttrs,
                             LeakyReluAttrs, ResizeAttrs, LayerNormAttrs, SpaceToDepthAttrs,
                             ReduceAttrs, SoftmaxAttrs, TransposeAttrs, NarrowAttrs,
                             ConcatConstantAttrs, ClipAttrs, UnaryAttrs, LrnAttrs,
                             ConvTranspose2dAttrs, WhereAttrs, GridSampleAttrs>;

/// Name used in files ("conv2d").
std::string_view to_string(OpKind kind);
/// Parses a name; nullopt when unknown.
std::optional<OpKind> parse_op_kind(std::string_view name);
/// Every op kind name, in list order.
std::vector<std::string> op_kind_names();
/// Every op kind, in list order.
std::vector<OpKind> all_op_kinds();
/// Default-constructed attributes of the type `kind` takes.
OpAttrs default_attrs(OpKind kind);
/// Whether `attrs` holds the type `kind` takes.
bool attrs_match(OpKind kind, const OpAttrs& attrs);
/// The activation an element-wise op computes (kNone for other kinds; a hard_sigmoid op only
/// with PyTorch's slope and offset, which is what the fused activation means).
Activation activation_of_kind(OpKind kind, const OpAttrs& attrs = NoAttrs{});
/// Whether `kind` is an element-wise activation op: relu, relu6, sigmoid, hard_sigmoid,
/// hard_swish, silu, gelu, gelu_tanh, tanh, sqrt, leaky_relu or clip (one input, one output of its
/// shape).
bool is_activation_kind(OpKind kind);
/// The activation fused into a conv, linear, add or binary op (kNone for other kinds).
Activation fused_activation(OpKind kind, const OpAttrs& attrs);
/// The fused activation of an op, writable (nullptr for kinds without one).
Activation* fused_activation_field(OpAttrs& attrs);
/// act(x) on the host (reference semantics shared by tests, the analytic model and exporters).
float apply_activation(Activation act, float x);

/// An operator: a kind, its attributes, the values it reads and the values it produces.
struct Op {
  OpId id = kNoOp;               ///< index in the graph
  std::string name;              ///< unique name
  OpKind kind = OpKind::kIdentity;  ///< kind
  OpAttrs attrs;                 ///< attributes of the type `kind` takes
  std::vector<ValueId> inputs;   ///< values read, in input-slot order
  std::vector<ValueId> outputs;  ///< values produced

  /// The attributes as type `A`; asserts that `A` matches the kind.
  template <class A>
  const A& attrs_as() const {
    return std::get<A>(attrs);
  }
};

/// A tensor value: a graph input or an output of an op.
struct Value {
  ValueId id = -1;          ///< index in the graph
  std::string name;         ///< unique name ("op" for a single output, "op:1" otherwise)
  TensorDesc desc;          ///< shape, type and layout
  OpId producer = kNoOp;    ///< producing op, kNoOp for a graph input
  int output_index = 0;     ///< which output of the producer
};

/// Canonical text of an op's attributes ("in_channels=3 out_channels=32 kernel=3x3 ..."), every
/// field included, for signatures and labels.
std::string attrs_signature(const OpAttrs& attrs);

/// Multiply-accumulate count of one op with these input and output descriptors (convolutions and
/// linear layers; 0 for other kinds).
int64_t op_macs(const Op& op, const std::vector<TensorDesc>& inputs,
                const std::vector<TensorDesc>& outputs);

/// Number of learned parameters of an op (weights, biases, batch-norm scale and shift).
int64_t op_params(const Op& op, const std::vector<TensorDesc>& inputs);

}  // namespace stagecraft::graph
