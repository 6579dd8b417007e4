// Convolutions on oneDNN: f32 (bias and activation fused as post-ops) and int8 (per-channel i8
// weights, requantisation fused). Grouped convolutions whose groups are narrower than the layout's
// channel block have only oneDNN's reference kernel in blocked layouts (ResNeXt's 4-channel
// groups: 580 ms instead of 0.3 ms); they run as a convolution with fewer, wider groups whose
// weights are block-diagonal (each new group holds several old ones, zeros between them), which
// costs a few times the arithmetic of the narrow groups but runs on the optimised kernels.
// A fused residual (y = act(conv(x) + b + r), graph::fuse_residual_adds) is a binary-add post-op
// reading r where oneDNN has an optimised kernel for that, else an in-place addition after the
// convolution.
// f32 stride-1 3x3, 1xK and Kx1 convolutions run on our Winograd kernels (winograd.h) where they
// beat oneDNN's direct kernel for the same convolution on this machine: both are timed once per
// signature (shapes, layouts, tile, threads) and the verdict is kept in the cache directory
// (KernelChoices), since a rule tuned on one CPU was wrong for some layers on another (against
// AVX2 kernels ours were 1.3-3.2x faster on the models' shapes, bench/winograd_vs_direct; on an
// Intel Xeon with two 512-bit FMA ports they lose to some of oneDNN's AVX-512 kernels).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/strings.h"
#include "executor/cpu/conv_timing.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/host_memory.h"
#include "executor/cpu/kernel_choices.h"
#include "executor/cpu/host_simd.h"
#include "executor/cpu/ops.h"
#include "executor/cpu/winograd.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;

// How the residual input is added.
enum class Residual {
  kNone,    // no residual
  kPostOp,  // a binary-add post-op of the convolution, before the activation
  kStep,    // its own steps after the convolution: add in place, then the activation
  kSum,     // 8 bits: the residual copied into the destination, then a sum post-op (at the
            // residual's scale over the destination's) before the activation
};

// A quantised convolution's residual as a sum post-op: the same shape, layout and byte size as
// the destination (it is copied there), 8 bits. Where not, why not.
std::optional<std::string> no_quantised_sum(const KernelSpec& spec) {
  const graph::TensorDesc &r = spec.srcs[1], &dst = spec.dsts[0];
  if (!graph::is_int8(r.dtype)) return "its residual is not 8-bit";
  if (r.shape != dst.shape || r.layout != dst.layout) {
    return cat("its residual (", r.to_string(), ") differs from its output (", dst.to_string(), ") in shape or layout");
  }
  if (!spec.dst_channel_scales.empty()) return "a merged convolution takes no residual";
  return std::nullopt;
}

memory::dims weight_dims(const graph::Conv2dAttrs& a) {
  return a.groups > 1 ? memory::dims{a.groups, a.out_channels / a.groups, a.in_channels / a.groups,
                                     a.kernel.h, a.kernel.w}
                      : memory::dims{a.out_channels, a.in_channels, a.kernel.h, a.kernel.w};
}

