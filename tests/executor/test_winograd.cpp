// Winograd 3x3 convolutions on the CPU (executor/cpu/winograd.h): every tile size, channel count,
// padding, partial tile, residual, activation, batch and channel-innermost layout gives the
// reference result without writing outside its buffer; only f32 3x3 stride-1 ungrouped undilated
// convolutions take it, and BackendConfig::winograd = false turns it off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cpu/winograd.h"
#include "executor/executor.h"
#include "networks/builder.h"
#include "reference.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using graph::Layout;
using stagecraft::testing::Model;

// F(4x4,3x3) differs from direct convolution by rounding that grows with the tile (its transforms
// multiply by up to 8): measured up to 1.3e-5 of the largest output on the models' shapes.
constexpr double kTolerance = 5e-5;
constexpr size_t kGuardBytes = 256;

Backend& backend(bool winograd) {
  static std::unique_ptr<Backend> on, off;
  std::unique_ptr<Backend>& b = winograd ? on : off;
  if (!b) {
    BackendConfig config;
    config.winograd = winograd;
    b = make_backend("cpu", config);
  }
  return *b;
}

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

struct WinoRun {
  std::vector<HostTensor> outputs;
  std::vector<std::string> damaged;
  std::vector<std::string> implementations;  // "label: implementation"
};

WinoRun run(const Model& m, Layout layout, bool winograd) {
  PlanOptions options;
  options.layout = layout;
  options.guard_bytes = kGuardBytes;
  options.reuse_memory = false;
  const scheduler::Schedule s =
      stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  ExecutionPlan plan(m.graph, s, m.weights, backend(winograd), options);
  Executor executor(plan);
  WinoRun r;
  r.outputs = executor.run(stagecraft::testing::inputs_of(m.graph));
  plan.guards_intact(&r.damaged);
  for (const PlannedKernel& k : plan.kernels()) r.implementations.push_back(k.label + ": " + k.kernel->implementation());
  return r;
}

std::string implementation_of(const WinoRun& r, const std::string& label) {
  for (const std::string& impl : r.implementations) {
    if (impl.rfind(label + ":", 0) == 0) return impl;
  }
  return "";
}

// On an x86 CPU with AVX2 and FMA a Winograd kernel runs unless oneDNN has a wider (AVX-512)
// direct one.
void expect_winograd(const std::string& impl, const std::string& tile, const std::string& where) {
  EXPECT_TRUE(impl.find("winograd F(" + tile + ",3x3)") != std::string::npos ||
              impl.find("avx512") != std::string::npos)
      << where << ": " << impl;
}

struct Case {
  int64_t batch, in, out, height, width;
  graph::Pads pads;
  bool residual;
  graph::Activation act;
  const char* tile;  // the tile size the rule picks
};

