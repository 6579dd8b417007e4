// Element-wise ops on oneDNN: activations (ReLU, leaky ReLU, ReLU6, sigmoid, hard sigmoid, hard
// swish, SiLU, GELU in its erf and tanh forms), scaling, batch normalisation (a fused ReLU by the primitive's fuse_norm_relu,
// other fused activations as in-place eltwise steps after it) and softmax.
#include "common/strings.h"
#include "executor/cpu/ops.h"
#include "executor/op_rules.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;
using graph::Activation;
using graph::OpKind;

std::string in_layout(const KernelSpec& spec) {
  return cat(graph::to_string(spec.kind), " in ", graph::to_string(spec.dsts[0].layout));
}

// The eltwise operations of an activation or scale op.
std::vector<EltwiseStep> steps_of(const KernelSpec& spec) {
  switch (spec.kind) {
    case OpKind::kScale:
      return {{dnnl::algorithm::eltwise_linear,
               static_cast<float>(std::get<graph::ScaleAttrs>(spec.attrs).factor), 0.0f}};
    case OpKind::kLeakyRelu:
      return {{dnnl::algorithm::eltwise_relu,
               static_cast<float>(std::get<graph::LeakyReluAttrs>(spec.attrs).alpha), 0.0f}};
    case OpKind::kHardSigmoid: {
      const auto& a = std::get<graph::HardSigmoidAttrs>(spec.attrs);
      return {{dnnl::algorithm::eltwise_linear, static_cast<float>(a.alpha), static_cast<float>(a.beta)},
              {dnnl::algorithm::eltwise_clip, 0.0f, 1.0f}};
    }
    default:
      return eltwise_steps(graph::activation_of_kind(spec.kind, spec.attrs), relu6_bound(spec.dsts[0]));
  }
}

dnnl::batch_normalization_forward::primitive_desc bn_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const auto& a = std::get<graph::BatchNormAttrs>(spec.attrs);
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  if (a.activation == Activation::kRelu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md(spec.srcs[0]),
                                            static_cast<float>(a.eps), flags);
  return {d, make_attr(), ctx.engine};
}

// A batch norm's fused activation other than ReLU (which the primitive applies itself): eltwise
// steps run in place on its output.
std::vector<EltwiseStep> bn_activation_steps(const KernelSpec& spec) {
  const Activation act = std::get<graph::BatchNormAttrs>(spec.attrs).activation;
  if (act == Activation::kRelu) return {};
  return eltwise_steps(act, relu6_bound(spec.dsts[0]));
}

dnnl::softmax_forward::primitive_desc softmax_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md(spec.srcs[0]), 1);
  return {d, make_attr(), ctx.engine};
}

Support check(const KernelSpec& spec, DnnlContext& ctx) {
  if (Support s = same_layout_support(spec); !s.runnable()) return s;
  std::string impl;
  switch (spec.kind) {
    case OpKind::kBatchNorm:
      impl = bn_pd(spec, ctx).impl_info_str();
      break;
    case OpKind::kSoftmax:
      impl = softmax_pd(spec, ctx).impl_info_str();
      break;
    default: {
      DnnlKernel probe(ctx.engine, 1);
      probe.add_eltwise_steps(ctx, steps_of(spec), md(spec.srcs[0]), 0, dst_slot(0));
      impl = probe.step_implementation(0);
      break;
    }
  }
  return implementation_support(impl, in_layout(spec));
}

std::string build(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const memory::desc src = md(spec.srcs[0]);
  const memory::desc dst = md(spec.dsts[0]);
  switch (spec.kind) {
    case OpKind::kBatchNorm: {
      const auto pd = bn_pd(spec, ctx);
      const graph::OpWeights& w = *spec.weights;
      k.add({dnnl::batch_normalization_forward(pd),
             {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}},
             {{DNNL_ARG_MEAN, copy_vector(ctx.engine, w.mean)},
              {DNNL_ARG_VARIANCE, copy_vector(ctx.engine, w.var)},
              {DNNL_ARG_SCALE, copy_vector(ctx.engine, w.gamma)},
              {DNNL_ARG_SHIFT, copy_vector(ctx.engine, w.beta)}}},
            scratch(pd));
      if (const auto steps = bn_activation_steps(spec); !steps.empty()) {
        k.add_eltwise_steps(ctx, steps, dst, dst_slot(0), dst_slot(0));
      }
      return pd.impl_info_str();
    }
    case OpKind::kSoftmax: {
      const auto pd = softmax_pd(spec, ctx);
      k.add({dnnl::softmax_forward(pd), {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(pd));
      return pd.impl_info_str();
    }
    default:
      k.add_eltwise_steps(ctx, steps_of(spec), src, 0, dst_slot(0));
      return k.step_implementation(0);
  }
}

}  // namespace

const OpFamily kElementwiseFamily{"element-wise",
                                  {OpKind::kRelu, OpKind::kRelu6, OpKind::kSigmoid, OpKind::kScale,
                                   OpKind::kHardSigmoid, OpKind::kHardSwish, OpKind::kSilu,
                                   OpKind::kGelu, OpKind::kGeluTanh, OpKind::kLeakyRelu,
                                   OpKind::kBatchNorm, OpKind::kSoftmax},
                                  check,
                                  build};

}  // namespace stagecraft::executor::cpu
