// Layouts on the CPU: every layout gives the NCHW result (channel counts that do not fill blocks,
// every network), no kernel writes outside its buffer (guard bytes), reference-only kernels are
// run in a layout with a native kernel and reported, and grouped convolutions never fall to the
// reference kernel. PlanRun on the machine's ISA and again capped at AVX2 (ctest entries "*/avx2").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/strings.h"
#include "executor/cpu/dnnl_kernel.h"
#include "executor/executor.h"
#include "networks/builder.h"
#include "reference.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using graph::Layout;
using stagecraft::testing::Model;
using RK = PlanOptions::ReferenceKernels;

constexpr double kTolerance = 1e-5;
constexpr size_t kGuardBytes = 256;
constexpr auto& cpu = stagecraft::testing::cpu_backend;

scheduler::Schedule sequential(const graph::Graph& g) {
  return stagecraft::testing::analytic_schedule(g, scheduler::Strategy::kSequential);
}

struct PlanRun {
  std::vector<HostTensor> outputs;
  std::vector<LayoutFallback> fallbacks;
  std::vector<std::string> damaged;  // guards overwritten
  std::vector<std::string> implementations;
};

PlanRun run(const Model& m, const scheduler::Schedule& s, Layout layout, RK reference) {
  PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(layout);
  options.reference_kernels = reference;
  options.guard_bytes = kGuardBytes;
  options.reuse_memory = false;  // every tensor its own buffer: a guard right after each
  ExecutionPlan plan(m.graph, s, m.weights, cpu(), options);
  Executor executor(plan);
  PlanRun r;
  r.outputs = executor.run(stagecraft::testing::inputs_of(m.graph));
  plan.guards_intact(&r.damaged);
  r.fallbacks = plan.fallbacks();
  for (const PlannedKernel& k : plan.kernels()) r.implementations.push_back(k.label + ": " + k.kernel->implementation());
  return r;
}

void expect_same(const PlanRun& got, const std::vector<HostTensor>& want, const std::string& where) {
  ASSERT_EQ(got.outputs.size(), want.size()) << where;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LT(relative_error(got.outputs[i], want[i]), kTolerance) << where << ", output " << i;
  }
  EXPECT_TRUE(got.damaged.empty()) << where << ": a kernel wrote past the end of "
                                   << join(got.damaged, ", ");
}

bool native_layout(Layout l) {
  const auto& layouts = cpu().capabilities().layouts;
  return std::find(layouts.begin(), layouts.end(), l) != layouts.end();
}

