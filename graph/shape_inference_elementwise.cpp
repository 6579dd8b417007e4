// Shape inference of the element-wise ops: the activations and other ops of one input that keep
// its descriptor, unary functions, the binary ops (NumPy broadcasting, or a constant operand),
// where (the three operands broadcast) and add.
#include <algorithm>

#include "graph/activation_kinds.h"
#include "graph/shape_rules.h"

namespace stagecraft::graph::shape_rules {

namespace {

// An op of one input whose output is its input's descriptor.
std::vector<TensorDesc> infer_same(const Checker& check, const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  return {inputs[0]};
}

std::vector<TensorDesc> infer_unary(const Checker& check, const UnaryAttrs& a,
                                    const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.require(!is_int8(inputs[0].dtype), "unary runs on floating-point tensors (dequantise first)");
  check.require(a.fn != UnaryFn::kCelu || a.alpha != 0, "celu's alpha must not be 0");
  return {inputs[0]};
}

std::vector<TensorDesc> infer_clip(const Checker& check, const ClipAttrs& a,
                                   const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.require(a.min <= a.max, "min must not be above max");
  return {inputs[0]};
}

std::vector<TensorDesc> infer_hard_sigmoid(const Checker& check, const HardSigmoidAttrs& a,
                                           const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 1, 1);
  check.require(a.alpha != 0, "alpha must not be 0");
  return {inputs[0]};
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

std::vector<TensorDesc> infer_where(const Checker& check, const WhereAttrs& a,
                                    const std::vector<TensorDesc>& inputs) {
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

std::vector<TensorDesc> infer_add(const Checker& check, const std::vector<TensorDesc>& inputs) {
  check.arity(inputs, 2, SIZE_MAX);
  for (size_t i = 1; i < inputs.size(); ++i) {
    check.require(inputs[i].shape == inputs[0].shape,
                  cat("input ", i, " is ", inputs[i].shape.to_string(), " but input 0 is ",
                      inputs[0].shape.to_string(), ": added inputs must have the same shape"));
  }
  check_same_dtype(check, inputs);
  return {inputs[0]};
}

}  // namespace

std::vector<TensorDesc> infer_elementwise_op(const Checker& check, const Op& op,
                                             const std::vector<TensorDesc>& inputs) {
  switch (op.kind) {
    STAGECRAFT_PLAIN_ACTIVATION_KINDS:
    case OpKind::kIdentity:
    case OpKind::kScale:
    case OpKind::kLeakyRelu:
      return infer_same(check, inputs);
    case OpKind::kUnary:
      return infer_unary(check, op.attrs_as<UnaryAttrs>(), inputs);
    case OpKind::kClip:
      return infer_clip(check, op.attrs_as<ClipAttrs>(), inputs);
    case OpKind::kHardSigmoid:
      return infer_hard_sigmoid(check, op.attrs_as<HardSigmoidAttrs>(), inputs);
    case OpKind::kBinary:
      return infer_binary(check, op.attrs_as<BinaryAttrs>(), inputs);
    case OpKind::kWhere:
      return infer_where(check, op.attrs_as<WhereAttrs>(), inputs);
    case OpKind::kAdd:
      return infer_add(check, inputs);
    default:
      check.fail("not an element-wise op");
  }
}

}  // namespace stagecraft::graph::shape_rules
