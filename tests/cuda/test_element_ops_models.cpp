// The CUDA bodies of the op kinds added with PyTorch-exported models (activations, binary ops and
// their broadcasts, reflect pad, space-to-depth, reductions, global max pooling, channel shuffle,
// resize, reshape) against the CPU backend on the host, and their coalescing (see test_element_ops.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cuda/element_ops.h"
#include "executor/cuda/movement_ops.h"
#include "executor/cuda/op_params.h"
#include "executor/kernel_math.h"
#include "executor/op_rules.h"
#include "support/kernels.h"
#include "support/models.h"
#include "support/compare.h"

#include "element_ops_support.h"

namespace stagecraft::executor::cuda {
namespace {

using namespace element_test;  // NOLINT: the shared helpers and their names

// ---- Op kinds added with PyTorch-exported models ----------------------------------------------

// Uniform in [-lo, hi): the breakpoints of hard sigmoid and hard swish (±3) fall inside.
Bytes wide_floats(const TensorDesc& d, uint32_t seed, float lo = -5.f, float hi = 5.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Bytes b(static_cast<size_t>(d.bytes()));
  for (int64_t i = 0; i < d.shape.numel(); ++i) as<float>(b)[i] = u(rng);
  return b;
}

// The largest |got - want| relative to max(1, max |want|).
double relative_difference(const Bytes& got, const Bytes& want, const TensorDesc& d) {
  double scale = 1;
  for (int64_t i = 0; i < d.shape.numel(); ++i) scale = std::max(scale, std::fabs(static_cast<double>(as<float>(want)[i])));
  return max_difference(got, want, d) / scale;
}

TEST(CudaElementOps, StandaloneActivationsMatchTheCpu) {
  graph::HardSigmoidAttrs onnx;  // ONNX's default slope, not PyTorch's
  onnx.alpha = 0.2;
  graph::LeakyReluAttrs leaky;
  leaky.alpha = 0.1;
  graph::ClipAttrs clip;
  clip.min = -0.5;
  clip.max = 0.8;
  const std::pair<OpKind, graph::OpAttrs> kinds[] = {
      {OpKind::kClip, clip},                             {OpKind::kTanh, graph::NoAttrs{}},
      {OpKind::kHardSigmoid, graph::HardSigmoidAttrs{}}, {OpKind::kHardSigmoid, onnx},
      {OpKind::kHardSwish, graph::NoAttrs{}},            {OpKind::kSilu, graph::NoAttrs{}},
      {OpKind::kLeakyRelu, leaky},                       {OpKind::kLeakyRelu, graph::LeakyReluAttrs{}},
      {OpKind::kSigmoid, graph::NoAttrs{}},              {OpKind::kRelu6, graph::NoAttrs{}}};
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    const TensorDesc d = desc(Shape{2, 6, 5, 7}, layout);
    const Bytes x = wide_floats(d, 3);
    for (const auto& [kind, attrs] : kinds) {
      const KernelSpec spec = kernel_spec(kind, attrs, {d}, {d});
      const Bytes want = run_cpu(spec, {x})[0];
      const ActParams a = act_params(spec);
      Bytes got(want.size());
      for (int64_t i = 0; i < d.shape.numel(); ++i) act_at(as<float>(x), as<float>(got), i, a);
      EXPECT_LT(relative_difference(got, want, d), 1e-5)
          << graph::to_string(kind) << " " << graph::to_string(layout) << " " << graph::attrs_signature(attrs);
    }
  }
  // The parameters reach the kernel: a leaky slope of 0.1 is not ReLU, ONNX's hard sigmoid is
  // not PyTorch's.
  const TensorDesc d = desc(Shape{1, 1, 1, 1}, Layout::kNCHW);
  EXPECT_FLOAT_EQ(activate(-2.f, act_params(kernel_spec(OpKind::kLeakyRelu, leaky, {d}, {d}))), -0.2f);
  EXPECT_FLOAT_EQ(activate(1.f, act_params(kernel_spec(OpKind::kHardSigmoid, onnx, {d}, {d}))), 0.7f);
  EXPECT_FLOAT_EQ(activate(2.f, act_params(kernel_spec(OpKind::kClip, clip, {d}, {d}))), 0.8f);
  EXPECT_FLOAT_EQ(activate(-2.f, act_params(kernel_spec(OpKind::kClip, clip, {d}, {d}))), -0.5f);
  EXPECT_FLOAT_EQ(activate(0.25f, act_params(kernel_spec(OpKind::kSqrt, graph::NoAttrs{}, {d}, {d}))), 0.5f);
}

// The fused activations run in every epilogue (conv, linear, add, binary) through activate(); the
// CPU's addition with each fused activation is the reference here.
TEST(CudaElementOps, FusedActivationsMatchTheCpu) {
  const TensorDesc d = desc(Shape{1, 8, 4, 5}, Layout::kNHWC);
  const Bytes a = wide_floats(d, 1, -3.f, 3.f), b = wide_floats(d, 2, -3.f, 3.f);
  for (graph::Activation act : {graph::Activation::kHardSigmoid, graph::Activation::kHardSwish,
                                graph::Activation::kSilu, graph::Activation::kSigmoid, graph::Activation::kRelu6}) {
    graph::AddAttrs attrs;
    attrs.activation = act;
    const KernelSpec spec = kernel_spec(OpKind::kAdd, attrs, {d, d}, {d});
    const Bytes want = run_cpu(spec, {a, b})[0];
    Bytes got(want.size());
    const float* srcs[] = {as<float>(a), as<float>(b)};
    for (int64_t i = 0; i < d.shape.numel(); ++i) add_at(srcs, 2, as<float>(got), i, act_of(act), relu6_bound(d));
    EXPECT_LT(relative_difference(got, want, d), 1e-5) << graph::to_string(act);
  }
}

struct BinaryCase {
  const char* what;
  graph::BinaryAttrs attrs;
  Shape a, b;  // b unused with a constant
  Layout layout;
};

graph::BinaryAttrs binary_attrs(graph::BinaryOp op, std::vector<int64_t> constant = {}, bool first = false,
                                graph::Activation act = graph::Activation::kNone) {
  graph::BinaryAttrs a;
  a.op = op;
  a.constant = std::move(constant);
  a.constant_first = first;
  a.activation = act;
  return a;
}

// Runs binary_at over every destination offset with the operands binary_operands() picks, and
// checks that the packed kernel's body (x read at the destination's offsets) agrees where it runs.
Bytes run_binary_body(const KernelSpec& spec, const std::vector<Bytes>& srcs, const std::vector<float>& constant) {
  const BinaryOperands ops = binary_operands(spec);
  const TensorDesc& y = spec.dsts[0];
  const Dims4 yd = dims_of(y);
  Bytes got(static_cast<size_t>(y.bytes()));
  const float* x = as<float>(srcs[static_cast<size_t>(ops.x_src)]);
  const float* o = ops.o_src < 0 ? constant.data() : as<float>(srcs[static_cast<size_t>(ops.o_src)]);
  for (int64_t i = 0; i < yd.numel(); ++i) binary_at(x, ops.xd, o, ops.od, as<float>(got), yd, ops.params, i);
  if (same_dims(ops.xd, yd)) {
    for (int64_t i = 0; i < yd.numel(); ++i) {
      EXPECT_EQ(binary_with(x[i], o, ops.od, yd, ops.params, i), as<float>(got)[i]) << "packed body, offset " << i;
    }
  }
  return got;
}

TEST(CudaElementOps, BinaryOpsMatchTheCpu) {
  using graph::Activation;
  using graph::BinaryOp;
  const BinaryCase cases[] = {
      {"gate (second operand broadcast)", binary_attrs(BinaryOp::kMul), {2, 8, 5, 5}, {2, 8, 1, 1}, Layout::kNCHW},
      {"gate (second operand broadcast)", binary_attrs(BinaryOp::kMul), {2, 8, 5, 5}, {2, 8, 1, 1}, Layout::kNHWC},
      {"same shapes, relu6", binary_attrs(BinaryOp::kSub, {}, false, Activation::kRelu6), {2, 8, 3, 4}, {2, 8, 3, 4},
       Layout::kNHWC},
      {"row broadcast, hard swish", binary_attrs(BinaryOp::kAdd, {}, false, Activation::kHardSwish), {2, 8, 3, 4},
       {1, 1, 3, 4}, Layout::kNCHW},
      {"same shapes, divide", binary_attrs(BinaryOp::kDiv), {2, 8, 3, 4}, {2, 8, 3, 4}, Layout::kNCHW},
      {"per-channel constant", binary_attrs(BinaryOp::kMul, {1, 8, 1, 1}), {2, 8, 5, 5}, {}, Layout::kNHWC},
      {"lower-rank constant, relu", binary_attrs(BinaryOp::kAdd, {8, 1, 1}, false, Activation::kRelu), {2, 8, 5, 5},
       {}, Layout::kNCHW},
      {"scalar constant first (1 - x)", binary_attrs(BinaryOp::kSub, {1, 1, 1, 1}, true), {2, 8, 5, 5}, {},
       Layout::kNHWC},
      {"constant first (c / x), silu", binary_attrs(BinaryOp::kDiv, {1, 8, 1, 1}, true, Activation::kSilu),
       {2, 8, 5, 5}, {}, Layout::kNCHW},
      {"full constant divisor", binary_attrs(BinaryOp::kDiv, {1, 8, 5, 5}), {2, 8, 5, 5}, {}, Layout::kNHWC},
      {"rank 2 with a constant, hard sigmoid", binary_attrs(BinaryOp::kAdd, {10}, false, Activation::kHardSigmoid),
       {4, 10}, {}, Layout::kNC},
      {"rank 2 column broadcast", binary_attrs(BinaryOp::kMul), {4, 10}, {4, 1}, Layout::kNC},
  };
  for (const BinaryCase& c : cases) {
    const TensorDesc a = desc(c.a, c.layout);
    std::vector<TensorDesc> srcs{a};
    std::vector<Bytes> data{wide_floats(a, 21, 0.5f, 3.f)};  // positive: divisions stay tame
    graph::OpWeights w;
    if (c.attrs.constant.empty()) {
      srcs.push_back(desc(c.b, c.layout));
      data.push_back(wide_floats(srcs[1], 22, 0.5f, 3.f));
    } else {
      int64_t n = 1;
      for (int64_t d : c.attrs.constant) n *= d;
      std::mt19937 rng(23);
      std::uniform_real_distribution<float> u(0.5f, 2.f);
      for (int64_t i = 0; i < n; ++i) w.weight.push_back(u(rng));
    }
    const KernelSpec spec = kernel_spec(OpKind::kBinary, c.attrs, srcs, {desc(c.a, c.layout)}, &w);
    const Bytes want = run_cpu(spec, data)[0];
    const Bytes got = run_binary_body(spec, data, w.weight);
    EXPECT_LT(relative_difference(got, want, spec.dsts[0]), 1e-5) << c.what << " " << graph::to_string(c.layout);
  }
}

// The first (n, c, h, w) of `d` where ok(n, c, h, w) is false, as "n,c,h,w"; "" when none.
template <class F>
std::string first_mismatch(const Dims4& d, F ok) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t h = 0; h < d.h; ++h)
        for (int64_t w = 0; w < d.w; ++w)
          if (!ok(n, c, h, w)) return stagecraft::cat(n, ",", c, ",", h, ",", w);
  return "";
}