// oneDNN 2.6's binary kernel with an eltwise post-op wrote past its destination and computed wrong
// values in nChw16c with 78 or 308 channels on AVX2; reference kernels must be right too.
TEST(LayoutKernels, ChannelTailsGiveTheNchwResultInEveryLayoutWithoutWritingOutside) {
  struct Case {
    int64_t width, size;
  };
  for (const Case c : {Case{12, 7}, Case{78, 6}, Case{308, 4}}) {
    const Model m = stagecraft::testing::model_of(stagecraft::testing::channel_tail_graph(1, c.width, c.size));
    const scheduler::Schedule s = sequential(m.graph);
    const PlanRun want = run(m, s, Layout::kNCHW, RK::kAllow);
    EXPECT_TRUE(want.damaged.empty()) << join(want.damaged, ", ");
    for (Layout layout : {Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
      for (RK reference : {RK::kAllow, RK::kAvoid}) {
        const std::string where = cat(c.width, " channels in ", graph::to_string(layout),
                                      reference == RK::kAllow ? " (reference kernels allowed)" : "");
        expect_same(run(m, s, layout, reference), want.outputs, where);
      }
    }
  }
}

TEST(LayoutKernels, ReferenceOnlyKernelsRunInANativeLayoutAndAreReported) {
  const Model m = stagecraft::testing::model_of(stagecraft::testing::channel_tail_graph(1, 20, 6));
  const scheduler::Schedule s = sequential(m.graph);
  const PlanRun want = run(m, s, Layout::kNCHW, RK::kAllow);
  for (Layout layout : {Layout::kNChw8c, Layout::kNChw16c, Layout::kNHWC}) {
    const PlanRun got = run(m, s, layout, RK::kAvoid);
    expect_same(got, want.outputs, std::string(graph::to_string(layout)));
    // Nothing runs by reference where the backend lists the layout as native.
    for (const std::string& impl : got.implementations) {
      EXPECT_EQ(impl.find(": ref"), std::string::npos) << graph::to_string(layout) << ": " << impl;
    }
    if (native_layout(layout)) {
      // The grouped convolution with 4-channel groups has only a reference kernel in blocked
      // layouts; it is regrouped (wider groups, block-diagonal weights) instead of moved.
      for (const LayoutFallback& f : got.fallbacks) {
        ADD_FAILURE() << graph::to_string(layout) << " is native here, yet '" << f.op
                      << "' moved: " << f.reason;
      }
    } else {
      // A layout without native kernels on this ISA (nChw16c below AVX-512): convolutions move to
      // a native layout, each reported with the backend's reason.
      ASSERT_FALSE(got.fallbacks.empty()) << graph::to_string(layout);
      for (const LayoutFallback& f : got.fallbacks) {
        EXPECT_EQ(f.wanted, layout);
        ASSERT_TRUE(f.used.has_value()) << f.op;
        EXPECT_TRUE(native_layout(*f.used)) << f.op;
        EXPECT_NE(f.reason.find("reference"), std::string::npos) << f.reason;
      }
      PlanOptions refuse;
      refuse.layouts = graph::LayoutAssignment::uniform(layout);
      refuse.reference_kernels = RK::kRefuse;
      EXPECT_THROW(ExecutionPlan(m.graph, s, m.weights, cpu(), refuse), BackendError);
    }
  }
}

// The op kinds of PyTorch-exported models (hard sigmoid, hard swish, SiLU, squeeze-and-excitation,
// binary ops with constants, channel shuffle, global max pool, reshapes) equal the reference
// loops in every layout, batch 1 and 2, channels filling blocks or not.
// Additions with a fused activation whose channels fill nChw8c's blocks but not AVX-512's 16
// lanes (8, 24, 312): oneDNN 2.6's binary kernel with a post-op computed wrong values there and
// wrote up to 768 bytes past its destination (AMD Zen 4), in place or not.
TEST(LayoutKernels, AdditionsWithActivationsOfEveryChannelCountStayInsideTheirTensors) {
  for (int64_t width : {8, 16, 24, 40, 312}) {
    for (int64_t size : {1, 2, 5}) {
      networks::NetBuilder b("adds", 2, 3, size, size);
      auto x = b.relu(b.conv(b.input(), networks::square_conv(width, 3, 1, 1, true), "stem"), "stem_relu");
      auto mp = b.max_pool(x, 3, 1, 1, false, "maxpool");
      auto ap = b.avg_pool(x, 3, 1, 1, /*count_include_pad=*/false, false, "avgpool");
      auto sum = b.relu(b.add({mp, ap}, "add"), "add_relu");          // src0 != dst
      auto again = b.relu(b.add({sum, ap, mp}, "add3"), "add3_relu");  // a chain in place, or a sum
      const Model m = stagecraft::testing::model_of(std::move(b).finish({again}));
      const scheduler::Schedule s = sequential(m.graph);
      const PlanRun want = run(m, s, Layout::kNCHW, RK::kAllow);
      for (Layout layout : {Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
        expect_same(run(m, s, layout, RK::kAllow), want.outputs,
                    cat(width, " channels at ", size, "x", size, " in ", graph::to_string(layout)));
      }
    }
  }
}

// AVX-512 is a bit of oneDNN's ISA value, not a threshold: avx2_vnni (Intel's AVX2-only cores
// with AVX-VNNI) is numerically above avx512_core; compared by value, such a CPU took nChw16c as
// its native layout, which has only reference convolutions without AVX-512.
TEST(LayoutKernels, Avx512IsABitOfTheIsaNotAnOrder) {
  using dnnl::cpu_isa;
  for (cpu_isa isa : {cpu_isa::avx512_core, cpu_isa::avx512_core_vnni, cpu_isa::avx512_core_bf16,
                      cpu_isa::avx512_core_amx}) {
    EXPECT_TRUE(cpu::isa_has_avx512(isa)) << static_cast<int>(isa);
  }
  for (cpu_isa isa : {cpu_isa::sse41, cpu_isa::avx, cpu_isa::avx2, cpu_isa::avx2_vnni}) {
    EXPECT_FALSE(cpu::isa_has_avx512(isa)) << static_cast<int>(isa);
  }
  const bool avx512 = cpu::isa_has_avx512(dnnl::get_effective_cpu_isa());
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  if (cap && std::string(cap) == "AVX2") {
    EXPECT_FALSE(avx512) << "DNNL_MAX_CPU_ISA=AVX2 must hold";
  }
  EXPECT_EQ(cpu().preferred_layout(graph::DataType::kF32), avx512 ? Layout::kNChw16c : Layout::kNChw8c);
}

TEST(LayoutKernels, ModernOpsEqualTheReferenceInEveryLayout) {
  for (int64_t batch : {1, 2}) {
    for (int64_t width : {16, 12}) {
      const Model m = stagecraft::testing::model_of(stagecraft::testing::modern_ops_graph(batch, width));
      const auto inputs = stagecraft::testing::inputs_of(m.graph);
      const auto want = testing::reference_run(m.graph, m.weights, inputs);
      const scheduler::Schedule s = sequential(m.graph);
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
        for (RK reference : {RK::kAllow, RK::kAvoid}) {
          const std::string where = cat("batch ", batch, ", ", width, " channels, ",
                                        graph::to_string(layout),
                                        reference == RK::kAllow ? " (reference kernels allowed)" : "");
          expect_same(run(m, s, layout, reference), want, where);
        }
      }
    }
  }
}

// The GPU tests' squeeze-and-excitation graph (standalone activations, a constant-first
// subtraction with a fused hard sigmoid, shuffles; unprepared) on the CPU equals the reference:
// the CPU is what the GPU tests compare against.
TEST(LayoutKernels, SeBlockGraphEqualsTheReferenceInEveryLayout) {
  for (int64_t batch : {1, 2}) {
    const graph::Graph raw = stagecraft::testing::se_block_graph(batch);
    const Model m{raw, graph::random_weights(raw, 4)};
    const auto want = testing::reference_run(m.graph, m.weights, stagecraft::testing::inputs_of(m.graph));
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
      expect_same(run(m, sequential(m.graph), layout, RK::kAllow), want, cat("batch ", batch, ", ", graph::to_string(layout)));
    }
  }
}