// The primitive descriptor of `spec` computed with `a` (its own attributes, or regrouped ones),
// weights in the layout oneDNN prefers; empty (false) where oneDNN has no implementation for it
// (oneDNN's allow_empty). Throws dnnl::error for descriptors oneDNN finds invalid. A quantised one
// takes its requantisation (only the number of scales matters for a check). `without_amx`:
// oneDNN's first candidate that runs without AMX (empty where there is none but reference ones).
dnnl::convolution_forward::primitive_desc conv_pd(const KernelSpec& spec, const graph::Conv2dAttrs& a,
                                                  const DnnlContext& ctx,
                                                  const Requantisation* quant = nullptr,
                                                  Residual residual = Residual::kNone,
                                                  bool without_amx = false) {
  const bool int8 = quantised(spec.srcs[0]);
  const memory::desc src = md(spec.srcs[0]);
  const memory::desc dst = md(spec.dsts[0]);
  const memory::desc w_any(weight_dims(a), weight_type(spec.srcs[0]), memory::format_tag::any);
  const memory::desc b_md({a.out_channels}, memory::data_type::f32, memory::format_tag::x);
  const memory::dims strides{a.stride.h, a.stride.w};
  const memory::dims dilates{a.dilation.h - 1, a.dilation.w - 1};
  const memory::dims pad_l{a.padding.top, a.padding.left};
  const memory::dims pad_r{a.padding.bottom, a.padding.right};
  const auto d = a.bias ? dnnl::convolution_forward::desc(
                              dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                              src, w_any, b_md, dst, strides, dilates, pad_l, pad_r)
                        : dnnl::convolution_forward::desc(
                              dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                              src, w_any, dst, strides, dilates, pad_l, pad_r);
  dnnl::primitive_attr attr;
  Requantisation unit;
  if (!int8) {
    attr = make_attr();
    dnnl::post_ops ops;
    if (residual == Residual::kPostOp) ops.append_binary(dnnl::algorithm::binary_add, md(spec.srcs[1]));
    if (residual != Residual::kStep) add_activation(ops, a.activation);
    attr.set_post_ops(ops);
  } else {
    if (!quant) unit.output_scales.assign(static_cast<size_t>(a.out_channels), 1.0f);
    const bool sum = residual == Residual::kSum;
    attr = make_quantised_attr(a.activation, quant ? *quant : unit,
                               sum ? spec.srcs[1].scale / spec.dsts[0].scale : 0.0f,
                               sum ? md(spec.srcs[1]).data_type() : memory::data_type::undef);
  }
  dnnl::convolution_forward::primitive_desc pd(d, attr, ctx.engine, /*allow_empty=*/true);
  // While `d` lives: oneDNN's iterator reads it.
  if (without_amx && pd && !skip_implementations(pd, "amx")) return {};
  return pd;
}

std::string describe(const KernelSpec& spec) {
  const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
  return cat("a ", graph::to_string(spec.srcs[0].dtype), a.groups > 1 ? " grouped" : "",
             " convolution reading ", graph::to_string(spec.srcs[0].layout), " and writing ",
             graph::to_string(spec.dsts[0].layout));
}

// The attributes with groups merged `factor` at a time.
graph::Conv2dAttrs regrouped(graph::Conv2dAttrs a, int64_t factor) {
  a.groups /= factor;
  return a;
}

// Candidate merge factors for a grouped (not depthwise-like) convolution in a blocked layout:
// the smallest that make a group's channels whole blocks, then twice that, ... (0: none).
std::vector<int64_t> regroup_factors(const KernelSpec& spec) {
  const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
  const int64_t block = graph::channel_block(spec.srcs[0].layout);
  if (a.groups <= 1 || block == 0) return {};
  const int64_t in_per = a.in_channels / a.groups, out_per = a.out_channels / a.groups;
  if (in_per == 1 && out_per == 1) return {};  // depthwise: oneDNN has kernels for it
  std::vector<int64_t> factors;
  for (int64_t f = 2; f <= a.groups; ++f) {
    if (a.groups % f != 0) continue;
    if ((in_per * f) % block == 0 && (out_per * f) % block == 0) factors.push_back(f);
    if (factors.size() == 2) break;
  }
  return factors;
}

// The goihw weights of `a` regrouped by `factor`: block-diagonal inside each new group.
std::vector<float> regroup_weights(const std::vector<float>& w, const graph::Conv2dAttrs& a,
                                   int64_t factor) {
  const int64_t in_per = a.in_channels / a.groups, out_per = a.out_channels / a.groups;
  const int64_t k = a.kernel.h * a.kernel.w;
  const int64_t new_in = in_per * factor, new_out = out_per * factor;
  std::vector<float> out(static_cast<size_t>(a.out_channels * new_in * k), 0.0f);
  for (int64_t g = 0; g < a.groups; ++g) {
    const int64_t ng = g / factor, part = g % factor;
    for (int64_t o = 0; o < out_per; ++o)
      for (int64_t i = 0; i < in_per; ++i)
        for (int64_t e = 0; e < k; ++e) {
          const int64_t no = ng * new_out + part * out_per + o;  // output channel in the new goihw
          const int64_t ni = part * in_per + i;
          out[static_cast<size_t>((no * new_in + ni) * k + e)] =
              w[static_cast<size_t>(((g * out_per + o) * in_per + i) * k + e)];
        }
  }
  return out;
}

