// Shape inference: the checks of an op's attributes against its inputs and its output
// descriptors, dispatched to the rules of each family of ops (shape_rules.h lists the files).
#include "graph/shape_inference.h"

#include <algorithm>

#include "graph/activation_kinds.h"
#include "graph/shape_rules.h"

namespace stagecraft::graph {

namespace shape_rules {

TensorDesc row_major_like(const TensorDesc& like, Shape shape) {
  TensorDesc desc = like;
  desc.layout = row_major_layout(shape.rank());
  desc.shape = std::move(shape);
  return desc;
}

TensorDesc with_shape(const TensorDesc& like, Shape shape) {
  TensorDesc desc = like;
  if (shape.rank() != like.shape.rank()) {
    desc.layout = default_layout(shape.rank()).value_or(like.layout);
  }
  desc.shape = std::move(shape);
  return desc;
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

}  // namespace shape_rules

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
  const shape_rules::Checker check(op);
  if (!attrs_match(op.kind, op.attrs)) {
    throw GraphError(cat("op '", op.name, "' (", to_string(op.kind),
                         "): attributes of another op kind were given"));
  }
  switch (op.kind) {
    case OpKind::kConv2d:
    case OpKind::kConvTranspose2d:
    case OpKind::kBatchNorm:
    case OpKind::kLrn:
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool:
    case OpKind::kGlobalMaxPool:
    case OpKind::kResize:
    case OpKind::kPad:
    case OpKind::kSpaceToDepth:
    case OpKind::kConcat:
    case OpKind::kChannelShuffle:
    case OpKind::kSplit:
    case OpKind::kSlice:
    case OpKind::kFlatten:
    case OpKind::kReshape:
      return shape_rules::infer_convolutions_op(check, op, inputs);
    STAGECRAFT_PLAIN_ACTIVATION_KINDS:
    case OpKind::kIdentity:
    case OpKind::kScale:
    case OpKind::kLeakyRelu:
    case OpKind::kUnary:
    case OpKind::kClip:
    case OpKind::kHardSigmoid:
    case OpKind::kBinary:
    case OpKind::kWhere:
    case OpKind::kAdd:
      return shape_rules::infer_elementwise_op(check, op, inputs);
    case OpKind::kLinear:
    case OpKind::kSoftmax:
    case OpKind::kLayerNorm:
    case OpKind::kMatMul:
    case OpKind::kTranspose:
    case OpKind::kNarrow:
    case OpKind::kConcatConstant:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceSum:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd:
    case OpKind::kGridSample:
    case OpKind::kPoolNd:
    case OpKind::kTopK:
    case OpKind::kGatherElements:
    case OpKind::kResizeNd:
      return shape_rules::infer_tensor_op(check, op, inputs);
  }
  check.fail("unhandled op kind");
}

}  // namespace stagecraft::graph
