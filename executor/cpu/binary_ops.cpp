// Additions and binary element-wise ops on oneDNN: the n-ary add of same-shaped tensors (f32 and
// quantised, with a fused activation) and add/sub/mul/div with broadcasting of the second operand,
// which may be a constant (per-channel scales, squeeze-and-excitation gates).
#include <emmintrin.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "common/enum_table.h"
#include "common/strings.h"
#include "executor/cpu/ops.h"
#include "executor/op_rules.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;
using graph::Activation;
using graph::BinaryOp;
using graph::OpKind;

// oneDNN 2.x's jit binary kernel with an eltwise post-op mishandles channels that do not fill its
// vectors in blocked layouts: in nChw16c with 78 channels on AVX2 it computes wrong values
// (relative error 0.9) and writes one byte past its destination; on AVX-512 (AMD Zen 4) in nChw8c
// with 8, 24, 78 or 312 channels (not 16 or 64) it is wrong and writes up to 768 bytes past its
// destination, in place or not; in nChw8c on AVX2 it is wrong when it adds in place (src0 = dst).
// Without a post-op it is right, and oneDNN 3.x is right either way. Below 3.x the activation of
// such an op (channels not a multiple of the layout's block or of the ISA's 8 or 16 lanes) runs as
// its own (in-place) eltwise step.
bool split_activation(const KernelSpec& spec) {
#if DNNL_VERSION_MAJOR < 3
  static const int64_t lanes = isa_has_avx512(dnnl::get_effective_cpu_isa()) ? 16 : 8;
  const int64_t block = graph::channel_block(spec.dsts[0].layout);
  const int64_t channels = spec.dsts[0].shape[1];
  return block > 0 && (channels % block != 0 || channels % lanes != 0);
#else
  (void)spec;
  return false;
#endif
}

// ---- n-ary add ------------------------------------------------------------------------------

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

// A two-input f32 addition runs as oneDNN's binary primitive; more inputs as its sum primitive,
// or as a chain of binary additions where the sum has only its reference kernel (f32 sums of
// three or more inputs whose channels do not fill the blocks of nChw8c/nChw16c). Quantised
// additions run as the sum (it rescales every input).
bool binary_chain(const KernelSpec& spec, const DnnlContext& ctx) {
  if (quantised(spec.srcs[0])) return false;
  if (spec.srcs.size() == 2) return true;
  return is_reference(sum_pd(spec, ctx).impl_info_str());
}

// Step `i` of the chain: dst = (i == 0 ? src0 : dst) + src[i + 1], the activation fused into the
// last step unless it runs alone (split_activation).
dnnl::binary::primitive_desc chain_pd(const KernelSpec& spec, const DnnlContext& ctx, size_t i = 0) {
  const Activation act = std::get<graph::AddAttrs>(spec.attrs).activation;
  const bool last = i + 2 == spec.srcs.size();
  dnnl::binary::desc d(dnnl::algorithm::binary_add, md(i == 0 ? spec.srcs[0] : spec.dsts[0]),
                       md(spec.srcs[i + 1]), md(spec.dsts[0]));
  return {d, make_attr(last && !split_activation(spec) ? act : Activation::kNone), ctx.engine};
}

// oneDNN 2.6 has only its reference sum for quantised inputs (7.5 of resnet50's 42.7 ms in int8
// on AVX2); additions of tensors in the destination's layout and shape run as our own host step:
// dst = saturate(round_half_even(clamp(sum of x_i * scale_i / dst scale, lo, hi))), lo/hi the
// ReLU or ReLU6 bounds in the destination's units.
bool host_quantised_add(const KernelSpec& spec, const DnnlContext& ctx) {
  const graph::TensorDesc& out = spec.dsts[0];
  if (!quantised(out)) return false;
  for (const auto& d : spec.srcs) {
    if (!quantised(d) || d.layout != out.layout || d.shape != out.shape) return false;
  }
  return is_reference(sum_pd(spec, ctx).impl_info_str());
}

