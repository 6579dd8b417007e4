// What the CUDA builders pass to the own kernels (op_params.h). CUDA-free.
#include "executor/cuda/op_params.h"

#include "executor/kernel_math.h"

namespace stagecraft::executor::cuda {

using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::TensorDesc;

// The own kernels' codes follow the graph's order, so that a fused activation converts by value.
#define STAGECRAFT_SAME_ACT(value, name) \
  static_assert(static_cast<int>(Act::value) == static_cast<int>(graph::Activation::value), name);
STAGECRAFT_ACTIVATIONS(STAGECRAFT_SAME_ACT)
#undef STAGECRAFT_SAME_ACT
#define STAGECRAFT_SAME_BINOP(value, name) \
  static_assert(static_cast<int>(BinOp::value) == static_cast<int>(graph::BinaryOp::value), name);
STAGECRAFT_BINARY_OPS(STAGECRAFT_SAME_BINOP)
#undef STAGECRAFT_SAME_BINOP

Elem elem_of(DataType t) {
  switch (t) {
    case DataType::kF16:
      return Elem::kF16;
    case DataType::kU8:
      return Elem::kU8;
    case DataType::kI8:
      return Elem::kI8;
    default:
      return Elem::kF32;
  }
}

Dims4 dims_of(const TensorDesc& d) {
  Dims4 r;
  const graph::Shape& s = d.shape;
  if (s.rank() == 4) {
    r.n = s[0];
    r.c = s[1];
    r.h = s[2];
    r.w = s[3];
  } else if (s.rank() == 2) {
    r.n = s[0];
    r.c = s[1];
  }
  r.nhwc = d.layout == Layout::kNHWC;
  return r;
}

Act act_of(graph::Activation a) { return static_cast<Act>(static_cast<int>(a)); }

BinOp binop_of(graph::BinaryOp op) { return static_cast<BinOp>(static_cast<int>(op)); }

ActParams act_params(const KernelSpec& spec) {
  ActParams a;
  a.relu6_max = relu6_bound(spec.dsts[0]);
  switch (spec.kind) {
    case OpKind::kLeakyRelu:
      a.act = Act::kLeakyRelu;
      a.alpha = static_cast<float>(std::get<graph::LeakyReluAttrs>(spec.attrs).alpha);
      return a;
    case OpKind::kHardSigmoid: {
      const auto& h = std::get<graph::HardSigmoidAttrs>(spec.attrs);
      a.act = Act::kHardSigmoid;
      a.alpha = static_cast<float>(h.alpha);
      a.beta = static_cast<float>(h.beta);
      return a;
    }
    default:
      a.act = act_of(graph::activation_of_kind(spec.kind));
      return a;
  }
}

BinaryOperands binary_operands(const KernelSpec& spec) {
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  const TensorDesc& dst = spec.dsts[0];
  BinaryOperands r;
  r.params.op = binop_of(a.op);
  r.params.act = act_of(a.activation);
  r.params.relu6_max = relu6_bound(dst);
  r.xd = dims_of(spec.srcs[0]);
  if (!a.constant.empty()) {
    const std::vector<int64_t> s = graph::constant_shape(a, dst.shape.rank());
    r.o_src = -1;
    r.od = Dims4{};
    r.od.n = s[0];
    r.od.c = s[1];
    if (s.size() == 4) {
      r.od.h = s[2];
      r.od.w = s[3];
    }
    r.params.swap = a.constant_first;
    return r;
  }
  const bool swap = spec.srcs[0].shape != dst.shape && spec.srcs[1].shape == dst.shape;
  r.x_src = swap ? 1 : 0;
  r.o_src = swap ? 0 : 1;
  r.xd = dims_of(spec.srcs[static_cast<size_t>(r.x_src)]);
  r.od = dims_of(spec.srcs[static_cast<size_t>(r.o_src)]);
  r.params.swap = swap;
  return r;
}

}  // namespace stagecraft::executor::cuda
