#pragma once
/// Operators of the graph IR: the one list of op kinds (which generates the enum, the names used
/// in files and the attribute type of each kind), `OpAttrs`, `Op` and `Value`. The typed
/// attributes are in op_attrs.h (the convolutions' ops), op_attrs_elementwise.h and
/// op_attrs_tensors.h, the element-wise functions (Activation, BinaryOp, UnaryFn) in
/// op_functions.h; this header includes them all.
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

#include "graph/op_attrs.h"
#include "graph/op_attrs_elementwise.h"
#include "graph/op_attrs_tensors.h"
#include "graph/op_functions.h"
#include "graph/types.h"

namespace stagecraft::graph {

/// Dense index of an op in its graph (also its insertion order, which is topological).
using OpId = int32_t;
/// Dense index of a value (tensor) in its graph.
using ValueId = int32_t;
/// "No op": the producer of a graph input.
inline constexpr OpId kNoOp = -1;

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
  X(kConcat, "concat", ConcatAttrs)                    \
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
  X(kGridSample, "grid_sample", GridSampleAttrs)      \
  X(kPoolNd, "pool_nd", PoolNdAttrs)                  \
  X(kResizeNd, "resize_nd", ResizeNdAttrs)          \
  X(kTopK, "top_k", TopKAttrs)                        \
  X(kGatherElements, "gather_elements", GatherElementsAttrs)

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
                             ConcatConstantAttrs, ConcatAttrs, ClipAttrs, UnaryAttrs, LrnAttrs,
                             ConvTranspose2dAttrs, WhereAttrs, GridSampleAttrs, PoolNdAttrs, ResizeNdAttrs,
                             TopKAttrs, GatherElementsAttrs>;

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