// 16 floats to 16 saturated 8-bit integers (SSE2: cvtps rounds half to even in the default
// rounding mode, the packs saturate).
template <class D>
void store16(const float* v, D* out) {
  const __m128i a = _mm_packs_epi32(_mm_cvtps_epi32(_mm_loadu_ps(v)), _mm_cvtps_epi32(_mm_loadu_ps(v + 4)));
  const __m128i b = _mm_packs_epi32(_mm_cvtps_epi32(_mm_loadu_ps(v + 8)), _mm_cvtps_epi32(_mm_loadu_ps(v + 12)));
  const __m128i r = std::is_same_v<D, uint8_t> ? _mm_packus_epi16(a, b) : _mm_packs_epi16(a, b);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), r);
}

template <class D>
void add_quantised(const std::vector<void*>& data, const std::vector<uint8_t>& unsigned_src,
                   const std::vector<float>& factors, int64_t n, float lo, float hi) {
  constexpr int64_t kChunk = 1024;  // a multiple of 16
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  D* out = static_cast<D*>(data.back());
  // Below -2^31 / above 2^31 cvtps gives INT_MIN; the bounds keep values where packs saturate.
  const float bottom = std::max(lo, -32768.0f), top = std::min(hi, 32767.0f);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * kChunk, count = std::min(kChunk, n - first);
    alignas(64) float acc[kChunk] = {};
    for (size_t i = 0; i < factors.size(); ++i) {
      const float f = factors[i];
      if (unsigned_src[i] != 0) {
        const auto* x = static_cast<const uint8_t*>(data[i]) + first;
        for (int64_t j = 0; j < count; ++j) acc[j] += static_cast<float>(x[j]) * f;
      } else {
        const auto* x = static_cast<const int8_t*>(data[i]) + first;
        for (int64_t j = 0; j < count; ++j) acc[j] += static_cast<float>(x[j]) * f;
      }
    }
    for (int64_t j = 0; j < count; ++j) acc[j] = std::min(std::max(acc[j], bottom), top);
    const int64_t whole = count / 16 * 16;
    for (int64_t j = 0; j < whole; j += 16) store16(acc + j, out + first + j);
    if (whole < count) {  // the tail through a padded block
      alignas(64) float tail[16] = {};
      D packed[16];
      std::copy(acc + whole, acc + count, tail);
      store16(tail, packed);
      std::copy(packed, packed + (count - whole), out + first + whole);
    }
  }
}

// How an addition runs: our int8 host step, a chain of binary additions, or oneDNN's sum.
enum class AddRoute { kHostInt8, kChain, kSum };

AddRoute add_route(const KernelSpec& spec, const DnnlContext& ctx) {
  if (host_quantised_add(spec, ctx)) return AddRoute::kHostInt8;
  return binary_chain(spec, ctx) ? AddRoute::kChain : AddRoute::kSum;
}

constexpr const char* kHostInt8Add = "int8 add";

// The name of a chain of binary additions over `inputs` whose last step is `last_impl`.
std::string chain_name(const std::string& last_impl, size_t inputs) {
  return inputs > 2 ? cat(last_impl, " x", inputs - 1) : last_impl;
}

// Appends the host step; returns whether the activation was applied too.
bool add_host_quantised_add(DnnlKernel& k, const KernelSpec& spec) {
  const graph::TensorDesc& out = spec.dsts[0];
  const Activation act = std::get<graph::AddAttrs>(spec.attrs).activation;
  std::vector<uint8_t> unsigned_src;
  std::vector<float> factors;
  std::vector<int> slots;
  for (size_t i = 0; i < spec.srcs.size(); ++i) {
    unsigned_src.push_back(spec.srcs[i].dtype == graph::DataType::kU8 ? 1 : 0);
    factors.push_back(spec.srcs[i].scale / out.scale);
    slots.push_back(static_cast<int>(i));
  }
  slots.push_back(dst_slot(0));
  const bool clamps = act == Activation::kRelu || act == Activation::kRelu6;
  const float lo = clamps ? 0.0f : -std::numeric_limits<float>::infinity();
  const float hi = act == Activation::kRelu6 ? relu6_bound(out) : std::numeric_limits<float>::infinity();
  const int64_t n = out.bytes() / graph::size_of(out.dtype);
  if (out.dtype == graph::DataType::kU8) {
    k.add_host([=](const std::vector<void*>& d) { add_quantised<uint8_t>(d, unsigned_src, factors, n, lo, hi); },
               slots, kHostInt8Add);
  } else {
    k.add_host([=](const std::vector<void*>& d) { add_quantised<int8_t>(d, unsigned_src, factors, n, lo, hi); },
               slots, kHostInt8Add);
  }
  return clamps || act == Activation::kNone;
}

