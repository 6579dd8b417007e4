// Element-wise ops on oneDNN: activations, scaling, batch normalisation, additions (with a fused
// activation) and softmax.
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

dnnl::eltwise_forward::primitive_desc eltwise_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const memory::desc desc = md(spec.srcs[0]);
  dnnl::algorithm alg = dnnl::algorithm::eltwise_linear;
  float alpha = 0, beta = 0;
  switch (graph::activation_of_kind(spec.kind)) {
    case Activation::kRelu:
      alg = dnnl::algorithm::eltwise_relu;
      break;
    case Activation::kRelu6:
      alg = dnnl::algorithm::eltwise_clip;
      beta = kRelu6Max;
      break;
    case Activation::kSigmoid:
      alg = dnnl::algorithm::eltwise_logistic;
      break;
    case Activation::kNone:  // scale
      alpha = static_cast<float>(std::get<graph::ScaleAttrs>(spec.attrs).factor);
      break;
  }
  if (spec.kind == OpKind::kRelu6) beta = relu6_bound(spec.dsts[0]);
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, desc, alpha, beta);
  return {d, make_attr(), ctx.engine};
}

dnnl::batch_normalization_forward::primitive_desc bn_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const auto& a = std::get<graph::BatchNormAttrs>(spec.attrs);
  dnnl::batch_normalization_forward::desc d(
      dnnl::prop_kind::forward_inference, md(spec.srcs[0]), static_cast<float>(a.eps),
      dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
          dnnl::normalization_flags::use_shift);
  return {d, make_attr(), ctx.engine};
}

dnnl::softmax_forward::primitive_desc softmax_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md(spec.srcs[0]), 1);
  return {d, make_attr(), ctx.engine};
}

// oneDNN 2.x's jit binary kernel with an eltwise post-op mishandles the channel tail of blocked
// layouts: in nChw16c with 78 channels on AVX2 it computes wrong values (relative error 0.9) and
// writes one byte past its destination; in nChw8c it is wrong when it adds in place (src0 = dst).
// Without a post-op it is right, and oneDNN 3.x is right either way. Below 3.x the activation of
// such an addition runs as its own (in-place) eltwise step.
bool split_activation(const KernelSpec& spec) {
#if DNNL_VERSION_MAJOR < 3
  const int64_t block = graph::channel_block(spec.dsts[0].layout);
  return block > 0 && spec.dsts[0].shape[1] % block != 0;
#else
  (void)spec;
  return false;
#endif
}

dnnl::sum::primitive_desc sum_pd(const KernelSpec& spec, const DnnlContext& ctx);

// A two-input f32 addition runs as oneDNN's binary primitive; more inputs as its sum primitive,
// or as a chain of binary additions where the sum has only its reference kernel (f32 sums of
// three or more inputs whose channels do not fill the blocks of nChw8c/nChw16c). Quantised
// additions run as the sum (it rescales every input).
bool binary_add(const KernelSpec& spec, const DnnlContext& ctx) {
  if (quantised(spec.srcs[0])) return false;
  if (spec.srcs.size() == 2) return true;
  return !implementation_support(sum_pd(spec, ctx).impl_info_str(), "").is_native();
}

// Step `i` of the binary chain: dst = (i == 0 ? src0 : dst) + src[i + 1], the activation fused
// into the last step unless it runs alone (split_activation).
dnnl::binary::primitive_desc binary_pd(const KernelSpec& spec, const DnnlContext& ctx, size_t i = 0) {
  const Activation act = std::get<graph::AddAttrs>(spec.attrs).activation;
  const bool last = i + 2 == spec.srcs.size();
  dnnl::binary::desc d(dnnl::algorithm::binary_add, md(i == 0 ? spec.srcs[0] : spec.dsts[0]),
                       md(spec.srcs[i + 1]), md(spec.dsts[0]));
  return {d, make_attr(last && !split_activation(spec) ? act : Activation::kNone), ctx.engine};
}