// The attributes a convolution is built with and oneDNN's primitive descriptor for them.
struct Choice {
  graph::Conv2dAttrs attrs;
  dnnl::convolution_forward::primitive_desc pd;  // empty: oneDNN has no implementation
  std::string impl;                              // its name, a regrouping noted
  bool without_amx = false;  // oneDNN's first candidate ran on AMX, and slower than this one
};

// ---- AMX or not ---------------------------------------------------------------------------------

// The cache key of an AMX-or-not choice: what either kernel's speed depends on.
std::string amx_signature(const KernelSpec& spec, const graph::Conv2dAttrs& a, Residual residual,
                          const std::string& amx, const std::string& other) {
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  return cat("conv ", graph::to_string(in.dtype), " ", in.shape.to_string(), " ", graph::to_string(in.layout),
             " -> ", graph::to_string(out.dtype), " ", out.shape.to_string(), " ", graph::to_string(out.layout),
             " k", a.kernel.h, "x", a.kernel.w, " s", a.stride.h, "x", a.stride.w, " g", a.groups, " ",
             graph::to_string(a.activation), residual != Residual::kNone ? " residual" : "", " threads",
             std::max(1, spec.threads), " ", amx, " vs ", other);
}

// `own` (oneDNN's first candidate), or its next candidate that runs without AMX where `own` runs
// on AMX and that one ran faster here (measured once per machine, cached in ctx.choices). AMX's
// tiles pay off on many channels; on few (a network's first layer, depthwise-like groups) or
// small maps its setup can cost more than it saves. Without a cache (tests): oneDNN's choice.
Choice amx_or_not(const KernelSpec& spec, const DnnlContext& ctx, Residual residual, Choice own) {
  if (own.impl.find("amx") == std::string::npos || !ctx.choices) return own;
  const auto other = conv_pd(spec, own.attrs, ctx, nullptr, residual, /*without_amx=*/true);
  if (!other) return own;
  const std::string verdict = ctx.choices->choose(
      amx_signature(spec, own.attrs, residual, own.impl, other.impl_info_str()),
      [&] {
        const memory::desc residual_md = residual == Residual::kPostOp ? md(spec.srcs[1]) : memory::desc();
        return first_kernel_faster(own.pd, other, residual_md, spec.threads, ctx.engine) ? "amx" : "without amx";
      });
  if (verdict == "amx") return own;
  return {own.attrs, other, cat(other.impl_info_str(), " (faster here than ", own.impl, ")"), true};
}

// The op's own attributes when oneDNN has an optimised kernel for them, else a regrouping that
// has one (same result), else the op's own (reference, or none at all: an empty pd). On AMX,
// oneDNN's AMX kernel or its next candidate, whichever ran faster here (amx_or_not).
Choice choose(const KernelSpec& spec, const DnnlContext& ctx, Residual residual) {
  const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
  Choice own{a, conv_pd(spec, a, ctx, nullptr, residual), ""};
  if (!own.pd) return own;
  own.impl = own.pd.impl_info_str();
  if (!is_reference(own.impl)) return amx_or_not(spec, ctx, residual, std::move(own));
  for (int64_t f : regroup_factors(spec)) {
    const graph::Conv2dAttrs r = regrouped(a, f);
    auto pd = conv_pd(spec, r, ctx, nullptr, residual);
    if (pd && !is_reference(pd.impl_info_str())) {
      return {r, pd, cat(pd.impl_info_str(), " (groups ", a.groups, "->", r.groups, ")")};
    }
  }
  return own;
}