// The CPU broadcasts only the second operand; the CUDA kernel reads a broadcast first input as the
// second with the operation swapped, in any mix of layouts. Against direct loops.
TEST(CudaElementOps, BinaryBroadcastsTheFirstOperandInAnyLayouts) {
  for (Layout la : {Layout::kNCHW, Layout::kNHWC}) {
    for (Layout lb : {Layout::kNCHW, Layout::kNHWC}) {
      const TensorDesc a = desc(Shape{2, 8, 1, 1}, la), b = desc(Shape{2, 8, 3, 5}, lb), y = desc(Shape{2, 8, 3, 5}, lb);
      const KernelSpec spec = kernel_spec(OpKind::kBinary, binary_attrs(graph::BinaryOp::kSub), {a, b}, {y});
      const BinaryOperands ops = binary_operands(spec);
      EXPECT_EQ(ops.x_src, 1);
      EXPECT_EQ(ops.o_src, 0);
      EXPECT_TRUE(ops.params.swap);
      const Bytes xa = wide_floats(a, 5), xb = wide_floats(b, 6);
      const Bytes got = run_binary_body(spec, {xa, xb}, {});
      const Dims4 ad = dims_of(a), bd = dims_of(b), yd = dims_of(y);
      EXPECT_EQ(first_mismatch(yd, [&](int64_t n, int64_t c, int64_t h, int64_t x) {
                  return as<float>(got)[offset(yd, n, c, h, x)] ==
                         as<float>(xa)[offset(ad, n, c, 0, 0)] - as<float>(xb)[offset(bd, n, c, h, x)];
                }),
                "")
          << graph::to_string(la) << " - " << graph::to_string(lb);
    }
  }
}

