// Linear layers (fully connected) on oneDNN's inner product: f32 with the activation fused, or
// int8 with per-channel i8 weights and the requantisation fused. A row-major input of rank 3 or
// more (a transformer's tokens) is the matrix of its rows: [N·T, C].
#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;

// The spec with a row-major source and destination of rank >= 3 seen as matrices of rows.
KernelSpec as_rows(const KernelSpec& spec) {
  KernelSpec rows = spec;
  for (auto* d : {&rows.srcs[0], &rows.dsts[0]}) {
    if (d->shape.rank() == 2) continue;
    const int64_t features = d->shape[d->shape.rank() - 1];
    d->shape = graph::Shape{d->shape.numel() / features, features};
    d->layout = graph::Layout::kNC;
  }
  return rows;
}

dnnl::inner_product_forward::desc linear_desc(const KernelSpec& spec) {
  const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
  const memory::desc src = md(spec.srcs[0]);
  const memory::desc dst = md(spec.dsts[0]);
  const memory::desc w_any({a.out_features, a.in_features},
                           weight_type(spec.srcs[0]), memory::format_tag::any);
  const memory::desc b_md({a.out_features}, memory::data_type::f32, memory::format_tag::x);
  return a.bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src, w_any,
                                                    b_md, dst)
                : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src, w_any,
                                                    dst);
}

dnnl::inner_product_forward::primitive_desc linear_pd(const KernelSpec& spec, const DnnlContext& ctx,
                                                      const Requantisation* quant = nullptr) {
  const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
  if (!quantised(spec.srcs[0])) return {linear_desc(spec), make_attr(a.activation), ctx.engine};
  Requantisation unit;
  if (!quant) unit.output_scales.assign(static_cast<size_t>(a.out_features), 1.0f);
  return {linear_desc(spec), make_quantised_attr(a.activation, quant ? *quant : unit), ctx.engine};
}

using LinearState = PdState<dnnl::inner_product_forward::primitive_desc>;

// f32: the primitive descriptor is the kernel's (the desc carries it). Quantised: it is made
// again with the output scales of the weights quantised at build (the name stays the same).
KernelDesc check(const KernelSpec& given, DnnlContext& ctx) {
  const KernelSpec spec = as_rows(given);
  if (given.srcs[0].shape.rank() > 2 && (given.srcs[0].layout != graph::Layout::kRowMajor ||
                                          given.dsts[0].layout != graph::Layout::kRowMajor)) {
    return Support::unsupported(SupportReason::kLayout, "a linear layer over the last axis reads and writes row-major tensors");
  }
  auto pd = linear_pd(spec, ctx);
  const std::string what = cat("a ", graph::to_string(spec.srcs[0].dtype), " linear layer");
  if (quantised(spec.srcs[0])) return described(pd.impl_info_str(), what);
  return described(pd.impl_info_str(), what, workspace_of(pd), std::make_shared<LinearState>(pd));
}

std::string build(DnnlKernel& k, const KernelSpec& given, const KernelDesc& desc, DnnlContext& ctx) {
  const KernelSpec spec = as_rows(given);
  const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
  const memory::desc w_user({a.out_features, a.in_features}, memory::data_type::f32,
                            memory::format_tag::oi);
  if (!quantised(spec.srcs[0])) {
    const auto& pd = state_of<LinearState>(desc, spec).pd;
    add_weighted_step(k, ctx, spec, dnnl::inner_product_forward(pd), w_user, pd.weights_desc(),
                      scratch(pd), a.bias, nullptr, nullptr);
    return pd.impl_info_str();
  }
  const QuantisedWeights qw = quantise_per_channel(spec.weights->weight, a.out_features, int8_weight_max(spec.srcs[0]));
  const Requantisation quant =
      requantisation(spec.srcs[0], spec.dsts[0], qw.scales,
                     a.bias ? spec.weights->bias : std::vector<float>{}, spec.dst_channel_scales);
  const auto pd = linear_pd(spec, ctx, &quant);
  add_weighted_step(k, ctx, spec, dnnl::inner_product_forward(pd), w_user, pd.weights_desc(),
                    scratch(pd), a.bias, &quant, &qw);
  return pd.impl_info_str();
}

}  // namespace

const OpFamily kLinearFamily{"linear", {graph::OpKind::kLinear}, check, build};

}  // namespace stagecraft::executor::cpu
