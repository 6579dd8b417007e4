// Linear layers on cuBLAS (cublasGemmEx; f32 with FMA or TF32 when allowed, f16 with f32
// accumulation), bias and activation by an own kernel. A quantised linear layer computes in f32
// (dequantised input, f32 weights) and quantises its output: linear layers are a sliver of a CNN's
// work. Each stream's cuBLAS handle has a fixed workspace (device_context.h), so GEMMs can be
// captured in a CUDA Graph. A row-major input of rank >= 3 is the [rows, in] matrix of its last
// axis (the output [rows, out]).
#include "common/half.h"
#include "common/strings.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/ops.h"
#include "executor/kernel_math.h"

namespace stagecraft::executor::cuda {

namespace {

using graph::DataType;
using graph::TensorDesc;

std::unique_ptr<Kernel> float_linear(const KernelSpec& spec, BuildContext& ctx) {
  const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
  const Elem e = elem_of(spec.srcs[0].dtype);
  const bool half = e == Elem::kF16;
  const std::vector<float>& w = spec.weights->weight;
  std::shared_ptr<CudaBuffer> weights;
  if (half) {
    std::vector<uint16_t> h(w.size());
    for (size_t i = 0; i < w.size(); ++i) h[i] = float_to_half(w[i]);
    weights = upload_bytes(*ctx.device, h.data(), h.size() * sizeof(uint16_t));
  } else {
    weights = upload_bytes(*ctx.device, w.data(), w.size() * sizeof(float));
  }
  const DeviceFloats bias(*ctx.device, a.bias ? spec.weights->bias : std::vector<float>{});
  const int m = static_cast<int>(a.out_features), k = static_cast<int>(a.in_features),
            n = static_cast<int>(spec.srcs[0].shape.numel() / a.in_features);  // rows: [rows, in] view
  const Act act = act_of(a.activation);
  const float relu6_max = relu6_bound(spec.dsts[0]);
  const cudaDataType_t t = half ? CUDA_R_16F : CUDA_R_32F;
  const cublasComputeType_t compute =
      half || !ctx.config.tf32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
  return std::make_unique<FnKernel>(
      half ? "cublas f16" : (ctx.config.tf32 ? "cublas tf32" : "cublas f32"),
      [=](CudaStream& s, FnKernel::Refs srcs, FnKernel::Refs dsts, void*) {
        const float one = 1.0f, zero = 0.0f;
        // Column-major: Y^T (out × N) = W (out × in, stored row-major = (in × out)^T) · X^T.
        STAGECRAFT_CUBLAS_CHECK(cublasGemmEx(s.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one,
                                             weights->data(), t, k, srcs[0].data, t, k, &zero,
                                             dsts[0].data, t, m, compute, CUBLAS_GEMM_DEFAULT));
        if (bias.get() || act != Act::kNone) {
          Dims4 d;
          d.n = n;
          d.c = m;
          launch_bias_act(e, dsts[0].data, bias.get(), d, act, relu6_max, s.get());
        }
      });
}

// Dequantise into the workspace, GEMM in f32, quantise into the output (when it is 8-bit).
std::unique_ptr<Kernel> int8_linear(const KernelSpec& spec, BuildContext& ctx) {
  KernelSpec f32 = spec;
  f32.srcs[0].dtype = DataType::kF32;
  f32.srcs[0].scale = 1.0f;
  f32.dsts[0].dtype = DataType::kF32;
  f32.dsts[0].scale = 1.0f;
  std::shared_ptr<Kernel> gemm = float_linear(f32, ctx);
  const size_t in_bytes = align_bytes(static_cast<size_t>(f32.srcs[0].bytes()));
  const bool quantised_out = graph::is_int8(spec.dsts[0].dtype);
  const size_t out_bytes = quantised_out ? align_bytes(static_cast<size_t>(f32.dsts[0].bytes())) : 0;
  std::shared_ptr<Kernel> deq = make_copy(spec.srcs[0], f32.srcs[0]);
  std::shared_ptr<Kernel> req = make_copy(f32.dsts[0], spec.dsts[0]);
  const TensorDesc x_desc = f32.srcs[0], y_desc = f32.dsts[0];
  return std::make_unique<FnKernel>(
      "dequantise + cublas f32 + quantise",
      [=](CudaStream& s, FnKernel::Refs srcs, FnKernel::Refs dsts, void* ws) {
        char* base = static_cast<char*>(ws);
        const TensorRef x{base, x_desc};
        const TensorRef y{quantised_out ? base + in_bytes : dsts[0].data, y_desc};
        deq->bind({srcs[0]}, {x}, nullptr);
        deq->launch(s);
        gemm->bind({x}, {y}, base + in_bytes + out_bytes);
        gemm->launch(s);
        if (quantised_out) {
          req->bind({y}, {dsts[0]}, nullptr);
          req->launch(s);
        }
      },
      in_bytes + out_bytes + gemm->workspace_bytes());
}

Support check(const KernelSpec&) { return Support::native(); }

std::unique_ptr<Kernel> build(const KernelSpec& spec, BuildContext& ctx) {
  return graph::is_int8(spec.srcs[0].dtype) ? int8_linear(spec, ctx) : float_linear(spec, ctx);
}

}  // namespace

const OpFamily kLinearFamily{"linear", {graph::OpKind::kLinear}, check, build};

}  // namespace stagecraft::executor::cuda
