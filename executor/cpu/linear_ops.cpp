// Linear layers (fully connected): f32 and bf16 on oneDNN's inner product or its matmul, whichever
// ran faster here, with the activation fused; int8 on the inner product with per-channel i8
// weights and the requantisation fused. A row-major input of rank 3 or more (a transformer's
// tokens) is the matrix of its rows: [N·T, C].
#include <cstring>

#include "common/strings.h"
#include "executor/cpu/conv_timing.h"
#include "executor/cpu/kernel_choices.h"
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

// oneDNN's matmul of the rows by the weights packed for it ([in, out], format any) with the same
// bias and activation; empty where oneDNN has none.
dnnl::matmul::primitive_desc matmul_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
  const memory::desc src = md(spec.srcs[0]), dst = md(spec.dsts[0]);
  const memory::desc w_any({a.in_features, a.out_features}, weight_type(spec.srcs[0]), memory::format_tag::any);
  const memory::desc b_md({1, a.out_features}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::desc d = a.bias ? dnnl::matmul::desc(src, w_any, b_md, dst) : dnnl::matmul::desc(src, w_any, dst);
  return {d, make_attr(a.activation), ctx.engine, /*allow_empty=*/true};
}

// f32 and bf16: the inner product, and the matmul where it ran faster here (`mm` not empty).
struct LinearState : KernelDesc::State {
  LinearState(dnnl::inner_product_forward::primitive_desc i, dnnl::matmul::primitive_desc m)
      : ip(std::move(i)), mm(std::move(m)) {}
  dnnl::inner_product_forward::primitive_desc ip;
  dnnl::matmul::primitive_desc mm;
};

// The matmul where it exists, is not oneDNN's reference kernel and ran faster than the inner
// product here (timed once per signature and machine, cached in ctx.choices: with M = 197 rows,
// ViT-B's, it ran 1.15-1.3x faster on AMD Zen 4 in f32 and bf16; with one row, as fast), else an
// empty descriptor. Without a cache (measure_kernels off): the inner product, as every run.
dnnl::matmul::primitive_desc faster_matmul(const KernelSpec& spec, const DnnlContext& ctx,
                                           const dnnl::inner_product_forward::primitive_desc& ip) {
  if (!ctx.choices) return {};
  const auto usable = [&] {
    dnnl::matmul::primitive_desc mm = matmul_pd(spec, ctx);
    return mm && !is_reference(mm.impl_info_str()) ? mm : dnnl::matmul::primitive_desc();
  };
  // The matmul's descriptor is made only to measure it and where it won (a cached "inner
  // product" costs one lookup).
  const std::string verdict = ctx.choices->choose(linear_signature(spec), [&] {
    const dnnl::matmul::primitive_desc mm = usable();
    return mm && first_kernel_faster(mm, ip, memory::desc(), spec.threads, ctx.engine) ? "matmul" : "inner product";
  });
  return verdict == "matmul" ? usable() : dnnl::matmul::primitive_desc();
}

// f32 and bf16: the state holds the descriptors (the desc carries it). Quantised: the inner
// product is made again with the output scales of the weights quantised at build.
KernelDesc check(const KernelSpec& given, DnnlContext& ctx) {
  const KernelSpec spec = as_rows(given);
  if (given.srcs[0].shape.rank() > 2 && (given.srcs[0].layout != graph::Layout::kRowMajor ||
                                          given.dsts[0].layout != graph::Layout::kRowMajor)) {
    return Support::unsupported(SupportReason::kLayout, "a linear layer over the last axis reads and writes row-major tensors");
  }
  auto pd = linear_pd(spec, ctx);
  const std::string what = cat("a ", graph::to_string(spec.srcs[0].dtype), " linear layer");
  if (quantised(spec.srcs[0])) return described(pd.impl_info_str(), what);
  dnnl::matmul::primitive_desc mm = faster_matmul(spec, ctx, pd);
  if (mm) {
    const std::string impl = cat(mm.impl_info_str(), " (matmul: faster here than the inner product)");
    const size_t workspace = workspace_of(mm);
    return described(impl, what, workspace, std::make_shared<LinearState>(std::move(pd), std::move(mm)));
  }
  const std::string impl = pd.impl_info_str();
  const size_t workspace = workspace_of(pd);
  return described(impl, what, workspace, std::make_shared<LinearState>(std::move(pd), dnnl::matmul::primitive_desc()));
}

std::string build(DnnlKernel& k, const KernelSpec& given, const KernelDesc& desc, DnnlContext& ctx) {
  const KernelSpec spec = as_rows(given);
  const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
  const memory::desc w_user({a.out_features, a.in_features}, memory::data_type::f32,
                            memory::format_tag::oi);
  if (!quantised(spec.srcs[0])) {
    const auto& state = state_of<LinearState>(desc, spec);
    if (!state.mm) {
      add_weighted_step(k, ctx, spec, dnnl::inner_product_forward(state.ip), w_user, state.ip.weights_desc(),
                        scratch(state.ip), a.bias, nullptr, nullptr);
      return state.ip.impl_info_str();
    }
    // The same [out, in] weights seen as the matmul's [in, out] (format ba), packed for it; the
    // bias as its [1, out] row.
    const memory::desc w_rows({a.in_features, a.out_features}, memory::data_type::f32, memory::format_tag::ba);
    DnnlKernel::StepSpec step{dnnl::matmul(state.mm),
                              {{DNNL_ARG_SRC, 0, md(spec.srcs[0])}, {DNNL_ARG_DST, dst_slot(0), md(spec.dsts[0])}}};
    step.add_constant(DNNL_ARG_WEIGHTS, pack(ctx, w_rows, state.mm.weights_desc(), spec.weights->weight));
    if (a.bias) {
      dnnl::memory bias({{1, a.out_features}, memory::data_type::f32, memory::format_tag::ab}, ctx.engine);
      std::memcpy(bias.get_data_handle(), spec.weights->bias.data(), spec.weights->bias.size() * sizeof(float));
      step.constants.emplace(DNNL_ARG_BIAS, std::move(bias));
    }
    k.add(std::move(step), scratch(state.mm));
    return desc.implementation;
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

std::string linear_signature(const KernelSpec& given) {
  const KernelSpec spec = as_rows(given);
  const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  return cat("linear ", graph::to_string(in.dtype), " ", in.shape.to_string(), " -> ", graph::to_string(out.dtype), " ",
             out.shape.to_string(), " ", graph::to_string(a.activation), a.bias ? " bias" : "", " threads",
             std::max(1, spec.threads), " inner product vs matmul");
}

const OpFamily kLinearFamily{"linear", {graph::OpKind::kLinear}, check, build};

}  // namespace stagecraft::executor::cpu
