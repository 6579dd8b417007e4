// Pooling by own kernels (element_ops.h: pool_at, global_avg_at, global_max_at): max, average
// with or without the padding counted (PyTorch's semantics, ceil mode included), global average and
// global max; one thread per output element in the tensor's memory order (channel-innermost in
// NHWC), one warp per plane for global pooling of NCHW tensors.
#include "executor/cuda/ops.h"

namespace stagecraft::executor::cuda {

namespace {

using graph::OpKind;

PoolParams params_of(const KernelSpec& spec) {
  PoolParams p;
  graph::Hw k, st;
  graph::Pads pads;
  if (spec.kind == OpKind::kMaxPool) {
    const auto& a = std::get<graph::MaxPoolAttrs>(spec.attrs);
    k = a.kernel, st = a.stride, pads = a.padding;
  } else {
    const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
    k = a.kernel, st = a.stride, pads = a.padding;
    p.mode = a.count_include_pad ? PoolMode::kAvgIncludePad : PoolMode::kAvgExcludePad;
  }
  p.kh = static_cast<int>(k.h);
  p.kw = static_cast<int>(k.w);
  p.sh = static_cast<int>(st.h);
  p.sw = static_cast<int>(st.w);
  p.pad_top = static_cast<int>(pads.top);
  p.pad_left = static_cast<int>(pads.left);
  p.pad_bottom = static_cast<int>(pads.bottom);
  p.pad_right = static_cast<int>(pads.right);
  return p;
}

Support check(const KernelSpec& spec) { return one_layout(spec); }

std::unique_ptr<Kernel> build(const KernelSpec& spec, BuildContext&) {
  const Elem e = elem_of(spec.srcs[0].dtype);
  const Dims4 in = dims_of(spec.srcs[0]), out = dims_of(spec.dsts[0]);
  if (spec.kind == OpKind::kGlobalMaxPool) {
    return std::make_unique<FnKernel>("own global max pool",
                                      [=](CudaStream& s, FnKernel::Refs srcs, FnKernel::Refs dsts, void*) {
                                        launch_global_max(e, srcs[0].data, dsts[0].data, in, s.get());
                                      });
  }
  if (spec.kind == OpKind::kGlobalAvgPool) {
    return std::make_unique<FnKernel>("own global pool",
                                      [=](CudaStream& s, FnKernel::Refs srcs, FnKernel::Refs dsts, void*) {
                                        launch_global_avg(e, srcs[0].data, dsts[0].data, in, s.get());
                                      });
  }
  const PoolParams p = params_of(spec);
  return std::make_unique<FnKernel>("own pool", [=](CudaStream& s, FnKernel::Refs srcs, FnKernel::Refs dsts,
                                                    void*) {
    launch_pool(e, srcs[0].data, in, dsts[0].data, out, p, s.get());
  });
}

}  // namespace

const OpFamily kPoolingFamily{"pooling",
                              {OpKind::kMaxPool, OpKind::kAvgPool, OpKind::kGlobalAvgPool, OpKind::kGlobalMaxPool},
                              check, build};

}  // namespace stagecraft::executor::cuda