// Whether a residual may be a post-op at all: f32, the residual in the destination's layout, and
// (below oneDNN 3) no channel tail in a blocked layout, where oneDNN 2.x's jit binary injector
// has been wrong for us before (see binary_ops.cpp). It is one where oneDNN then has an optimised
// kernel for the convolution with it (describe_direct).
bool post_op_allowed(const KernelSpec& spec) {
  if (quantised(spec.srcs[0]) || spec.srcs[1].layout != spec.dsts[0].layout) return false;
#if DNNL_VERSION_MAJOR < 3
  const int64_t block = graph::channel_block(spec.dsts[0].layout);
  if (block > 0 && spec.dsts[0].shape[1] % block != 0) return false;
#endif
  return true;
}

// ---- Winograd -------------------------------------------------------------------------------

// Bytes of transformed weights beyond which a Winograd kernel waits on memory rather than
// arithmetic (they are read again for every block of tiles): half the last-level cache. Measured
// (AMD EPYC, 32 MB L3, 2 threads): 512->512 channels at 7x7 as F(2x2,3x3), 16.8 MB, ties oneDNN's
// direct kernel and as F(4x4,3x3), 37.7 MB, loses 11%; 448->384 at 8x8, 11 MB, gains 1.47x.
size_t winograd_weight_limit() {
  static const size_t limit = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? static_cast<size_t>(l3) / 2 : size_t{16} << 20;
  }();
  return limit;
}

// Whether our AVX2 Winograd kernels beat oneDNN's direct implementation `impl` (its name). They do
// against AVX2 kernels (bench/winograd_vs_direct: 1.2-2.9x on the models' shapes), and against
// AVX-512 ones where 512-bit FMAs do no more work per cycle than 256-bit ones (AMD Zen 4: 1.1-2.7x,
// bench/results/winograd_vs_direct_zen4.txt); not where they do twice as much (Intel's two
// 512-bit FMA ports: F(4x4,3x3)'s 2.25x fewer multiplications, less its transforms, against twice
// the multiply-adds per cycle).
bool winograd_beats(const std::string& impl) {
  if (impl.find("amx") != std::string::npos) return false;
  return impl.find("avx512") == std::string::npos || host_fma512_gain() < 1.5;
}

// The cache key of a Winograd-or-direct choice: what either kernel's speed depends on.
std::string winograd_signature(const KernelSpec& spec, const WinogradProblem& p, const std::string& direct) {
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  return cat("conv ", in.shape.to_string(), " ", graph::to_string(in.layout), " -> ", out.shape.to_string(),
             " ", graph::to_string(out.layout), " k", p.kernel_h, "x", p.kernel_w, " pad", p.pad_top, ",",
             p.pad_left, " ", graph::to_string(p.activation), p.residual ? " residual" : "", " tile",
             p.tile, " threads", p.threads, " vs ", direct);
}

