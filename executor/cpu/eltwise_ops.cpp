// Element-wise ops on oneDNN: activations (ReLU, leaky ReLU, ReLU6, sigmoid, hard sigmoid, hard
// swish, SiLU, GELU in its erf and tanh forms), scaling, batch normalisation (a fused ReLU by the primitive's fuse_norm_relu,
// other fused activations as in-place eltwise steps after it), softmax and log softmax, and local
// response normalisation across channels.
#include <algorithm>

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
    case OpKind::kClip: {
      const auto& a = std::get<graph::ClipAttrs>(spec.attrs);
      return {{dnnl::algorithm::eltwise_clip, static_cast<float>(a.min), static_cast<float>(a.max)}};
    }
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

dnnl::lrn_forward::primitive_desc lrn_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const auto& a = std::get<graph::LrnAttrs>(spec.attrs);
  dnnl::lrn_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels,
                            md(spec.srcs[0]), a.size, static_cast<float>(a.alpha), static_cast<float>(a.beta),
                            static_cast<float>(a.bias));
  return {d, make_attr(), ctx.engine};
}

dnnl::logsoftmax_forward::primitive_desc logsoftmax_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const int axis = static_cast<int>(std::get<graph::SoftmaxAttrs>(spec.attrs).axis);
  dnnl::logsoftmax_forward::desc d(dnnl::prop_kind::forward_inference, md(spec.srcs[0]), axis);
  return {d, make_attr(), ctx.engine};
}

dnnl::softmax_forward::primitive_desc softmax_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const int axis = static_cast<int>(std::get<graph::SoftmaxAttrs>(spec.attrs).axis);
  dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md(spec.srcs[0]), axis);
  return {d, make_attr(), ctx.engine};
}

// What an element-wise op's description holds: its primitive descriptor and, for a batch norm
// with a fused activation other than ReLU, the eltwise step after it.
struct EltwiseState : KernelDesc::State {
  dnnl::batch_normalization_forward::primitive_desc bn;
  dnnl::softmax_forward::primitive_desc softmax;
  dnnl::logsoftmax_forward::primitive_desc logsoftmax;  // a softmax with `log`
  dnnl::lrn_forward::primitive_desc lrn;
  dnnl::eltwise_forward::primitive_desc eltwise;  // activations and scale; a batch norm's activation
  bool host_softmax = false;  // the (log) softmax on our host loop (oneDNN has only its reference)
};

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (Support s = same_layout_support(spec); !s.runnable()) return s;
  auto s = std::make_shared<EltwiseState>();
  std::string impl;
  size_t workspace = 0;
  switch (spec.kind) {
    case OpKind::kBatchNorm:
      s->bn = bn_pd(spec, ctx);
      impl = s->bn.impl_info_str();
      workspace = workspace_of(s->bn);
      if (const auto steps = bn_activation_steps(spec); !steps.empty()) {
        s->eltwise = eltwise_pd(ctx, steps, md(spec.dsts[0]));
        workspace = std::max(workspace, workspace_of(s->eltwise));
      }
      break;
    case OpKind::kLrn:
      if (spec.srcs[0].dtype != graph::DataType::kF32) {
        return Support::unsupported(SupportReason::kDataType, "lrn runs in f32");
      }
      s->lrn = lrn_pd(spec, ctx);
      impl = s->lrn.impl_info_str();
      workspace = workspace_of(s->lrn);
      break;
    case OpKind::kSoftmax:
      if (std::get<graph::SoftmaxAttrs>(spec.attrs).hard) {  // our host loop only
        if (!host_softmax_applies(spec)) {
          return Support::unsupported(SupportReason::kLayout, "hardmax runs on row-major f32 tensors");
        }
        s->host_softmax = true;
        impl = kHostSoftmaxImpl;
        break;
      }
      if (std::get<graph::SoftmaxAttrs>(spec.attrs).log) {
        s->logsoftmax = logsoftmax_pd(spec, ctx);
        impl = s->logsoftmax.impl_info_str();
        workspace = workspace_of(s->logsoftmax);
      } else {
        s->softmax = softmax_pd(spec, ctx);
        impl = s->softmax.impl_info_str();
        workspace = workspace_of(s->softmax);
      }
      if (is_reference(impl) && host_softmax_applies(spec)) {
        s->host_softmax = true;
        impl = kHostSoftmaxImpl;
        workspace = 0;
      }
      break;
    default:
      s->eltwise = eltwise_pd(ctx, steps_of(spec), md(spec.srcs[0]));
      impl = s->eltwise.impl_info_str();
      workspace = workspace_of(s->eltwise);
      break;
  }
  return described(impl, in_layout(spec), workspace, std::move(s));
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext& ctx) {
  const EltwiseState& s = state_of<EltwiseState>(desc, spec);
  const memory::desc src = md(spec.srcs[0]);
  const memory::desc dst = md(spec.dsts[0]);
  switch (spec.kind) {
    case OpKind::kBatchNorm: {
      const graph::OpWeights& w = *spec.weights;
      k.add({dnnl::batch_normalization_forward(s.bn),
             {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}},
             {{DNNL_ARG_MEAN, copy_vector(ctx.engine, w.mean)},
              {DNNL_ARG_VARIANCE, copy_vector(ctx.engine, w.var)},
              {DNNL_ARG_SCALE, copy_vector(ctx.engine, w.gamma)},
              {DNNL_ARG_SHIFT, copy_vector(ctx.engine, w.beta)}}},
            scratch(s.bn));
      if (s.eltwise) k.add_eltwise(s.eltwise, dst_slot(0), dst_slot(0));
      return s.bn.impl_info_str();
    }
    case OpKind::kLrn:
      k.add({dnnl::lrn_forward(s.lrn), {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}}}, scratch(s.lrn));
      return s.lrn.impl_info_str();
    case OpKind::kSoftmax:
      if (s.host_softmax) return add_host_softmax(k, spec);
      if (s.logsoftmax) {
        k.add({dnnl::logsoftmax_forward(s.logsoftmax), {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}}},
              scratch(s.logsoftmax));
        return s.logsoftmax.impl_info_str();
      }
      k.add({dnnl::softmax_forward(s.softmax), {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(s.softmax));
      return s.softmax.impl_info_str();
    default:
      k.add_eltwise(s.eltwise, 0, dst_slot(0));
      return k.step_implementation(0);
  }
}

}  // namespace

const OpFamily kElementwiseFamily{"element-wise",
                                  {OpKind::kRelu, OpKind::kRelu6, OpKind::kSigmoid, OpKind::kScale,
                                   OpKind::kHardSigmoid, OpKind::kHardSwish, OpKind::kSilu,
                                   OpKind::kGelu, OpKind::kGeluTanh, OpKind::kTanh, OpKind::kSqrt, OpKind::kLeakyRelu, OpKind::kClip,
                                   OpKind::kBatchNorm, OpKind::kSoftmax, OpKind::kLrn},
                                  check,
                                  build};

}  // namespace stagecraft::executor::cpu
