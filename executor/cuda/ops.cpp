// Shared pieces of the CUDA op families: descriptor conversions, the function kernel, the family
// table.
#include "common/strings.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/ops.h"

namespace stagecraft::executor::cuda {

using graph::DataType;
using graph::Layout;
using graph::TensorDesc;

float real_scale(const TensorDesc& d) { return graph::is_int8(d.dtype) ? d.scale : 1.0f; }

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

size_t align_bytes(size_t x) {
  constexpr size_t kAlign = 256;
  return (x + kAlign - 1) / kAlign * kAlign;
}

Support one_layout(const KernelSpec& spec) {
  if (spec.dsts.empty()) return Support::native();
  for (const TensorDesc& src : spec.srcs) {
    if (src.shape.rank() == 4 && src.layout != spec.dsts[0].layout) {
      return Support::unsupported(SupportReason::kLayout,
                                  "sources and destination must have the same layout");
    }
  }
  return Support::native();
}

void set_tensor_4d(const TensorDescriptor& desc, cudnnTensorFormat_t format, cudnnDataType_t type,
                   const Dims4& g) {
  STAGECRAFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc.get(), format, type, static_cast<int>(g.n),
                                                    static_cast<int>(g.c), static_cast<int>(g.h),
                                                    static_cast<int>(g.w)));
}

void set_filter(const FilterDescriptor& desc, cudnnDataType_t type, cudnnTensorFormat_t format,
                int64_t k, int64_t c, const graph::Conv2dAttrs& a) {
  STAGECRAFT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(desc.get(), type, format, static_cast<int>(k),
                                                    static_cast<int>(c), static_cast<int>(a.kernel.h),
                                                    static_cast<int>(a.kernel.w)));
}

void set_convolution(const ConvolutionDescriptor& desc, const graph::Conv2dAttrs& a,
                     cudnnDataType_t compute) {
  STAGECRAFT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      desc.get(), static_cast<int>(a.padding.top), static_cast<int>(a.padding.left),
      static_cast<int>(a.stride.h), static_cast<int>(a.stride.w), static_cast<int>(a.dilation.h),
      static_cast<int>(a.dilation.w), CUDNN_CROSS_CORRELATION, compute));
}

FnKernel::FnKernel(std::string impl, Fn fn, size_t workspace)
    : CudaKernel(std::move(impl)), fn_(std::move(fn)) {
  workspace_ = workspace;
}

void FnKernel::run(CudaStream& s) {
  fn_(s, srcs_, dsts_, workspace_ptr_);
  STAGECRAFT_CUDA_LAUNCHED();
}

const OpFamily* find_family(graph::OpKind kind) {
  static const OpFamily* const kFamilies[] = {&kConvolutionFamily, &kLinearFamily, &kPoolingFamily,
                                              &kElementwiseFamily, &kBinaryFamily, &kDataMovementFamily,
                                              &kTensorFamily};
  for (const OpFamily* f : kFamilies) {
    for (graph::OpKind k : f->kinds)
      if (k == kind) return f;
  }
  return nullptr;
}

const OpFamily& family_of(graph::OpKind kind) {
  if (const OpFamily* f = find_family(kind)) return *f;
  throw BackendError(cat("cuda: no kernel family builds op kind ", graph::to_string(kind)));
}

}  // namespace stagecraft::executor::cuda