// Both inputs broadcast (rows against columns): neither has the destination's shape, the
// element kernel reads both at broadcast offsets.
TEST(CudaElementOps, BinaryBroadcastsBothOperands) {
  const TensorDesc a = desc(Shape{2, 8, 1, 5}, Layout::kNCHW), b = desc(Shape{2, 8, 3, 1}, Layout::kNHWC);
  const TensorDesc y = desc(Shape{2, 8, 3, 5}, Layout::kNHWC);
  const KernelSpec spec = kernel_spec(OpKind::kBinary, binary_attrs(graph::BinaryOp::kAdd), {a, b}, {y});
  const BinaryOperands ops = binary_operands(spec);
  EXPECT_FALSE(ops.params.swap);
  EXPECT_FALSE(same_dims(ops.xd, dims_of(y)));
  const Bytes xa = wide_floats(a, 7), xb = wide_floats(b, 8);
  const Bytes got = run_binary_body(spec, {xa, xb}, {});
  const Dims4 ad = dims_of(a), bd = dims_of(b), yd = dims_of(y);
  EXPECT_EQ(first_mismatch(yd, [&](int64_t n, int64_t c, int64_t h, int64_t x) {
              return as<float>(got)[offset(yd, n, c, h, x)] ==
                     as<float>(xa)[offset(ad, n, c, 0, x)] + as<float>(xb)[offset(bd, n, c, h, 0)];
            }),
            "");
}

