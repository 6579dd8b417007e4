// Reductions over any axes of a tensor of any rank (mean, max, sum, min, product; the reduced
// dimensions kept as 1)
// on oneDNN's reduction primitive, in every layout it has an optimised kernel for (the check
// reports a reference-only one as such, and the plan then runs the op in another layout).
#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

using graph::OpKind;

dnnl::algorithm algorithm_of(OpKind kind) {
  switch (kind) {
    case OpKind::kReduceMax: return dnnl::algorithm::reduction_max;
    case OpKind::kReduceSum: return dnnl::algorithm::reduction_sum;
    case OpKind::kReduceMin: return dnnl::algorithm::reduction_min;
    case OpKind::kReduceProd: return dnnl::algorithm::reduction_mul;
    default: return dnnl::algorithm::reduction_mean;
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (spec.srcs[0].dtype != graph::DataType::kF32 || spec.dsts[0].dtype != graph::DataType::kF32) {
    return Support::unsupported(SupportReason::kDataType, cat(graph::to_string(spec.kind), " runs in f32 only"));
  }
  dnnl::reduction::desc d(algorithm_of(spec.kind), md(spec.srcs[0]), md(spec.dsts[0]), 0.0f, 0.0f);
  dnnl::reduction::primitive_desc pd(d, make_attr(), ctx.engine, /*allow_empty=*/true);
  if (!pd) {
    return Support::unsupported(SupportReason::kLibrary,
                                cat("oneDNN has no ", graph::to_string(spec.kind), " for these descriptors"));
  }
  return described(pd.impl_info_str(), cat(graph::to_string(spec.kind), " in ", graph::to_string(spec.dsts[0].layout)),
                   workspace_of(pd), std::make_shared<PdState<dnnl::reduction::primitive_desc>>(pd));
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext&) {
  const auto& pd = state_of<PdState<dnnl::reduction::primitive_desc>>(desc, spec).pd;
  k.add({dnnl::reduction(pd), {{DNNL_ARG_SRC, 0, md(spec.srcs[0])}, {DNNL_ARG_DST, dst_slot(0), md(spec.dsts[0])}}},
        scratch(pd));
  return pd.impl_info_str();
}

}  // namespace

const OpFamily kReductionFamily{"reduction", {OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceSum,
                                               OpKind::kReduceMin, OpKind::kReduceProd},
                                check, build};

}  // namespace stagecraft::executor::cpu
