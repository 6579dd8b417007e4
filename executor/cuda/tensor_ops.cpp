// Ops on row-major tensors of any rank (a transformer's tokens, heads and attention scores):
// matmul of two activations on cuBLAS (cublasGemmStridedBatchedEx: row-major operands as the
// column-major Cᵀ = Bᵀ · Aᵀ; batch dimensions broadcast by a stride of 0 over whole trailing
// runs, one call per broadcast group otherwise: op_params.h, matmul_gemms; f32 with FMA or TF32
// as the backend's setting says, f16 with f32 accumulation), transpose and narrow (one
// destination element per thread reading the source through permuted or offset strides), and
// concat_constant (the constant block uploaded once, in f32, read for every sample). f32 and f16;
// the int8 contract (executor/op_rules.h) gives these ops no 8-bit tensors.
#include "common/strings.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/ops.h"

namespace stagecraft::executor::cuda {

namespace {

using graph::OpKind;
using graph::TensorDesc;
using Refs = FnKernel::Refs;

constexpr int64_t kMaxInt = 2147483647;  // cuBLAS's sizes, leading dimensions and batch counts are int

Support check(const KernelSpec& spec) {
  const std::string kind(graph::to_string(spec.kind));
  for (const auto* list : {&spec.srcs, &spec.dsts}) {
    for (const TensorDesc& d : *list) {
      if (d.dtype != graph::DataType::kF32 && d.dtype != graph::DataType::kF16) {
        return Support::unsupported(SupportReason::kDataType, cat(kind, " runs in f32 or f16 on CUDA"));
      }
      if (d.dtype != spec.dsts[0].dtype) {
        return Support::unsupported(SupportReason::kDataType, cat(kind, " keeps the element type"));
      }
      if (d.layout == graph::Layout::kNHWC) {
        return Support::unsupported(SupportReason::kLayout, cat(kind, " reads and writes row-major tensors, not nhwc"));
      }
      if (d.shape.rank() > static_cast<size_t>(kMaxRank)) {
        return Support::unsupported(SupportReason::kAttributes,
                                    cat(kind, " on CUDA indexes at most ", kMaxRank, " dimensions (got ",
                                        d.shape.to_string(), ")"));
      }
    }
  }
  if (spec.kind == OpKind::kMatMul) {
    for (const GemmCall& c : matmul_gemms(spec.srcs[0].shape, spec.srcs[1].shape)) {
      for (int64_t v : {c.m, c.n, c.k, c.batch}) {
        if (v > kMaxInt) {
          return Support::unsupported(SupportReason::kAttributes,
                                      cat("matmul ", spec.srcs[0].shape.to_string(), " x ", spec.srcs[1].shape.to_string(),
                                          " exceeds cuBLAS's int sizes"));
        }
      }
    }
  }
  if (spec.kind == OpKind::kConcatConstant) {
    const ConcatConstantParams p = concat_constant_params(spec);
    const int64_t want = p.per_sample * p.count * p.inner;
    if (!spec.weights || static_cast<int64_t>(spec.weights->weight.size()) != want) {
      return Support::unsupported(SupportReason::kWeights,
                                  cat("concat_constant needs its constant block of ", want, " values (weight; got ",
                                      spec.weights ? spec.weights->weight.size() : 0, ")"));
    }
  }
  return Support::native();
}

std::unique_ptr<Kernel> matmul(const KernelSpec& spec, BuildContext& ctx) {
  const bool half = spec.dsts[0].dtype == graph::DataType::kF16;
  const std::vector<GemmCall> calls = matmul_gemms(spec.srcs[0].shape, spec.srcs[1].shape);
  const cudaDataType_t t = half ? CUDA_R_16F : CUDA_R_32F;
  const cublasComputeType_t compute =
      half || !ctx.config.tf32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
  const size_t bytes = half ? 2 : 4;
  return std::make_unique<FnKernel>(
      half ? "cublas f16 batched" : (ctx.config.tf32 ? "cublas tf32 batched" : "cublas f32 batched"),
      [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        const float one = 1.0f, zero = 0.0f;
        const auto* a = static_cast<const char*>(srcs[1].data);  // cuBLAS's A: the second input
        const auto* b = static_cast<const char*>(srcs[0].data);
        auto* c = static_cast<char*>(dsts[0].data);
        for (const GemmCall& g : calls) {
          STAGECRAFT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
              s.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(g.m), static_cast<int>(g.n),
              static_cast<int>(g.k), &one, a + g.offset_a * bytes, t, static_cast<int>(g.lda), g.stride_a,
              b + g.offset_b * bytes, t, static_cast<int>(g.ldb), g.stride_b, &zero, c + g.offset_c * bytes, t,
              static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));
        }
      });
}

std::unique_ptr<Kernel> build(const KernelSpec& spec, BuildContext& ctx) {
  const Elem e = elem_of(spec.dsts[0].dtype);
  switch (spec.kind) {
    case OpKind::kMatMul:
      return matmul(spec, ctx);
    case OpKind::kTranspose:
    case OpKind::kNarrow: {
      const StridedView v = gather_view(spec);
      return std::make_unique<FnKernel>(spec.kind == OpKind::kTranspose ? "own transpose" : "own narrow",
                                        [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_gather(e, srcs[0].data, v, dsts[0].data, s.get());
      });
    }
    case OpKind::kConcatConstant: {
      const ConcatConstantParams p = concat_constant_params(spec);
      const DeviceFloats constant(*ctx.device, spec.weights->weight);
      return std::make_unique<FnKernel>("own concat constant", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_concat_constant(e, srcs[0].data, constant.get(), dsts[0].data, p, s.get());
      });
    }
    default:
      throw BackendError(cat("cuda: the tensor family does not build ", graph::to_string(spec.kind)));
  }
}

}  // namespace

const OpFamily kTensorFamily{"tensor",
                             {OpKind::kMatMul, OpKind::kTranspose, OpKind::kNarrow, OpKind::kConcatConstant},
                             check,
                             build};

}  // namespace stagecraft::executor::cuda