// A squeeze-and-excitation gate in NHWC: the stores, the dense operand's loads and the broadcast
// gate's loads are all coalesced (neighbouring threads are neighbouring channels).
TEST(CudaElementOps, NhwcBroadcastBinaryIsCoalesced) {
  const Dims4 yd = dims(1, 64, 6, 6, true), gd = dims(1, 64, 1, 1, true);
  auto x = traced(yd.numel()), g = traced(gd.numel()), y = traced(yd.numel());
  BinaryParams p;
  const auto body = [&](int64_t i) { binary_at(x.data(), yd, g.data(), gd, y.data(), yd, p, i); };
  EXPECT_LE(segments_per_access(yd.numel(), 4, body, true), 2.0);
  EXPECT_LE(segments_per_access(yd.numel(), 4, body, false), 2.0);
}

// Reflect padding, space to depth and reductions over channels and single axes: the own kernels'
// per-element bodies against the CPU backend, in both CUDA layouts (runs without a GPU).
TEST(CudaElementOps, ReflectPadSpaceToDepthAndReductionsMatchTheCpu) {
  for (const Layout layout : {Layout::kNHWC, Layout::kNCHW}) {
    const TensorDesc x_desc = desc(Shape{2, 6, 8, 4}, layout);
    const Dims4 xd = dims_of(x_desc);
    const Bytes x = random_bytes(x_desc, 9);
    const std::string where = cat("in ", graph::to_string(layout));
    const auto check = [&](const KernelSpec& spec, const std::function<void(float*, const Dims4&, int64_t)>& body,
                           const std::string& what) {
      const Bytes want = run_cpu(spec, {x})[0];
      Bytes got(want.size());
      const Dims4 out = dims_of(spec.dsts[0]);
      for (int64_t i = 0; i < out.numel(); ++i) body(as<float>(got), out, i);
      EXPECT_LT(max_difference(got, want, spec.dsts[0]), 1e-5) << what << " " << where;
    };
    graph::PadAttrs pad;
    pad.pads = graph::Pads{1, 3, 2, 0};
    pad.reflect = true;
    check(kernel_spec(OpKind::kPad, pad, {x_desc}, {desc(Shape{2, 6, 11, 7}, layout)}),
          [&](float* y, const Dims4& out, int64_t i) { reflect_pad_at(as<float>(x), xd, y, out, 1, 3, i); },
          "reflect pad");
    graph::SpaceToDepthAttrs s2d;
    s2d.block = 2;
    check(kernel_spec(OpKind::kSpaceToDepth, s2d, {x_desc}, {desc(Shape{2, 24, 4, 2}, layout)}),
          [&](float* y, const Dims4& out, int64_t i) { space_to_depth_at(as<float>(x), xd, y, out, 2, i); },
          "space to depth");
    const struct {
      OpKind kind;
      ReduceMode mode;
      std::vector<int64_t> axes;
      Shape out;
    } reductions[] = {{OpKind::kReduceMean, ReduceMode::kMean, {1}, Shape{2, 1, 8, 4}},
                      {OpKind::kReduceMax, ReduceMode::kMax, {1}, Shape{2, 1, 8, 4}},
                      {OpKind::kReduceSum, ReduceMode::kSum, {1, 3}, Shape{2, 1, 8, 1}},
                      {OpKind::kReduceMean, ReduceMode::kMean, {2}, Shape{2, 6, 1, 4}}};
    for (const auto& r : reductions) {
      graph::ReduceAttrs a;
      a.axes = r.axes;
      check(kernel_spec(r.kind, a, {x_desc}, {desc(r.out, layout)}),
            [&](float* y, const Dims4& out, int64_t i) { reduce_at(as<float>(x), xd, y, out, r.mode, i); },
            std::string(graph::to_string(r.kind)));
    }
  }
}

