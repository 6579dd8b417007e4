#pragma once
/// The element-wise functions of the graph IR's ops, each one X-macro list (which generates the
/// enum and the names used in files): the activations fused into an op's epilogue (`Activation`),
/// the operations of a binary op (`BinaryOp`) and the functions of a unary op (`UnaryFn`), with
/// their names and `apply_binary` (`apply_unary` is beside UnaryAttrs in op_attrs_elementwise.h,
/// `apply_activation` in op.h). Included by op.h.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft::graph {

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

/// The ONNX op type that computes `fn` ("Abs").
std::string_view onnx_op_type(UnaryFn fn);
/// The function ONNX op type `type` computes; nullopt when it is not one of the list.
std::optional<UnaryFn> unary_fn_of_onnx(std::string_view type);

// The names of the three lists' values, as graph files write them ("relu", "mul", "abs"):
// a value's name, the value of a name (nullopt when unknown), and every name (for messages).
std::string_view to_string(Activation activation);
std::string_view to_string(BinaryOp op);
std::string_view to_string(UnaryFn fn);
std::optional<Activation> parse_activation(std::string_view name);
std::optional<BinaryOp> parse_binary_op(std::string_view name);
std::optional<UnaryFn> parse_unary_fn(std::string_view name);
std::vector<std::string> activation_names();
std::vector<std::string> binary_op_names();
std::vector<std::string> unary_fn_names();

}  // namespace stagecraft::graph
