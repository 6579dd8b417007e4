#pragma once
/// Typed attributes of the graph IR's ops, part 2: the element-wise ops (add, scale, hard sigmoid,
/// clip, leaky ReLU, binary, where and unary ops), with the helpers that read them
/// (`where_operand_shapes`, `apply_unary`, `constant_shape`). Included by op.h; see op_attrs.h.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/op_attrs.h"
#include "graph/op_functions.h"

namespace stagecraft::graph {

/// Element-wise sum of two or more same-shaped inputs, with an optional fused activation.
struct AddAttrs {
  Activation activation = Activation::kNone;  ///< fused activation
  STAGECRAFT_ATTR_FIELDS(AddAttrs, (), (activation))
};

/// Multiplication by a constant: y = factor · x (ONNX Mul by a scalar).
struct ScaleAttrs {
  double factor = 1.0;  ///< the constant
  STAGECRAFT_ATTR_FIELDS(ScaleAttrs, (factor), ())
};

/// PyTorch's HardSigmoid slope (1/6) and offset (1/2).
inline constexpr double kHardSigmoidAlpha = 1.0 / 6.0;
inline constexpr double kHardSigmoidBeta = 0.5;

/// Hard sigmoid: y = clamp(alpha · x + beta, 0, 1) (ONNX HardSigmoid; PyTorch's by default).
struct HardSigmoidAttrs {
  double alpha = kHardSigmoidAlpha;  ///< slope
  double beta = kHardSigmoidBeta;    ///< offset
  STAGECRAFT_ATTR_FIELDS(HardSigmoidAttrs, (), (alpha, beta))
};

/// Clip: y = min(max(x, min), max) (ONNX Clip with other bounds than ReLU's and ReLU6's).
struct ClipAttrs {
  double min = -3.4028234663852886e38;  ///< a missing bound is float's largest value
  double max = 3.4028234663852886e38;
  STAGECRAFT_ATTR_FIELDS(ClipAttrs, (), (min, max))
};

/// Leaky ReLU: y = x for x >= 0, alpha · x otherwise.
struct LeakyReluAttrs {
  double alpha = 0.01;  ///< slope for negative inputs
  STAGECRAFT_ATTR_FIELDS(LeakyReluAttrs, (), (alpha))
};

/// y = act(a OP b) element-wise with NumPy broadcasting (a dimension of b may be 1 where a's is
/// not): per-channel scales, squeeze-and-excitation gates. With `constant` set, b is not an input
/// but a constant tensor of that shape held in the op's weights (weight); `constant_first` puts it
/// first (c - a, c / a).
struct BinaryAttrs {
  BinaryOp op = BinaryOp::kMul;               ///< the operation
  std::vector<int64_t> constant;              ///< shape of a constant operand; empty: two inputs
  bool constant_first = false;                ///< the constant is the first operand
  Activation activation = Activation::kNone;  ///< fused activation
  STAGECRAFT_ATTR_FIELDS(BinaryAttrs, (op), (constant, constant_first, activation))
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
  STAGECRAFT_ATTR_FIELDS(WhereAttrs, (),
                         (condition_constant, x_constant, y_constant, condition_shape, x_shape,
                          y_shape))
};

/// The shapes of a where op's three operands: the inputs' (`inputs`, in order) and the constants'.
std::vector<std::vector<int64_t>> where_operand_shapes(
    const WhereAttrs& a, const std::vector<std::vector<int64_t>>& inputs);

/// y = fn(x) element-wise, any rank and layout (ONNX's math functions: Abs, Exp, Sin, Erf, Elu,
/// ...). `alpha` and `beta` are the function's parameters (see STAGECRAFT_UNARY_FNS; unused by the
/// others, and then 0).
struct UnaryAttrs {
  UnaryFn fn = UnaryFn::kAbs;  ///< the function
  double alpha = 0;            ///< first parameter (elu's alpha, shrink's lambd)
  double beta = 0;             ///< second parameter (selu's gamma, shrink's bias)
  STAGECRAFT_ATTR_FIELDS(UnaryAttrs, (fn), (alpha, beta))
};

/// fn(x) as a unary op with `attrs` computes it (in double, rounded to float): the one definition
/// every backend's kernel and the reference agree with.
float apply_unary(const UnaryAttrs& attrs, float x);

/// The shape of a binary op's constant at `rank` (leading 1s added, as NumPy aligns trailing
/// dimensions).
std::vector<int64_t> constant_shape(const BinaryAttrs& attrs, size_t rank);

}  // namespace stagecraft::graph