TEST(CudaElementOps, GlobalMaxPoolingMatchesTheCpu) {
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    const TensorDesc x_desc = desc(Shape{2, 10, 5, 6}, layout);  // 30 < 32: some lanes read nothing
    const Bytes x = wide_floats(x_desc, 8, -4.f, -1.f);            // all negative: no 0 may win
    const Dims4 xd = dims_of(x_desc);
    const KernelSpec spec =
        kernel_spec(OpKind::kGlobalMaxPool, graph::NoAttrs{}, {x_desc}, {desc(Shape{2, 10, 1, 1}, layout)});
    const Bytes want = run_cpu(spec, {x})[0];
    Bytes per_thread(want.size()), lanes(want.size());
    for (int64_t nc = 0; nc < 20; ++nc) {
      global_max_at(as<float>(x), xd, as<float>(per_thread), nc);
      if (layout == Layout::kNCHW) {
        float m = -FLT_MAX;
        for (int lane = 0; lane < kWarpSize; ++lane) m = std::max(m, plane_partial_max(as<float>(x), xd, nc, lane, kWarpSize));
        as<float>(lanes)[nc] = m;
      }
    }
    EXPECT_EQ(max_difference(per_thread, want, spec.dsts[0]), 0.0) << graph::to_string(layout);
    if (layout == Layout::kNCHW) {
      EXPECT_EQ(max_difference(lanes, want, spec.dsts[0]), 0.0) << "warp lanes";
    }
  }
}