TEST(Winograd, ConvolutionsEqualTheReferenceInEveryShapeAndLayout) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  using A = graph::Activation;
  const std::vector<Case> cases = {
      {1, 16, 16, 9, 9, {1, 1, 1, 1}, false, A::kRelu, "4x4"},      // 3x3 tiles: one block
      {1, 8, 24, 13, 11, {1, 1, 1, 1}, true, A::kRelu6, "4x4"},     // a panel of 8, partial tiles
      {1, 32, 48, 10, 7, {0, 0, 0, 0}, false, A::kNone, "2x2"},     // 8x5 out: F(2x2) tiles
      {2, 24, 16, 20, 19, {0, 1, 1, 0}, true, A::kNone, "4x4"},     // asymmetric padding, batch 2
      {1, 40, 72, 30, 30, {1, 1, 1, 1}, false, A::kRelu, "4x4"},    // several blocks and chunks
      {1, 16, 48, 8, 8, {1, 1, 1, 1}, true, A::kRelu, "2x2"},       // blocks < threads: split
  };
  for (const Case& c : cases) {
    networks::NetBuilder b("winograd", c.batch, c.in, c.height, c.width);
    networks::ConvSpec spec;
    spec.out_channels = c.out;
    spec.kernel = {3, 3};
    spec.padding = c.pads;
    spec.bias = true;
    graph::ValueId y = b.conv(b.input(), spec, "w");
    if (c.residual) {
      // y = w(x) + r(x): the addition is fused into one of the two (both Winograd) as its residual.
      y = b.add({y, b.conv(b.input(), spec, "r")}, "sum");
    }
    if (c.act == A::kRelu) y = b.relu(y);
    if (c.act == A::kRelu6) y = b.relu6(y);
    const Model m = stagecraft::testing::model_of(std::move(b).finish({y}), 3);
    const auto want = testing::reference_run(m.graph, m.weights, stagecraft::testing::inputs_of(m.graph));
    for (Layout layout : {Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
      const std::string where = cat(c.batch, "x", c.in, "x", c.height, "x", c.width, " -> ", c.out,
                                    " in ", graph::to_string(layout));
      if (layout == Layout::kNChw16c && c.out % 16 != 0) continue;  // tails: not ours
      const WinoRun got = run(m, layout, true);
      ASSERT_EQ(got.outputs.size(), 1u);
      EXPECT_LT(relative_error(got.outputs[0], want[0]), kTolerance) << where;
      EXPECT_TRUE(got.damaged.empty()) << where << ": wrote past " << join(got.damaged, ", ");
      expect_winograd(implementation_of(got, "w"), c.tile, where);
      if (c.residual) {
        expect_winograd(implementation_of(got, "r"), c.tile, where);
        EXPECT_NE(implementation_of(got, "w").find("residual") == std::string::npos,
                  implementation_of(got, "r").find("residual") == std::string::npos)
            << where << ": one of the two takes the residual";
      }
    }
  }
}

// The kernel alone against a direct loop (in double): every count of tiles in a register tile's
// last rows (1..6, in the first block and the second), partial tiles, both tile sizes, every activation (outputs up to ~+-30, so that ReLU6 clips),
// one and two threads, nChw8c and nhwc.
TEST(Winograd, KernelEqualsADirectLoopForEveryTileRemainderAndActivation) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  using A = graph::Activation;
  const int64_t cin = 16, cout = 24;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int tile : {2, 4}) {
    // One row of 1..18 tiles, the last one partial: 1..12 in one block, then 12 + 1..6.
    const int64_t height = tile;
    for (int64_t width = tile - 1; width <= 18 * tile; width += tile) {
      for (A act : {A::kNone, A::kRelu, A::kRelu6}) {
        for (Layout layout : {Layout::kNChw8c, Layout::kNHWC}) {
          const int threads = width % 2 == 0 ? 2 : 1;
          graph::TensorDesc in{graph::Shape{1, cin, height, width}, graph::DataType::kF32, layout};
          graph::TensorDesc out{graph::Shape{1, cout, height, width}, graph::DataType::kF32, layout};
          cpu::WinogradProblem p;
          p.src = cpu::host_layout(in);
          p.dst = cpu::host_layout(out);
          p.pad_top = p.pad_left = 1;
          p.activation = act;
          p.tile = tile;
          p.threads = threads;
          ASSERT_TRUE(cpu::winograd_supported(p));
          std::vector<float> w(static_cast<size_t>(cout * cin * 9)), bias(static_cast<size_t>(cout));
          for (float& v : w) v = 2.0f * uniform(rng);
          for (float& v : bias) v = uniform(rng);
          std::vector<float> x(static_cast<size_t>(in.bytes() / 4)), y(static_cast<size_t>(out.bytes() / 4), NAN);
          for (float& v : x) v = uniform(rng);
          const cpu::WinogradConv conv(p, w, bias);
          std::vector<float> workspace(conv.workspace_bytes() / sizeof(float));
          conv.run(x.data(), nullptr, y.data(), workspace.data());
          double worst = 0, largest = 0;
          for (int64_t o = 0; o < cout; ++o) {
            for (int64_t r = 0; r < height; ++r) {
              for (int64_t c = 0; c < width; ++c) {
                double sum = bias[static_cast<size_t>(o)];
                for (int64_t i = 0; i < cin; ++i)
                  for (int64_t dy = 0; dy < 3; ++dy)
                    for (int64_t dx = 0; dx < 3; ++dx) {
                      const int64_t yy = r + dy - 1, xx = c + dx - 1;
                      if (yy < 0 || yy >= height || xx < 0 || xx >= width) continue;
                      sum += static_cast<double>(w[static_cast<size_t>(((o * cin + i) * 3 + dy) * 3 + dx)]) *
                             x[static_cast<size_t>(p.src.channel_offset(i) + (yy * width + xx) * p.src.pixel_stride)];
                    }
                largest = std::max(largest, std::fabs(sum));  // before clipping: the error's scale
                if (act != A::kNone) sum = std::max(sum, 0.0);
                if (act == A::kRelu6) sum = std::min(sum, 6.0);
                const float got = y[static_cast<size_t>(p.dst.channel_offset(o) + (r * width + c) * p.dst.pixel_stride)];
                worst = std::isnan(got) ? INFINITY : std::max(worst, std::fabs(got - sum));
              }
            }
          }
          EXPECT_LT(worst / largest, kTolerance) << "F(" << tile << ") width " << width << " act "
                                           << graph::to_string(act) << " " << graph::to_string(layout);
        }
      }
    }
  }
}