std::string build_add(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const Activation act = std::get<graph::AddAttrs>(spec.attrs).activation;
  const memory::desc dst = md(spec.dsts[0]);
  bool act_done = false;
  std::string impl;
  const AddRoute route = add_route(spec, ctx);
  if (route == AddRoute::kHostInt8) {
    act_done = add_host_quantised_add(k, spec);
    impl = kHostInt8Add;
  } else if (route == AddRoute::kChain) {
    for (size_t i = 0; i + 1 < spec.srcs.size(); ++i) {
      const auto pd = chain_pd(spec, ctx, i);
      k.add({dnnl::binary(pd),
             {{DNNL_ARG_SRC_0, i == 0 ? 0 : dst_slot(0), i == 0 ? md(spec.srcs[0]) : dst},
              {DNNL_ARG_SRC_1, static_cast<int>(i) + 1, md(spec.srcs[i + 1])},
              {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(pd));
      impl = chain_name(pd.impl_info_str(), spec.srcs.size());
    }
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

// ---- binary with broadcasting ---------------------------------------------------------------

constexpr Mapped<BinaryOp, dnnl::algorithm> kAlgorithms[] = {
    {BinaryOp::kAdd, dnnl::algorithm::binary_add},
    {BinaryOp::kSub, dnnl::algorithm::binary_sub},
    {BinaryOp::kMul, dnnl::algorithm::binary_mul},
    {BinaryOp::kDiv, dnnl::algorithm::binary_div}};

dnnl::algorithm algorithm_of(BinaryOp op) { return entry_for(kAlgorithms, op)->mapped; }

// Whether oneDNN computes `op`: pow and mod it does not, and its max and min do not propagate a NaN
// as ONNX's (NumPy's) do; those run on our host loop.
bool in_onednn(BinaryOp op) { return entry_for(kAlgorithms, op) != nullptr; }

// The descriptor of the second operand: a tensor input, or the constant (its dims, in the
// destination's layout tag).
memory::desc second_md(const KernelSpec& spec) {
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  if (a.constant.empty()) return md(spec.srcs[1]);
  const std::vector<int64_t> dims = graph::constant_shape(a, spec.dsts[0].shape.rank());
  graph::TensorDesc c = spec.dsts[0];
  c.shape = graph::Shape(dims);
  c.dtype = graph::DataType::kF32;
  return md(c);
}

// The main step: src0 OP src1 -> dst. A constant first operand turns c - x into -(x - c) (a
// linear post-op) and c / x into (1 / x) * c (a power step before, see build_binary).
dnnl::binary::primitive_desc binary_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  const bool reciprocal_first = a.constant_first && a.op == BinaryOp::kDiv;
  const dnnl::algorithm alg = algorithm_of(reciprocal_first ? BinaryOp::kMul : a.op);
  dnnl::binary::desc d(alg, md(reciprocal_first ? spec.dsts[0] : spec.srcs[0]), second_md(spec),
                       md(spec.dsts[0]));
  dnnl::primitive_attr attr = make_attr();
  dnnl::post_ops ops;
  std::vector<EltwiseStep> steps;
  if (a.constant_first && a.op == BinaryOp::kSub) steps.push_back({dnnl::algorithm::eltwise_linear, -1.0f, 0.0f});
  if (!split_activation(spec)) {
    for (const EltwiseStep& e : eltwise_steps(a.activation)) steps.push_back(e);
  }
  append_steps(ops, steps);
  attr.set_post_ops(ops);
  return {d, attr, ctx.engine};
}

// What a binary op's description holds: its main step and the eltwise steps around it.
struct BinaryState : KernelDesc::State {
  dnnl::binary::primitive_desc pd;
  dnnl::eltwise_forward::primitive_desc reciprocal;  // c / x: x^-1 first (or empty)
  dnnl::eltwise_forward::primitive_desc activation;  // split_activation: after it (or empty)
  bool expanded = false;  // the constant repeated to the destination's shape (see check_binary)
  bool host = false;      // our host loop instead (see check_binary)
};

// The spec with its constant as large as the destination (every broadcast dimension repeated).
KernelSpec with_expanded_constant(const KernelSpec& spec) {
  KernelSpec full = spec;
  auto& a = std::get<graph::BinaryAttrs>(full.attrs);
  a.constant = spec.dsts[0].shape.dims();
  return full;
}

// `c` (of `from` dims, the destination's rank) repeated along its dimensions of 1 to `to`.
std::vector<float> expand(const std::vector<float>& c, const std::vector<int64_t>& from,
                          const std::vector<int64_t>& to) {
  std::vector<float> out(static_cast<size_t>(graph::Shape(to).numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), at = 0, stride = 1;
    for (size_t d = to.size(); d-- > 0;) {
      const int64_t coord = rest % to[d];
      rest /= to[d];
      at += (from[d] == 1 ? 0 : coord) * stride;
      stride *= from[d];
    }
    out[i] = c[static_cast<size_t>(at)];
  }
  return out;
}

// Constants larger than this stay broadcast even where oneDNN has only its reference kernel.
constexpr int64_t kMaxExpandedConstant = int64_t{16} << 20;  // elements

KernelDesc check_binary(const KernelSpec& spec, DnnlContext& ctx) {
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  auto s = std::make_shared<BinaryState>();
  // oneDNN broadcasts only its second source and has no pow or mod: our host loop does those.
  const bool first_broadcast = spec.srcs[0].shape != spec.dsts[0].shape;
  if (first_broadcast || !in_onednn(a.op)) {
    if (!host_binary_applies(spec)) {
      return Support::unsupported(SupportReason::kLayout,
                                  cat("a binary ", graph::to_string(a.op), first_broadcast ? " broadcasting its first operand" : "",
                                      " runs on our host loop: f32 in nchw, nc or plain"));
    }
    s->host = true;
    return described(kHostBinaryImpl, "", 0, std::move(s));
  }
  if (spec.srcs.size() > 1 && spec.srcs[1].layout != spec.dsts[0].layout) {
    return Support::unsupported(SupportReason::kLayout,
                                "sources and destination must have the same layout");
  }
  s->pd = binary_pd(spec, ctx);
  // A broadcast oneDNN 2.6 has no optimised kernel for (Swin's window masks: [1, W, 1, T, T] over
  // [1, W, h, T, T]) runs on a constant repeated to the full shape, made once at build.
  // Not in blocked layouts: there the jit kernel with a post-op (c - x is -(x - c)) is the one
  // split_activation describes, wrong where channels do not fill its vectors.
  if (!a.constant.empty() && is_reference(s->pd.impl_info_str()) &&
      graph::channel_block(spec.dsts[0].layout) == 0 && spec.dsts[0].shape.numel() <= kMaxExpandedConstant) {
    auto full = binary_pd(with_expanded_constant(spec), ctx);
    if (!is_reference(full.impl_info_str())) {
      s->pd = full;
      s->expanded = true;
    }
  }
  // Other such broadcasts (of a second tensor: an efficient linear attention's num / den) run on
  // our host loop where it applies.
  if (is_reference(s->pd.impl_info_str()) && host_binary_applies(spec)) {
    s->host = true;
    return described(kHostBinaryImpl, "", 0, std::move(s));
  }
  size_t workspace = workspace_of(s->pd);
  if (a.constant_first && a.op == BinaryOp::kDiv) {  // dst = x^-1, then dst * c
    s->reciprocal = eltwise_pd(ctx, {{dnnl::algorithm::eltwise_pow, 1.0f, -1.0f}}, md(spec.srcs[0]));
    workspace = std::max(workspace, workspace_of(s->reciprocal));
  }
  if (a.activation != Activation::kNone && split_activation(spec)) {
    s->activation = eltwise_pd(ctx, eltwise_steps(a.activation), md(spec.dsts[0]));
    workspace = std::max(workspace, workspace_of(s->activation));
  }
  const std::string impl = s->pd.impl_info_str();
  const std::string what = cat("a binary ", graph::to_string(a.op), " in ", graph::to_string(spec.dsts[0].layout));
  return described(impl, what, workspace, std::move(s));
}

std::string build_binary(DnnlKernel& k, const KernelSpec& given, const KernelDesc& desc, DnnlContext& ctx) {
  const BinaryState& s = state_of<BinaryState>(desc, given);
  if (s.host) return add_host_binary(k, given);
  const KernelSpec spec = s.expanded ? with_expanded_constant(given) : given;
  const auto& a = std::get<graph::BinaryAttrs>(spec.attrs);
  const memory::desc dst = md(spec.dsts[0]);
  const bool reciprocal_first = static_cast<bool>(s.reciprocal);
  if (reciprocal_first) k.add_eltwise(s.reciprocal, 0, dst_slot(0));
  DnnlKernel::StepSpec step{
      dnnl::binary(s.pd),
      {{DNNL_ARG_SRC_0, reciprocal_first ? dst_slot(0) : 0, reciprocal_first ? dst : md(spec.srcs[0])},
       {DNNL_ARG_DST, dst_slot(0), dst}}};
  if (a.constant.empty()) {
    step.args.push_back({DNNL_ARG_SRC_1, 1, second_md(spec)});
  } else {
    const std::vector<int64_t> shape = graph::constant_shape(a, spec.dsts[0].shape.rank());
    const memory::desc user = plain_md(graph::Shape(shape), graph::DataType::kF32);
    const auto& given_a = std::get<graph::BinaryAttrs>(given.attrs);
    const std::vector<float> data =
        s.expanded ? expand(spec.weights->weight, graph::constant_shape(given_a, shape.size()), shape)
                   : spec.weights->weight;
    step.add_constant(DNNL_ARG_SRC_1, pack(ctx, user, second_md(spec), data));
  }
  k.add(std::move(step), scratch(s.pd));
  if (s.activation) k.add_eltwise(s.activation, dst_slot(0), dst_slot(0));
  return s.pd.impl_info_str();
}

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (spec.kind == OpKind::kBinary) return check_binary(spec, ctx);
  if (Support s = same_layout_support(spec); !s.runnable()) return s;
  const std::string what = cat("add in ", graph::to_string(spec.dsts[0].layout));
  switch (add_route(spec, ctx)) {
    case AddRoute::kHostInt8:
      return described(kHostInt8Add, what);
    case AddRoute::kChain: {
      // Native or not by its first step; named by its last (as build_add names it).
      const auto first = chain_pd(spec, ctx);
      const size_t n = spec.srcs.size();
      KernelDesc desc = described(first.impl_info_str(), what);
      desc.implementation = chain_name((n == 2 ? first : chain_pd(spec, ctx, n - 2)).impl_info_str(), n);
      return desc;
    }
    case AddRoute::kSum:
      break;
  }
  return described(sum_pd(spec, ctx).impl_info_str(), what);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext& ctx) {
  return spec.kind == OpKind::kBinary ? build_binary(k, spec, desc, ctx) : build_add(k, spec, ctx);
}

}  // namespace

const OpFamily kBinaryFamily{"binary", {OpKind::kAdd, OpKind::kBinary}, check, build};

}  // namespace stagecraft::executor::cpu