// Runs `m` sequentially in nchw, nhwc, nChw8c and nChw16c: each equals the reference loops and
// `expected_kernels(layout, run)` holds (the kernel under test is the one that ran).
template <class Check>
void for_every_host_layout(const Model& m, const std::string& what, Check expected_kernels) {
  const auto want = testing::reference_run(m.graph, m.weights, stagecraft::testing::inputs_of(m.graph));
  const scheduler::Schedule s = sequential(m.graph);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
    const std::string where = cat(what, ", ", graph::to_string(layout));
    const PlanRun got = run(m, s, layout, RK::kAvoid);
    expect_same(got, want, where);
    EXPECT_TRUE(expected_kernels(layout, got)) << where << ": not the kernels expected:\n  "
                                               << join(got.implementations, "\n  ");
  }
}

// Resizes (nearest x2 as in HRNet's fusions, bilinear to a size that is no multiple) equal the
// reference loops in every layout, channels filling blocks or not, batch 1 and 2, with the
// padding lanes of blocked layouts zero for the convolution after them.
TEST(LayoutKernels, ResizesEqualTheReferenceInEveryLayout) {
  for (int64_t batch : {1, 2}) {
    for (int64_t width : {16, 12}) {
      networks::NetBuilder b("resizes", batch, 3, 7, 6);
      auto x = b.conv(b.input(), networks::square_conv(width, 3, 1, 1, true), "stem");
      graph::ResizeAttrs nearest;
      nearest.size = {14, 12};
      nearest.scale_h = nearest.scale_w = 2;
      auto up = b.op("nearest", graph::OpKind::kResize, nearest, {x});
      auto mixed = b.conv(up, networks::square_conv(width, 3, 1, 1, true), "mix");
      graph::ResizeAttrs linear;
      linear.size = {9, 17};
      linear.scale_h = 9.0 / 14.0;
      linear.scale_w = 17.0 / 12.0;
      linear.linear = true;
      auto smooth = b.op("bilinear", graph::OpKind::kResize, linear, {mixed});
      graph::ResizeAttrs cubic;  // down in H, up in W (CrossViT's 240 -> 224 input; upsampling)
      cubic.size = {5, 23};
      cubic.scale_h = 5.0 / 9.0;
      cubic.scale_w = 23.0 / 17.0;
      cubic.cubic = true;
      graph::ResizeAttrs corners = linear;  // align_corners (DPT's fusion stages), up in both
      corners.size = {11, 40};
      corners.scale_h = 11.0 / 5.0;
      corners.scale_w = 40.0 / 23.0;
      corners.align_corners = true;
      auto aligned = b.op("aligned", graph::OpKind::kResize, corners, {b.op("bicubic", graph::OpKind::kResize, cubic, {smooth})});
      auto out = b.conv(aligned, networks::square_conv(4, 1), "head");
      const Model m = stagecraft::testing::model_of(std::move(b).finish({out}));
      for_every_host_layout(m, cat("batch ", batch, ", ", width, " channels"), [](Layout, const PlanRun& got) {
        const auto count = [&](const char* name) {
          return std::count_if(got.implementations.begin(), got.implementations.end(),
                               [&](const std::string& i) { return i.find(name) != std::string::npos; });
        };
        return count("resize bilinear") == 2 && count("resize bicubic") == 1;
      });
    }
  }
}