// Strided, 1x1, grouped and dilated convolutions stay on oneDNN; BackendConfig::winograd = false
// runs the 3x3 one there too, with the same result.
TEST(Winograd, OnlyUngroupedStrideOne3x3ConvolutionsTakeItAndItCanBeTurnedOff) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  networks::NetBuilder b("eligible", 1, 32, 24, 24);
  const graph::ValueId x = b.input();
  networks::ConvSpec dilated = networks::square_conv(32, 3, 1, 2);
  dilated.dilation = {2, 2};
  networks::ConvSpec grouped = networks::square_conv(32, 3, 1, 1);
  grouped.groups = 2;
  const graph::ValueId y = b.concat({b.conv(x, networks::square_conv(32, 3, 1, 1), "plain"),
                                     b.conv(x, dilated, "dilated"), b.conv(x, grouped, "grouped"),
                                     b.conv(x, networks::square_conv(32, 1), "pointwise")});
  const graph::ValueId z = b.conv(y, networks::square_conv(32, 3, 2, 1), "strided");
  const Model m = stagecraft::testing::model_of(std::move(b).finish({z}), 5);
  const auto want = testing::reference_run(m.graph, m.weights, stagecraft::testing::inputs_of(m.graph));
  for (bool on : {true, false}) {
    const WinoRun got = run(m, Layout::kNChw8c, on);
    EXPECT_LT(relative_error(got.outputs[0], want[0]), kTolerance) << (on ? "on" : "off");
    for (const char* label : {"dilated", "grouped", "pointwise", "strided"}) {
      EXPECT_EQ(implementation_of(got, label).find("winograd"), std::string::npos) << implementation_of(got, label);
    }
    if (on) {
      expect_winograd(implementation_of(got, "plain"), "4x4", "on");
    } else {
      EXPECT_EQ(implementation_of(got, "plain").find("winograd"), std::string::npos)
          << implementation_of(got, "plain");
    }
  }
  EXPECT_EQ(backend(false).description().find("Winograd convolutions off") == std::string::npos, false);
  EXPECT_NE(backend(true).device_fingerprint(), backend(false).device_fingerprint())
      << "profiles measured with and without Winograd kernels must not share a cache";
}

}  // namespace
}  // namespace stagecraft::executor