// Whether our Winograd kernel for `p` ran faster than oneDNN's direct kernel `direct` here: both
// on scratch tensors of the spec's shapes (inputs 0.5, weights 0.01: no denormals), warmed up,
// then five alternating runs each, fastest against fastest. On a thread of its own, with the
// problem's OpenMP threads: a parallel region on the calling thread would leave it an OpenMP
// pool (see DnnlContext::setup), and the thread's pool goes with it.
bool winograd_measured_faster(const KernelSpec& spec, const WinogradProblem& p,
                              const dnnl::convolution_forward::primitive_desc& direct,
                              const DnnlContext& ctx) {
  const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
  const auto fill = [](void* data, size_t bytes, float value) {
    std::fill_n(static_cast<float*>(data), bytes / sizeof(float), value);
  };
  double winograd_ms = 0, direct_ms = 0;
  std::thread timer([&] {
    omp_set_num_threads(p.threads);
    // The larger of our size and oneDNN's for each tensor (blocked layouts pad the channels).
    const size_t src_bytes = std::max(static_cast<size_t>(spec.srcs[0].bytes()), direct.src_desc().get_size());
    const size_t dst_bytes = std::max(static_cast<size_t>(spec.dsts[0].bytes()), direct.dst_desc().get_size());
    // A residual is added by both: ours in its epilogue, oneDNN's as a binary post-op where it
    // takes one (timing the direct kernel without it favoured it on every residual layer).
    dnnl::convolution_forward::primitive_desc timed = direct;
    bool post_op = false;
    if (p.residual && post_op_allowed(spec)) {
      if (auto with_residual = conv_pd(spec, a, ctx, nullptr, Residual::kPostOp)) {
        timed = with_residual;
        post_op = true;
      }
    }
    const size_t residual_bytes = p.residual ? std::max(dst_bytes, md(spec.srcs[1]).get_size()) : sizeof(float);
    HostMemory src = host_allocate(src_bytes), dst = host_allocate(dst_bytes);
    HostMemory residual = host_allocate(residual_bytes);
    fill(src.get(), src_bytes, 0.5f);
    fill(residual.get(), residual_bytes, 0.5f);
    const WinogradConv conv(p, std::vector<float>(static_cast<size_t>(a.out_channels * a.in_channels *
                                                                       a.kernel.h * a.kernel.w), 0.01f),
                            std::vector<float>(static_cast<size_t>(a.bias ? a.out_channels : 0), 0.1f));
    HostMemory workspace = host_allocate(std::max<size_t>(conv.workspace_bytes(), 1));
    const auto run_winograd = [&] {
      conv.run(static_cast<const float*>(src.get()), p.residual ? static_cast<const float*>(residual.get()) : nullptr,
               static_cast<float*>(dst.get()), workspace.get());
    };
    dnnl::stream stream(ctx.engine);
    dnnl::memory weights(timed.weights_desc(), ctx.engine);
    fill(weights.get_data_handle(), timed.weights_desc().get_size(), 0.01f);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(timed.src_desc(), ctx.engine, src.get())},
        {DNNL_ARG_WEIGHTS, weights},
        {DNNL_ARG_DST, dnnl::memory(timed.dst_desc(), ctx.engine, dst.get())}};
    if (a.bias) {
      dnnl::memory bias(timed.bias_desc(), ctx.engine);
      fill(bias.get_data_handle(), timed.bias_desc().get_size(), 0.1f);
      args.emplace(DNNL_ARG_BIAS, bias);
    }
    if (post_op) {
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   dnnl::memory(md(spec.srcs[1]), ctx.engine, residual.get()));
    }
    if (timed.scratchpad_desc().get_size() > 0) {
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(timed.scratchpad_desc(), ctx.engine));
    }
    const dnnl::convolution_forward primitive(timed);
    const auto run_direct = [&] {
      primitive.execute(stream, args);
      stream.wait();
    };
    const auto ms = [](const auto& run) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    run_winograd();
    run_direct();
    winograd_ms = direct_ms = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 5; ++i) {
      winograd_ms = std::min(winograd_ms, ms(run_winograd));
      direct_ms = std::min(direct_ms, ms(run_direct));
    }
  });
  timer.join();
  return winograd_ms < direct_ms;
}