TEST(CudaElementOps, ChannelShuffleMatchesTheCpu) {
  for (int64_t groups : {2, 3, 4}) {
    graph::ChannelShuffleAttrs a;
    a.groups = groups;
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      const TensorDesc d = desc(Shape{2, 12, 5, 6}, layout);
      const Bytes x = wide_floats(d, 9);
      const Bytes want = run_cpu(kernel_spec(OpKind::kChannelShuffle, a, {d}, {d}), {x})[0];
      const Dims4 xd = dims_of(d);
      Bytes got(want.size());
      for (int64_t i = 0; i < xd.numel(); ++i) channel_shuffle_at(as<float>(x), xd, as<float>(got), xd, groups, i);
      EXPECT_EQ(max_difference(got, want, d), 0.0) << "groups " << groups << " " << graph::to_string(layout);
      // NCHW: whole planes (30 floats = 120 bytes: 8-byte units); NHWC has no planes.
      Bytes planes(want.size());
      const ShufflePlanes r = plan_shuffle_planes(4, xd, reinterpret_cast<uintptr_t>(x.data()), xd,
                                                  reinterpret_cast<uintptr_t>(planes.data()), groups);
      if (layout == Layout::kNHWC) {
        EXPECT_EQ(r.unit, 0);
        continue;
      }
      ASSERT_EQ(r.unit, 8);
      for (int64_t i = 0; i < r.units(); ++i) shuffle_planes_at(as<Bytes8>(x), as<Bytes8>(planes), r, i);
      EXPECT_EQ(planes, want) << "planes, groups " << groups;
    }
    // Between layouts (the element kernel reads each tensor in its own): the NCHW result, transposed.
    const TensorDesc s = desc(Shape{2, 12, 5, 6}, Layout::kNCHW), t = desc(Shape{2, 12, 5, 6}, Layout::kNHWC);
    const Bytes x = wide_floats(s, 10);
    const Bytes nchw = run_cpu(kernel_spec(OpKind::kChannelShuffle, a, {s}, {s}), {x})[0];
    const Dims4 sd = dims_of(s), td = dims_of(t);
    Bytes got(nchw.size());
    for (int64_t i = 0; i < td.numel(); ++i) channel_shuffle_at(as<float>(x), sd, as<float>(got), td, groups, i);
    for (int64_t i = 0; i < sd.numel(); ++i) {
      const Coords p = coords_at(sd, i);
      ASSERT_EQ(as<float>(got)[offset(td, p.n, p.c, p.h, p.w)], as<float>(nchw)[i]) << "nchw -> nhwc, groups " << groups;
    }
  }
}

// Resize: nearest x2, bilinear to a size that is no multiple (up in W, down in H), in both
// layouts and between them, against the CPU's kernel.
TEST(CudaElementOps, ResizeMatchesTheCpu) {
  graph::ResizeAttrs nearest;
  nearest.size = {10, 12};
  nearest.scale_h = nearest.scale_w = 2;
  graph::ResizeAttrs linear;
  linear.size = {3, 13};
  linear.scale_h = 3.0 / 5.0;
  linear.scale_w = 13.0 / 6.0;
  linear.linear = true;
  for (const graph::ResizeAttrs& a : {nearest, linear}) {
    for (Layout from : {Layout::kNCHW, Layout::kNHWC}) {
      for (Layout to : {Layout::kNCHW, Layout::kNHWC}) {
        const TensorDesc s = desc(Shape{2, 5, 5, 6}, from), d = desc(Shape{2, 5, a.size.h, a.size.w}, to);
        const Bytes x = wide_floats(s, 11);
        const Bytes want = run_cpu(kernel_spec(OpKind::kResize, a, {s}, {d}), {x})[0];
        const Dims4 sd = dims_of(s), dd = dims_of(d);
        Bytes got(want.size());
        for (int64_t i = 0; i < dd.numel(); ++i) {
          resize_at(as<float>(x), sd, as<float>(got), dd, a.scale_h, a.scale_w, a.linear, i);
        }
        EXPECT_LT(max_difference(got, want, d), 1e-5)
            << (a.linear ? "bilinear " : "nearest ") << graph::to_string(from) << " -> " << graph::to_string(to);
      }
    }
  }
}

