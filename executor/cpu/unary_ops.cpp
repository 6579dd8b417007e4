// Unary math functions (graph::UnaryFn: ONNX's Abs, Exp, Sin, Erf, Elu, ...): exp, log and abs on
// oneDNN's eltwise where it has an optimised kernel, the others on our own host loop:
// f32 tensors of any rank in one layout in and out (nc, plain, nchw, nhwc, nChw8c, nChw16c). The
// buffer is one run of elements in every such layout, so the loop runs over all of it, spread over
// the threads; in a blocked layout the lanes past the last channel hold fn(0) afterwards and are
// zeroed again (oneDNN reads them as zeros). Each element is graph::apply_unary, the definition
// the reference and every backend share.
#include <algorithm>
#include <cmath>
#include <optional>

#include "common/strings.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr const char* kUnaryImpl = "unary host";

struct HostUnary {
  graph::UnaryAttrs attrs;
  int64_t elements = 0;  // in the buffer, padding lanes included
  bool padded = false;   // a blocked layout whose last block is not full
  HostLayout geometry;   // of a rank-4 tensor (when padded)
};

// The cheap functions in float, in loops the compiler vectorises (the same values as
// apply_unary's double-precision definition: these are exact in float): the exporters' safe
// softmax tests every probability with IsNaN (12 x 465k elements in ViT-B, 0.7 ms each before).
bool run_exact_in_float(graph::UnaryFn fn, const float* x, float* y, int64_t begin, int64_t end) {
  switch (fn) {
    case graph::UnaryFn::kIsNaN:
      for (int64_t i = begin; i < end; ++i) y[i] = std::isnan(x[i]) ? 1.0f : 0.0f;
      return true;
    case graph::UnaryFn::kNot:
      for (int64_t i = begin; i < end; ++i) y[i] = x[i] == 0.0f ? 1.0f : 0.0f;
      return true;
    case graph::UnaryFn::kFloor:
      for (int64_t i = begin; i < end; ++i) y[i] = std::floor(x[i]);
      return true;
    case graph::UnaryFn::kCeil:
      for (int64_t i = begin; i < end; ++i) y[i] = std::ceil(x[i]);
      return true;
    default:
      return false;
  }
}

void run(const HostUnary& u, const float* x, float* y) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (u.elements + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(u.elements, (c + 1) * kChunk);
    if (run_exact_in_float(u.attrs.fn, x, y, c * kChunk, end)) continue;
    if (u.attrs.fn == graph::UnaryFn::kLog) {  // in float (within an ulp of the double's rounding)
      for (int64_t i = c * kChunk; i < end; ++i) y[i] = std::log(x[i]);
      continue;
    }
    for (int64_t i = c * kChunk; i < end; ++i) y[i] = graph::apply_unary(u.attrs, x[i]);
  }
  if (!u.padded) return;
  const HostLayout& g = u.geometry;
  for (int64_t n = 0; n < g.images; ++n) {
    for (int64_t ch = g.channels; ch < g.padded_channels; ++ch) {
      float* o = y + n * g.batch_stride + g.channel_offset(ch);
      for (int64_t p = 0; p < g.pixels; ++p) o[p * g.pixel_stride] = 0.0f;
    }
  }
}

// The oneDNN eltwise algorithm of a function it computes as the definition does (to float
// rounding), where oneDNN has one: exp runs vectorised there (10x our double-precision loop: the
// IoU matrices of an oriented-box NMS head, 1500x1500). Not log: oneDNN 2.6's is off by 3e-6 at 1,
// where log is 0 (ONNX's test_log_example).
std::optional<dnnl::algorithm> dnnl_algorithm_of(graph::UnaryFn fn) {
  switch (fn) {
    case graph::UnaryFn::kExp: return dnnl::algorithm::eltwise_exp;
    case graph::UnaryFn::kAbs: return dnnl::algorithm::eltwise_abs;
    default: return std::nullopt;
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (spec.srcs[0].layout != spec.dsts[0].layout) {
    return Support::unsupported(SupportReason::kLayout, "unary reads and writes one layout");
  }
  const auto& attrs = std::get<graph::UnaryAttrs>(spec.attrs);
  if (const auto alg = dnnl_algorithm_of(attrs.fn); alg && spec.srcs[0].dtype == graph::DataType::kF32) {
    auto pd = eltwise_pd(ctx, {{*alg, 0.0f, 0.0f}}, md(spec.srcs[0]));
    if (pd && !is_reference(pd.impl_info_str())) {
      const std::string impl = pd.impl_info_str();
      return described(impl, cat(graph::to_string(attrs.fn), " in ", graph::to_string(spec.dsts[0].layout)),
                       workspace_of(pd), std::make_shared<PdState<dnnl::eltwise_forward::primitive_desc>>(pd));
    }
  }
  return host_kernel_desc(spec, kUnaryImpl, /*rank2=*/true);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext&) {
  if (desc.implementation != kUnaryImpl) {
    const auto& pd = state_of<PdState<dnnl::eltwise_forward::primitive_desc>>(desc, spec).pd;
    k.add_eltwise(pd, 0, dst_slot(0));
    return pd.impl_info_str();
  }
  auto u = std::make_shared<HostUnary>();
  const graph::TensorDesc& d = spec.dsts[0];
  u->attrs = std::get<graph::UnaryAttrs>(spec.attrs);
  u->elements = d.bytes() / static_cast<int64_t>(sizeof(float));
  if (graph::takes_layouts(d)) {
    u->geometry = host_layout(d);
    u->padded = u->geometry.padded_channels != u->geometry.channels;
  }
  return k.add_host_f32([u](const float* from, float* to) { run(*u, from, to); }, kUnaryImpl);
}

}  // namespace

const OpFamily kUnaryFamily{"unary", {graph::OpKind::kUnary}, check, build};

}  // namespace stagecraft::executor::cpu