// The Winograd problem of `spec` when it runs as one: Winograd allowed, an f32 stride-1 ungrouped
// undilated 3x3, 1xK or Kx1 (K = 3, 5, 7) convolution in one channel-innermost layout (a residual
// too), at least 9 tiles and transformed weights within winograd_weight_limit(), and ours faster
// than oneDNN's direct kernel for it: measured here (winograd_measured_faster, cached in
// ctx.choices), or by the FMA-width rule (winograd_beats) where the gain is forced (tests) or
// there is no cache; never against an AMX kernel. 3x3: F(2x2,3x3); 1xK / Kx1: F(2, K) along
// the long axis — their rounding error stays near a direct kernel's (tests/executor/
// test_winograd.cpp, WinogradNumerics). With fast tiles (BackendConfig::fast_winograd):
// F(4x4,3x3) when it has 9 tiles, and m from winograd_1d_tile.
std::optional<WinogradProblem> winograd_problem(const KernelSpec& spec, const DnnlContext& ctx) {
  const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
  const bool square = a.kernel == graph::Hw{3, 3};
  const bool line = (a.kernel.h == 1) != (a.kernel.w == 1);
  if (!ctx.winograd || a.groups != 1 || !(square || line) || a.stride != graph::Hw{1, 1} ||
      a.dilation != graph::Hw{1, 1}) {
    return std::nullopt;
  }
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  const auto f32_like = [&](const graph::TensorDesc& d) {
    return d.dtype == graph::DataType::kF32 && d.layout == out.layout && d.shape.rank() == 4 &&
           host_layout_known(d.layout) && d.layout != graph::Layout::kNCHW;
  };
  if (!f32_like(in) || !f32_like(out) || (a.residual && !f32_like(spec.srcs[1]))) return std::nullopt;
  WinogradProblem p;
  p.src = host_layout(in);
  p.dst = host_layout(out);
  p.pad_top = a.padding.top;
  p.pad_left = a.padding.left;
  p.kernel_h = static_cast<int>(a.kernel.h);
  p.kernel_w = static_cast<int>(a.kernel.w);
  p.activation = a.activation;
  p.residual = a.residual;
  p.threads = std::max(1, spec.threads);
  const int64_t h = p.dst.height, w = p.dst.width;
  const auto fits = [&](int64_t points) {
    return static_cast<size_t>(points * a.in_channels * a.out_channels) * sizeof(float) <= winograd_weight_limit();
  };
  if (line) {
    const int taps = static_cast<int>(std::max(a.kernel.h, a.kernel.w));
    const int64_t length = a.kernel.h > 1 ? h : w;
    p.tile = ctx.fast_winograd ? winograd_1d_tile(taps, length) : 2;
    if ((length + p.tile - 1) / p.tile * (a.kernel.h > 1 ? w : h) < 9 || !fits(p.tile + taps - 1)) {
      return std::nullopt;
    }
  } else {
    const auto tiles = [&](int64_t m) { return ((h + m - 1) / m) * ((w + m - 1) / m); };
    if (ctx.fast_winograd && tiles(4) >= 9 && fits(36)) {
      p.tile = 4;
    } else if (tiles(2) >= 9 && fits(16)) {
      p.tile = 2;
    } else {
      return std::nullopt;
    }
  }
  if (!winograd_supported(p)) return std::nullopt;
  const auto direct = conv_pd(spec, a, ctx);
  if (!direct) return std::nullopt;
  const std::string impl = direct.impl_info_str();
  if (impl.find("amx") != std::string::npos) return std::nullopt;
  if (!ctx.choices || fma512_gain_forced()) return winograd_beats(impl) ? std::optional(p) : std::nullopt;
  const std::string verdict = ctx.choices->choose(winograd_signature(spec, p, impl), [&] {
    return winograd_measured_faster(spec, p, direct, ctx) ? "winograd" : "direct";
  });
  return verdict == "winograd" ? std::optional(p) : std::nullopt;
}

// ---- Description and build ----------------------------------------------------------------------

// What a convolution's description holds for its builder.
struct ConvState : KernelDesc::State {
  std::optional<WinogradProblem> winograd;  // set: our Winograd kernel (nothing below is used)
  Residual residual = Residual::kNone;
  Choice choice;  // the attributes and primitive descriptor (int8: with unit output scales)
  dnnl::binary::primitive_desc residual_add;        // Residual::kStep: dst += residual
  dnnl::eltwise_forward::primitive_desc activation;  // Residual::kStep: then the activation (or empty)
};

// The implementation name of a oneDNN convolution described by `s`.
std::string implementation_of(const ConvState& s) {
  if (s.residual == Residual::kStep) {
    return cat(s.choice.impl, " + ", s.residual_add.impl_info_str(), " (residual)");
  }
  if (s.residual == Residual::kPostOp) return cat(s.choice.impl, " (residual post-op)");
  if (s.residual == Residual::kSum) return cat(s.choice.impl, " (residual sum post-op)");
  return s.choice.impl;
}