TEST(CudaElementOps, ReshapeMatchesTheCpuAcrossLayoutsAndRanks) {
  struct Case {
    Shape in, out;
    Layout in_layout, out_layout;
    bool flat_copy;  // both memory orders plain: the launcher copies the bytes
  };
  const Case cases[] = {
      {{2, 12, 1, 1}, {2, 12}, Layout::kNHWC, Layout::kNC, true},  // a pooled NHWC tensor is plain
      {{2, 12, 5, 6}, {2, 360}, Layout::kNHWC, Layout::kNC, false},
      {{2, 360}, {2, 12, 5, 6}, Layout::kNC, Layout::kNHWC, false},
      {{2, 12, 5, 6}, {2, 6, 5, 12}, Layout::kNCHW, Layout::kNHWC, false},
      {{2, 12, 5, 6}, {2, 6, 5, 12}, Layout::kNHWC, Layout::kNHWC, false},
      {{2, 12, 5, 6}, {2, 360, 1, 1}, Layout::kNCHW, Layout::kNHWC, true},
      {{2, 12, 5, 6}, {2, 360}, Layout::kNCHW, Layout::kNC, true},
  };
  for (const Case& c : cases) {
    graph::ReshapeAttrs a;
    a.dims.assign(c.out.dims().begin() + 1, c.out.dims().end());
    const TensorDesc in = desc(c.in, c.in_layout), out = desc(c.out, c.out_layout);
    const Bytes x = wide_floats(in, 12);
    const Bytes want = run_cpu(kernel_spec(OpKind::kReshape, a, {in}, {out}), {x})[0];
    const Dims4 xd = dims_of(in), yd = dims_of(out);
    Bytes got(want.size());
    for (int64_t i = 0; i < yd.numel(); ++i) reshape_at(as<float>(x), xd, as<float>(got), yd, i);
    const std::string what = c.in.to_string() + " " + std::string(graph::to_string(c.in_layout)) + " -> " +
                             c.out.to_string() + " " + std::string(graph::to_string(c.out_layout));
    EXPECT_EQ(max_difference(got, want, out), 0.0) << what;
    EXPECT_EQ(plain_order(xd) && plain_order(yd), c.flat_copy) << what;
    if (c.flat_copy) {
      EXPECT_EQ(got, x) << what << ": the flat copy moves the bytes unchanged";
    }
  }
}

// The new kinds have no 8-bit form in the int8 contract that every backend shares (the CUDA
// backend applies it before its families): the reason is typed and says what to do.
TEST(CudaElementOps, NewKindsAreRefusedInInt8ByTheSharedContract) {
  const TensorDesc q = desc(Shape{1, 8, 4, 4}, Layout::kNHWC, DataType::kU8, 0.05f);
  graph::ChannelShuffleAttrs shuffle;
  shuffle.groups = 2;
  graph::ReshapeAttrs flat;
  flat.dims = {128};
  const std::pair<OpKind, graph::OpAttrs> kinds[] = {
      {OpKind::kHardSigmoid, graph::HardSigmoidAttrs{}}, {OpKind::kHardSwish, graph::NoAttrs{}},
      {OpKind::kSilu, graph::NoAttrs{}},                 {OpKind::kLeakyRelu, graph::LeakyReluAttrs{}},
      {OpKind::kBinary, binary_attrs(graph::BinaryOp::kMul, {1, 8, 1, 1})},
      {OpKind::kGlobalMaxPool, graph::NoAttrs{}},        {OpKind::kChannelShuffle, shuffle},
      {OpKind::kReshape, flat}};
  for (const auto& [kind, attrs] : kinds) {
    const Support s = quantised_support(kernel_spec(kind, attrs, {q}, {q}));
    EXPECT_EQ(s.reason, SupportReason::kQuantisation) << graph::to_string(kind);
    EXPECT_NE(s.message.find("dequantise"), std::string::npos) << s.message;
  }
}

}  // namespace
}  // namespace stagecraft::executor::cuda