// Max pooling (our own kernel in nhwc, nChw8c and nChw16c; oneDNN's in nchw) equals the reference
// loops: odd sizes with ceil_mode (a last window that passes the input), padding on every side,
// asymmetric windows and strides; channel counts that fill blocks, leave a tail in a block, and
// (nhwc) runs longer than the 32 lanes the kernel takes at a time.
TEST(LayoutKernels, MaxPoolsEqualTheReferenceInEveryLayout) {
  for (int64_t batch : {1, 2}) {
    for (int64_t width : {16, 12, 40}) {
      networks::NetBuilder b("max pools", batch, 3, 15, 13);
      auto x = b.conv(b.input(), networks::square_conv(width, 3, 1, 1, true), "stem");
      auto p1 = b.max_pool(x, 3, 2, 0, true, "ceil");      // 15x13 -> 7x6, last window clipped
      auto p2 = b.max_pool(p1, 3, 1, 1, false, "padded");  // windows over the border
      graph::MaxPoolAttrs odd;
      odd.kernel = {2, 3};
      odd.stride = {1, 2};
      odd.padding = {1, 0, 0, 1};  // top, left, bottom, right
      auto p3 = b.op("odd", graph::OpKind::kMaxPool, odd, {p2});
      auto out = b.conv(p3, networks::square_conv(4, 1), "head");
      const Model m = stagecraft::testing::model_of(std::move(b).finish({out}));
      for_every_host_layout(m, cat("batch ", batch, ", ", width, " channels"), [](Layout layout, const PlanRun& got) {
        const auto ours = std::count_if(got.implementations.begin(), got.implementations.end(),
                                        [](const std::string& i) { return i.find("max pool (ours)") != std::string::npos; });
        return ours == (layout == Layout::kNCHW ? 0 : 3);
      });
    }
  }
}