// A convolution on oneDNN: the residual as a post-op where oneDNN has an optimised kernel with it
// (post_op_allowed), else its own steps; the attributes by choose(). Descriptors oneDNN finds
// invalid throw dnnl::error (the backend's check answers kLibrary).
KernelDesc describe_direct(const KernelSpec& spec, DnnlContext& ctx) {
  const auto& own = std::get<graph::Conv2dAttrs>(spec.attrs);
  auto s = std::make_shared<ConvState>();
  s->residual = own.residual ? (quantised(spec.srcs[0]) ? Residual::kSum : Residual::kStep) : Residual::kNone;
  if (own.residual && post_op_allowed(spec)) {
    s->choice = choose(spec, ctx, Residual::kPostOp);
    if (s->choice.pd && !is_reference(s->choice.impl)) s->residual = Residual::kPostOp;
  }
  if (s->residual != Residual::kPostOp) s->choice = choose(spec, ctx, s->residual);
  if (!s->choice.pd) {
    return Support::unsupported(SupportReason::kLibrary, cat("oneDNN has no convolution for these "
                                                             "descriptors (", describe(spec), ")"));
  }
  size_t workspace = workspace_of(s->choice.pd);
  if (quantised(spec.srcs[0])) {
    workspace = KernelDesc::kUnknownWorkspace;  // the builder's descriptor has the real scales
  } else if (s->residual == Residual::kStep) {
    // dst += residual in place (no post-op: see post_op_allowed), then the activation.
    const memory::desc dst = md(spec.dsts[0]);
    const dnnl::binary::desc add(dnnl::algorithm::binary_add, dst, md(spec.srcs[1]), dst);
    s->residual_add = dnnl::binary::primitive_desc(add, make_attr(), ctx.engine, /*allow_empty=*/true);
    if (!s->residual_add) {
      return Support::unsupported(SupportReason::kLibrary,
                                  cat("oneDNN has no addition of the residual of ", describe(spec)));
    }
    workspace = std::max(workspace, workspace_of(s->residual_add));
    if (own.activation != graph::Activation::kNone) {
      s->activation = eltwise_pd(ctx, eltwise_steps(own.activation), dst);
      workspace = std::max(workspace, workspace_of(s->activation));
    }
  }
  KernelDesc desc = described(s->choice.impl, describe(spec), workspace);
  if (desc.is_native() && s->residual == Residual::kStep && is_reference(s->residual_add.impl_info_str())) {
    // oneDNN 2.6 adds a bf16 residual whose layout differs from the output's by reference (11 ms
    // of a 10 ms DeepLabV3 run): reported, so the plan moves the op to a layout with a native one.
    desc.support = implementation_support(s->residual_add.impl_info_str(),
                                          cat("the residual addition of ", describe(spec)));
  }
  if (!desc.is_native() && quantised(spec.srcs[0])) {
    desc.support.message += "; quantised convolutions run in nhwc";
  }
  desc.implementation = implementation_of(*s);
  // Regrouped by f: each output sums f times its group's inputs, (f - 1) of them times zero.
  const int64_t factor = own.groups / s->choice.attrs.groups;
  desc.extra_macs_per_output = static_cast<double>((factor - 1) * (own.in_channels / own.groups) * own.kernel.h * own.kernel.w);
  desc.state = std::move(s);
  return desc;
}

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (auto p = winograd_problem(spec, ctx)) {
    auto s = std::make_shared<ConvState>();
    s->winograd = p;
    KernelDesc desc(Support::native());
    desc.implementation = winograd_name(*p);
    desc.workspace_bytes = winograd_workspace_bytes(*p);
    desc.state = std::move(s);
    return desc;
  }
  const auto& own = std::get<graph::Conv2dAttrs>(spec.attrs);
  if (own.residual && quantised(spec.srcs[0])) {
    if (auto why = no_quantised_sum(spec)) {
      return Support::unsupported(SupportReason::kDataType, cat("a quantised convolution takes its residual "
                                                                "as a sum post-op, and here ", *why));
    }
  }
  return describe_direct(spec, ctx);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext& ctx) {
  const auto& own = std::get<graph::Conv2dAttrs>(spec.attrs);
  const ConvState& s = state_of<ConvState>(desc, spec);
  if (s.winograd) {
    auto conv = std::make_shared<const WinogradConv>(
        *s.winograd, spec.weights->weight, own.bias ? spec.weights->bias : std::vector<float>{});
    k.reserve_temp(conv->workspace_bytes());
    std::vector<int> slots{0, dst_slot(0), DnnlKernel::kTemp};
    if (own.residual) slots.push_back(1);
    k.add_host([conv](const std::vector<void*>& d) {
      conv->run(static_cast<const float*>(d[0]), d.size() > 3 ? static_cast<const float*>(d[3]) : nullptr,
                static_cast<float*>(d[1]), d[2]);
    }, std::move(slots), conv->name());
    return conv->name();
  }
  const graph::Conv2dAttrs& a = s.choice.attrs;
  const int64_t factor = own.groups / a.groups;
  const std::vector<float> regrouped_w =
      factor > 1 ? regroup_weights(spec.weights->weight, own, factor) : std::vector<float>{};
  const std::vector<float>& weights = factor > 1 ? regrouped_w : spec.weights->weight;
  const memory::desc w_user(weight_dims(a), memory::data_type::f32,
                            a.groups > 1 ? memory::format_tag::goihw : memory::format_tag::oihw);
  if (!quantised(spec.srcs[0])) {
    const auto& pd = s.choice.pd;
    std::vector<DnnlKernel::ArgSpec> extra;
    if (s.residual == Residual::kPostOp) {
      extra.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, 1, md(spec.srcs[1])});
    }
    KernelSpec packed = spec;  // with regrouped weights: the same op, packed at once
    graph::OpWeights w = *spec.weights;
    if (factor > 1) {
      w.weight = regrouped_w;
      packed.weights = &w;
    }
    add_weighted_step(k, ctx, packed, dnnl::convolution_forward(pd), w_user, pd.weights_desc(),
                      scratch(pd), a.bias, nullptr, nullptr, std::move(extra));
    if (s.residual == Residual::kStep) {
      const memory::desc dst = md(spec.dsts[0]);
      k.add({dnnl::binary(s.residual_add),
             {{DNNL_ARG_SRC_0, dst_slot(0), dst},
              {DNNL_ARG_SRC_1, 1, md(spec.srcs[1])},
              {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(s.residual_add));
      if (s.activation) k.add_eltwise(s.activation, dst_slot(0), dst_slot(0));
    }
    return implementation_of(s);
  }
  // Quantised: the descriptor again, with the output scales of the weights quantised now.
  const QuantisedWeights qw = quantise_per_channel(weights, a.out_channels, int8_weight_max(spec.srcs[0]));
  const Requantisation quant =
      requantisation(spec.srcs[0], spec.dsts[0], qw.scales,
                     a.bias ? spec.weights->bias : std::vector<float>{}, spec.dst_channel_scales);
  auto pd = conv_pd(spec, a, ctx, &quant, s.residual, s.choice.without_amx);
  if (!pd) pd = conv_pd(spec, a, ctx, &quant, s.residual);
  if (s.residual == Residual::kSum) {
    // The sum post-op reads the destination: the residual goes there first (memmove: the plan
    // may give both one buffer).
    const size_t bytes = static_cast<size_t>(spec.dsts[0].bytes());
    k.add_host([bytes](const std::vector<void*>& d) { std::memmove(d[1], d[0], bytes); }, {1, dst_slot(0)},
               "residual to the destination");
  }
  add_weighted_step(k, ctx, spec, dnnl::convolution_forward(pd), w_user, pd.weights_desc(),
                    scratch(pd), a.bias, &quant, &qw);
  return implementation_of(s);
}

}  // namespace

const OpFamily kConvolutionFamily{"convolution", {graph::OpKind::kConv2d}, check, build};

}  // namespace stagecraft::executor::cpu