dnnl::sum::primitive_desc sum_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  // Quantised: dst = sum (src scale / dst scale) * src, saturated to the destination type.
  std::vector<memory::desc> srcs;
  std::vector<float> scales;
  for (const auto& d : spec.srcs) {
    srcs.push_back(md(d));
    scales.push_back(quantised(d) ? d.scale / spec.dsts[0].scale : 1.0f);
  }
  return {md(spec.dsts[0]), scales, srcs, ctx.engine, make_attr()};
}

std::string add_implementation(const KernelSpec& spec, const DnnlContext& ctx) {
  return binary_add(spec, ctx) ? binary_pd(spec, ctx).impl_info_str()
                               : sum_pd(spec, ctx).impl_info_str();
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
    case OpKind::kAdd:
      impl = add_implementation(spec, ctx);
      break;
    default:
      impl = eltwise_pd(spec, ctx).impl_info_str();
      break;
  }
  return implementation_support(impl, in_layout(spec));
}

std::string build_add(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const Activation act = std::get<graph::AddAttrs>(spec.attrs).activation;
  const memory::desc dst = md(spec.dsts[0]);
  bool act_done = false;
  std::string impl;
  if (binary_add(spec, ctx)) {
    for (size_t i = 0; i + 1 < spec.srcs.size(); ++i) {
      const auto pd = binary_pd(spec, ctx, i);
      k.add({dnnl::binary(pd),
             {{DNNL_ARG_SRC_0, i == 0 ? 0 : dst_slot(0), i == 0 ? md(spec.srcs[0]) : dst},
              {DNNL_ARG_SRC_1, static_cast<int>(i) + 1, md(spec.srcs[i + 1])},
              {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(pd));
      impl = pd.impl_info_str();
    }
    if (spec.srcs.size() > 2) impl += cat(" x", spec.srcs.size() - 1);
    act_done = !split_activation(spec);
  } else {
    const auto pd = sum_pd(spec, ctx);
    DnnlKernel::StepSpec step{dnnl::sum(pd), {{DNNL_ARG_DST, dst_slot(0), dst}}};
    for (size_t i = 0; i < spec.srcs.size(); ++i) {
      step.args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), static_cast<int>(i),
                           md(spec.srcs[i])});
    }
    k.add(std::move(step), scratch(pd));
    // A u8 destination saturates at 0, which is the ReLU already.
    act_done = act == Activation::kRelu && spec.dsts[0].dtype == graph::DataType::kU8;
    impl = pd.impl_info_str();
  }
  if (act != Activation::kNone && !act_done) {
    // In place, in the destination's units (a quantised ReLU6 clips at 6 / scale).
    k.add_eltwise(ctx, act, dst, dst_slot(0), dst_slot(0), relu6_bound(spec.dsts[0]));
  }
  return impl;
}

std::string build(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const memory::desc src = md(spec.srcs[0]);
  const memory::desc dst = md(spec.dsts[0]);
  switch (spec.kind) {
    case OpKind::kAdd:
      return build_add(k, spec, ctx);
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
      return pd.impl_info_str();
    }
    case OpKind::kSoftmax: {
      const auto pd = softmax_pd(spec, ctx);
      k.add({dnnl::softmax_forward(pd), {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(pd));
      return pd.impl_info_str();
    }
    default: {
      const auto pd = eltwise_pd(spec, ctx);
      k.add({dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(pd));
      return pd.impl_info_str();
    }
  }
}

}  // namespace

const OpFamily kElementwiseFamily{"element-wise",
                                  {OpKind::kRelu, OpKind::kRelu6, OpKind::kSigmoid, OpKind::kScale,
                                   OpKind::kBatchNorm, OpKind::kAdd, OpKind::kSoftmax},
                                  check,
                                  build};

}  // namespace stagecraft::executor::cpu