// Max pooling keeps NaN, as PyTorch's does: an output whose window holds a NaN is NaN, the
// others are the max; in every channel-innermost layout, channels filling blocks or not.
TEST(LayoutKernels, MaxPoolsKeepNaNInEveryLayout) {
  constexpr int64_t kSize = 9, kOut = 5;  // 3x3 windows, stride 2, padding 1
  for (int64_t width : {16, 12}) {
    networks::NetBuilder b("nan pool", 1, width, kSize, kSize);
    auto y = b.max_pool(b.input(), 3, 2, 1, false, "pool");
    const Model m = stagecraft::testing::model_of(std::move(b).finish({y}));
    HostTensor x = random_host_tensor(graph::Shape{1, width, kSize, kSize}, 11);
    auto at = [&](int64_t c, int64_t h, int64_t w) -> float& {
      return x.data[static_cast<size_t>((c * kSize + h) * kSize + w)];
    };
    at(0, 0, 0) = NAN;                         // first window of channel 0
    at(3, 4, 4) = NAN;                         // the middle: four windows of channel 3
    at(width - 1, kSize - 1, kSize - 2) = NAN;  // the last row, one column in: two windows
    for (Layout layout : {Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
      PlanOptions options;
      options.layouts = graph::LayoutAssignment::uniform(layout);
      ExecutionPlan plan(m.graph, sequential(m.graph), m.weights, cpu(), options);
      Executor executor(plan);
      const std::vector<HostTensor> got = executor.run({x});
      ASSERT_EQ(got.size(), 1u);
      const std::string where = cat(width, " channels, ", graph::to_string(layout));
      for (int64_t c = 0; c < width; ++c) {
        for (int64_t oy = 0; oy < kOut; ++oy) {
          for (int64_t ox = 0; ox < kOut; ++ox) {
            bool nan = false;
            float best = -INFINITY;
            for (int64_t h = std::max<int64_t>(0, 2 * oy - 1); h < std::min(kSize, 2 * oy + 2); ++h) {
              for (int64_t w = std::max<int64_t>(0, 2 * ox - 1); w < std::min(kSize, 2 * ox + 2); ++w) {
                nan = nan || std::isnan(at(c, h, w));
                if (!std::isnan(at(c, h, w))) best = std::max(best, at(c, h, w));
              }
            }
            const float v = got[0].data[static_cast<size_t>((c * kOut + oy) * kOut + ox)];
            if (nan) {
              EXPECT_TRUE(std::isnan(v)) << where << ": channel " << c << " at " << oy << "," << ox;
            } else {
              EXPECT_EQ(v, best) << where << ": channel " << c << " at " << oy << "," << ox;
            }
          }
        }
      }
    }
  }
}

// Residual additions fused into convolutions (ResNet shortcuts: act(conv(x) + b + r)) equal the
// reference loops in every layout, channels filling blocks or not, with the residual in the
// destination's layout (a binary post-op where oneDNN has an optimised kernel for it) and in
// another (an addition after the convolution). The post-op is really used where it can be.
TEST(LayoutKernels, FusedResidualsEqualTheReferenceInEveryLayout) {
  for (int64_t width : {16, 12}) {
    networks::NetBuilder b("residual", 1, width, 9, 9);
    const auto x = b.relu(b.input(), "x");
    const auto c1 = b.conv(x, networks::square_conv(width, 3, 1, 1, true), "c1");
    const auto sum1 = b.relu(b.add({c1, x}, "add1"), "relu1");  // x is read twice: kept
    const auto c2 = b.conv(sum1, networks::square_conv(width, 1, 1, 0, false), "c2");
    const auto sum2 = b.add({sum1, c2}, "add2");  // conv operand second, no activation
    const Model m = stagecraft::testing::model_of(std::move(b).finish({sum2}), 5);
    size_t residual_convs = 0;
    for (const graph::Op& op : m.graph.ops()) {
      EXPECT_NE(op.kind, graph::OpKind::kAdd) << op.name << " was not fused";
      if (op.kind == graph::OpKind::kConv2d && op.attrs_as<graph::Conv2dAttrs>().residual) ++residual_convs;
    }
    EXPECT_EQ(residual_convs, 2u);
    const auto inputs = stagecraft::testing::inputs_of(m.graph);
    const auto want = testing::reference_run(m.graph, m.weights, inputs);
    const scheduler::Schedule s = sequential(m.graph);
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
      const std::string where = cat(width, " channels, ", graph::to_string(layout));
      const PlanRun got = run(m, s, layout, RK::kAvoid);
      expect_same(got, want, where);
      const bool tail = graph::channel_block(layout) > 0 && width % graph::channel_block(layout) != 0;
      if (native_layout(layout) && !tail) {
        size_t fused = 0;
        for (const std::string& impl : got.implementations) {
          if (impl.rfind("c1:", 0) == 0 || impl.rfind("c2:", 0) == 0) {
            EXPECT_NE(impl.find("residual post-op"), std::string::npos) << where << ": " << impl;
            ++fused;
          }
        }
        EXPECT_EQ(fused, 2u) << where;
      }
    }
    // The residual in another layout than the convolution's output.
    PlanOptions mixed;
    std::vector<Layout> by_value(m.graph.num_values(), Layout::kNCHW);
    for (const graph::Op& op : m.graph.ops()) {
      if (op.kind == graph::OpKind::kConv2d) by_value[op.outputs[0]] = Layout::kNHWC;
    }
    mixed.layouts = graph::LayoutAssignment::per_value(m.graph, by_value);
    ExecutionPlan plan(m.graph, s, m.weights, cpu(), mixed);
    Executor executor(plan);
    const auto got = executor.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(relative_error(got[0], want[0]), kTolerance) << width << " channels, mixed layouts";
  }
}

