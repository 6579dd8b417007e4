// Binary element-wise ops by own kernels (element_ops.h: binary_at): add, sub, mul and div of two
// tensors with NumPy broadcasting either way (each dimension equal to the destination's or 1, each
// operand read in its own layout), or of a tensor and a constant held in the op's weights (f32 in
// plain NCHW order, uploaded once; `constant_first` puts it first), with a fused activation. The
// kernel reads the operand that has the destination's geometry in packs of 4 elements when it can
// (a broadcast first input is read as the second with the operation swapped). f32 and f16; the int8
// contract (executor/op_rules.h) gives binary ops no 8-bit tensors. Row-major tensors of any rank
// are folded into rank-4 geometries (op_params.h: fold_broadcast: broadcast dimensions merged), so
// the same kernel runs NumPy broadcasting of any rank.
#include <cassert>

#include "common/strings.h"
#include "executor/cuda/ops.h"

namespace stagecraft::executor::cuda {

namespace {

using graph::OpKind;
using graph::TensorDesc;
using Refs = FnKernel::Refs;

Support check(const KernelSpec& spec) {
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  if (!graph::is_arithmetic(a.op)) {
    return Support::unsupported(SupportReason::kAttributes,
                                cat("the CUDA binary kernel computes add, sub, mul and div, not ", graph::to_string(a.op)));
  }
  const TensorDesc& dst = spec.dsts[0];
  const size_t rank = dst.shape.rank();
  if (rank != 2 && rank != 4 && !row_major(dst)) {
    return Support::unsupported(SupportReason::kAttributes,
                                cat("a binary op reads and writes rank 2 or 4, or row-major tensors (got ",
                                    dst.shape.to_string(), ")"));
  }
  for (const TensorDesc& src : spec.srcs) {
    if (src.shape.rank() != rank) {
      return Support::unsupported(SupportReason::kAttributes,
                                  cat("binary operands must have the destination's rank (", src.shape.to_string(),
                                      " vs ", dst.shape.to_string(), ")"));
    }
    if (src.dtype != dst.dtype) {
      return Support::unsupported(SupportReason::kDataType,
                                  cat("binary operands and result must have one element type (",
                                      graph::to_string(src.dtype), " vs ", graph::to_string(dst.dtype), ")"));
    }
    for (size_t d = 0; d < rank; ++d) {
      if (src.shape[d] != dst.shape[d] && src.shape[d] != 1) {
        return Support::unsupported(SupportReason::kAttributes,
                                    cat("operand ", src.shape.to_string(), " does not broadcast to ",
                                        dst.shape.to_string()));
      }
    }
  }
  if (!a.constant.empty()) {
    const std::vector<int64_t> shape = graph::constant_shape(a, rank);
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (shape.size() != rank) {
      return Support::unsupported(SupportReason::kAttributes,
                                  cat("the constant has a higher rank than the input ", dst.shape.to_string()));
    }
    if (!spec.weights || static_cast<int64_t>(spec.weights->weight.size()) != numel) {
      return Support::unsupported(
          SupportReason::kWeights,
          cat("the constant ", graph::Shape(shape).to_string(), " needs ", numel, " values in the op's weights (got ",
              spec.weights ? spec.weights->weight.size() : 0, ")"));
    }
    for (size_t d = 0; d < rank; ++d) {
      if (shape[d] != dst.shape[d] && shape[d] != 1) {
        return Support::unsupported(SupportReason::kAttributes,
                                    cat("the constant ", graph::Shape(shape).to_string(), " does not broadcast to ",
                                        dst.shape.to_string()));
      }
    }
  } else if (spec.srcs.size() != 2) {
    return Support::unsupported(SupportReason::kAttributes,
                                cat("a binary op without a constant takes 2 inputs (got ", spec.srcs.size(), ")"));
  }
  if (row_major(dst)) {
    for (const TensorDesc& src : spec.srcs) {
      if (!row_major(src)) {
        return Support::unsupported(SupportReason::kLayout,
                                    cat("a binary op on row-major tensors reads row-major operands (got ",
                                        graph::to_string(src.layout), ")"));
      }
    }
    if (!binary_operands(spec).folded) {
      return Support::unsupported(SupportReason::kAttributes,
                                  cat("the broadcast of ", dst.shape.to_string(),
                                      " needs more than 4 merged dimensions (the own kernel indexes 4)"));
    }
  }
  return Support::native();
}

std::unique_ptr<Kernel> build(const KernelSpec& spec, BuildContext& ctx) {
  const TensorDesc& dst = spec.dsts[0];
  assert(!graph::is_int8(dst.dtype));  // the int8 contract refuses binary ops first
  const Elem e = elem_of(dst.dtype);
  const BinaryOperands ops = binary_operands(spec);
  const Dims4 yd = ops.yd;
  if (ops.o_src < 0) {
    const DeviceFloats constant(*ctx.device, spec.weights->weight);
    return std::make_unique<FnKernel>("own binary (constant)", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
      launch_binary(e, srcs[0].data, ops.xd, constant.get(), Elem::kF32, ops.od, dsts[0].data, yd, ops.params,
                    s.get());
    });
  }
  return std::make_unique<FnKernel>("own binary", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
    launch_binary(e, srcs[static_cast<size_t>(ops.x_src)].data, ops.xd, srcs[static_cast<size_t>(ops.o_src)].data,
                  e, ops.od, dsts[0].data, yd, ops.params, s.get());
  });
}

}  // namespace

const OpFamily kBinaryFamily{"binary", {OpKind::kBinary}, check, build};

}  // namespace stagecraft::executor::cuda