TEST(LayoutKernels, GroupedConvolutionsNeverRunTheReferenceKernel) {
  const Model m = stagecraft::testing::model_of(stagecraft::testing::channel_tail_graph(1, 16, 8));
  const scheduler::Schedule s = sequential(m.graph);
  for (Layout layout : cpu().capabilities().layouts) {
    const PlanRun got = run(m, s, layout, RK::kAllow);  // no fallback: the kernel itself must be native
    bool found = false;
    for (const std::string& impl : got.implementations) {
      if (impl.rfind("grouped:", 0) != 0) continue;
      found = true;
      EXPECT_EQ(impl.find("ref"), std::string::npos) << graph::to_string(layout) << ": " << impl;
    }
    EXPECT_TRUE(found);
  }
}

// Grouped convolutions whose groups do not fill nChw16c's blocks: regrouped there (fewer, larger
// groups, block-diagonal weights), which costs (factor - 1) x the group's inputs x taps extra
// multiply-adds per output. RegNetX's 56-channel groups (504 extra per output) run converted in a
// layout with a native kernel instead; ResNeXt's 8-channel groups (72) stay regrouped.
TEST(LayoutKernels, RegroupedConvolutionsWithMuchExtraArithmeticRunConverted) {
  if (!native_layout(Layout::kNChw16c)) GTEST_SKIP() << "nChw16c has no native kernels on this ISA (below AVX-512)";
  networks::NetBuilder b("regrouped", 1, 3, 9, 9);
  const auto stem = b.conv(b.input(), networks::square_conv(112, 1), "stem");
  networks::ConvSpec wide = networks::square_conv(112, 3, 1, 1);
  wide.groups = 2;  // 56 channels per group
  networks::ConvSpec narrow = networks::square_conv(112, 3, 1, 1);
  narrow.groups = 14;  // 8 channels per group
  const auto w = b.relu(b.conv(stem, wide, "wide_groups"), "wide_relu");
  const auto n = b.relu(b.conv(w, narrow, "narrow_groups"), "narrow_relu");
  const Model m = stagecraft::testing::model_of(std::move(b).finish({b.conv(n, networks::square_conv(16, 1), "head")}));
  const scheduler::Schedule s = sequential(m.graph);
  const PlanRun want = run(m, s, Layout::kNCHW, RK::kAllow);
  const PlanRun got = run(m, s, Layout::kNChw16c, RK::kAvoid);
  expect_same(got, want.outputs, "nChw16c");
  EXPECT_TRUE(got.fallbacks.empty());  // a faster kernel, not a missing one: nothing to report
  std::string wide_impl, narrow_impl;
  int conversions = 0;
  for (const std::string& impl : got.implementations) {
    if (impl.rfind("wide_groups:", 0) == 0) wide_impl = impl;
    if (impl.rfind("narrow_groups:", 0) == 0) narrow_impl = impl;
    if (impl.find("convert for wide_groups") != std::string::npos) ++conversions;
  }
  EXPECT_EQ(wide_impl.find("(groups"), std::string::npos) << wide_impl;
  EXPECT_EQ(conversions, 1) << join(got.implementations, "\n");  // its input; its output is converted for its reader
  EXPECT_NE(narrow_impl.find("(groups 14->7)"), std::string::npos) << narrow_impl;
}

// Every network at reduced size, sequential: each layout gives the NCHW result.
class EveryLayout : public ::testing::TestWithParam<stagecraft::testing::NetworkCase> {};

TEST_P(EveryLayout, GivesTheNchwResult) {
  const auto& c = GetParam();
  const Model m = stagecraft::testing::network(c.name, c.size, c.batch);
  const scheduler::Schedule s = sequential(m.graph);
  const PlanRun want = run(m, s, Layout::kNCHW, RK::kAvoid);
  for (Layout layout : {Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
    expect_same(run(m, s, layout, RK::kAvoid), want.outputs, cat(c.name, " ", graph::to_string(layout)));
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, EveryLayout,
                         ::testing::ValuesIn(stagecraft::testing::network_cases()),
                         [](const auto& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace stagecraft::executor
