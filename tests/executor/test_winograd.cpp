// Winograd convolutions on the CPU (executor/cpu/winograd.h), 3x3 and 1xK / Kx1: every tile size,
// channel count, padding, partial tile, residual, activation, batch and channel-innermost layout
// gives the reference result without writing outside its buffer; only f32 stride-1 ungrouped
// undilated 3x3, 1xK and Kx1 (K = 3, 5, 7) convolutions take it, and BackendConfig::winograd =
// false turns it off.
#include <cpuid.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cpu/dnnl_kernel.h"
#include "executor/cpu/host_simd.h"
#include "forced_fma512_gain.h"
#include "executor/cpu/winograd.h"
#include "executor/executor.h"
#include "networks/builder.h"
#include "reference.h"
#include "support/models.h"
#include "support/compare.h"

namespace stagecraft::executor {
namespace {

using graph::Layout;
using stagecraft::testing::Model;

// F(4x4,3x3) differs from direct convolution by rounding that grows with the tile (its transforms
// multiply by up to 8): measured up to 1.3e-5 of the largest output on the models' shapes.
constexpr double kTolerance = 5e-5;
constexpr size_t kGuardBytes = 256;

// The CPU backend with Winograd off, on with its default (accurate) tiles, or on with its fast
// tiles (the tests of every tile shape use those).
Backend& backend(bool winograd, bool fast = true) {
  static std::unique_ptr<Backend> made[3];
  std::unique_ptr<Backend>& b = made[!winograd ? 0 : fast ? 2 : 1];
  if (!b) {
    BackendConfig config;
    config.winograd = winograd;
    config.fast_winograd = fast;
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

using testing::ForcedFma512Gain;

struct WinoRun {
  std::vector<HostTensor> outputs;
  std::vector<std::string> damaged;
  std::vector<std::string> implementations;  // "label: implementation"
};

WinoRun run(const Model& m, Layout layout, bool winograd, bool fast = true) {
  PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(layout);
  options.guard_bytes = kGuardBytes;
  options.reuse_memory = false;
  const scheduler::Schedule s =
      stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  ExecutionPlan plan(m.graph, s, m.weights, backend(winograd, fast), options);
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

// On an x86 CPU with AVX2 and FMA a Winograd kernel runs unless oneDNN has an AVX-512 direct one
// and this CPU's 512-bit FMAs do about twice the work of 256-bit ones.
// `tile` is "4x4" (of a 3x3 kernel) or the whole "F(...)" of another.
void expect_winograd(const std::string& impl, const std::string& tile, const std::string& where) {
  const std::string f = tile.rfind("F(", 0) == 0 ? tile : "F(" + tile + ",3x3)";
  if (impl.find("avx512") != std::string::npos) {
    EXPECT_GE(executor::cpu::host_fma512_gain(), 1.5)
        << where << ": oneDNN's " << impl << " ran where our Winograd kernels do as many multiply-adds per cycle";
  } else {
    EXPECT_NE(impl.find("winograd " + f), std::string::npos) << where << ": " << impl;
  }
}

struct Case {
  int64_t batch, in, out, height, width;
  graph::Pads pads;
  bool residual;
  graph::Activation act;
  const char* tile;  // the tile size the rule picks ("4x4" of 3x3, else the whole "F(..)")
  graph::Hw kernel = {3, 3};
};

TEST(Winograd, ConvolutionsEqualTheReferenceInEveryShapeAndLayout) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  const ForcedFma512Gain narrow(1.0);  // our kernels, on every machine
  using A = graph::Activation;
  const std::vector<Case> cases = {
      {1, 16, 16, 9, 9, {1, 1, 1, 1}, false, A::kRelu, "4x4"},      // 3x3 tiles: one block
      {1, 8, 24, 13, 11, {1, 1, 1, 1}, true, A::kRelu6, "4x4"},     // a panel of 8, partial tiles
      {1, 32, 48, 10, 7, {0, 0, 0, 0}, false, A::kNone, "2x2"},     // 8x5 out: F(2x2) tiles
      {2, 24, 16, 20, 19, {0, 1, 1, 0}, true, A::kNone, "4x4"},     // asymmetric padding, batch 2
      {1, 40, 72, 30, 30, {1, 1, 1, 1}, false, A::kRelu, "4x4"},    // several blocks and chunks
      {1, 16, 48, 8, 8, {1, 1, 1, 1}, true, A::kRelu, "2x2"},       // blocks < threads: split
      // 1xK / Kx1 (Inception's factorised convolutions): F(m, K) along the long axis
      {1, 32, 40, 17, 17, {0, 3, 0, 3}, false, A::kRelu, "F(1x4,1x7)", {1, 7}},
      {1, 24, 48, 17, 13, {3, 0, 3, 0}, true, A::kRelu6, "F(4x1,7x1)", {7, 1}},
      {2, 16, 24, 8, 8, {0, 1, 0, 1}, true, A::kNone, "F(1x4,1x3)", {1, 3}},
      {1, 48, 32, 8, 9, {1, 0, 1, 0}, false, A::kRelu, "F(4x1,3x1)", {3, 1}},
      {1, 16, 16, 19, 12, {0, 2, 0, 1}, false, A::kRelu, "F(1x4,1x5)", {1, 5}},   // asymmetric
      {1, 8, 16, 20, 6, {2, 0, 2, 0}, true, A::kRelu, "F(4x1,5x1)", {5, 1}},
  };
  for (const Case& c : cases) {
    networks::NetBuilder b("winograd", c.batch, c.in, c.height, c.width);
    networks::ConvSpec spec;
    spec.out_channels = c.out;
    spec.kernel = c.kernel;
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
      const std::string where = cat(c.batch, "x", c.in, "x", c.height, "x", c.width, " -> ", c.out, " ",
                                    c.kernel.h, "x", c.kernel.w, " in ", graph::to_string(layout));
      if (layout == Layout::kNChw16c && (c.out % 16 != 0 || c.in % 16 != 0)) continue;  // tails: not ours
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

// Runs `p`'s Winograd kernel on x (and residual r when p.residual) and returns the largest
// difference to a direct loop in double, relative to the largest pre-activation output; an output
// left unwritten (NaN) or a write past the output (its guard floats) counts as infinite.
double kernel_error(const cpu::WinogradProblem& p, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int64_t cin = p.src.channels, cout = p.dst.channels, kh = p.kernel_h, kw = p.kernel_w;
  const int64_t height = p.dst.height, width = p.dst.width, guard = 64;
  std::vector<float> w(static_cast<size_t>(cout * cin * kh * kw)), bias(static_cast<size_t>(cout));
  for (float& v : w) v = 2.0f * uniform(rng);
  for (float& v : bias) v = uniform(rng);
  std::vector<float> x(static_cast<size_t>(p.src.images * p.src.batch_stride));
  std::vector<float> r(static_cast<size_t>(p.dst.images * p.dst.batch_stride));
  std::vector<float> y(static_cast<size_t>(p.dst.images * p.dst.batch_stride + guard), NAN);
  for (float& v : x) v = uniform(rng);
  for (float& v : r) v = 4.0f * uniform(rng);
  const cpu::WinogradConv conv(p, w, bias);
  std::vector<float> workspace(conv.workspace_bytes() / sizeof(float));
  conv.run(x.data(), p.residual ? r.data() : nullptr, y.data(), workspace.data());
  for (int64_t i = 0; i < guard; ++i) {
    if (!std::isnan(y[y.size() - 1 - static_cast<size_t>(i)])) return INFINITY;
  }
  double worst = 0, largest = 0;
  for (int64_t n = 0; n < p.dst.images; ++n) {
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t row = 0; row < height; ++row) {
        for (int64_t col = 0; col < width; ++col) {
          const int64_t at = n * p.dst.batch_stride + p.dst.channel_offset(o) + (row * width + col) * p.dst.pixel_stride;
          double sum = bias[static_cast<size_t>(o)] + (p.residual ? r[static_cast<size_t>(at)] : 0.0);
          for (int64_t i = 0; i < cin; ++i) {
            for (int64_t dy = 0; dy < kh; ++dy) {
              for (int64_t dx = 0; dx < kw; ++dx) {
                const int64_t yy = row + dy - p.pad_top, xx = col + dx - p.pad_left;
                if (yy < 0 || yy >= p.src.height || xx < 0 || xx >= p.src.width) continue;
                sum += static_cast<double>(w[static_cast<size_t>(((o * cin + i) * kh + dy) * kw + dx)]) *
                       x[static_cast<size_t>(n * p.src.batch_stride + p.src.channel_offset(i) +
                                             (yy * p.src.width + xx) * p.src.pixel_stride)];
              }
            }
          }
          largest = std::max(largest, std::fabs(sum));  // before clipping: the error's scale
          if (p.activation != graph::Activation::kNone) sum = std::max(sum, 0.0);
          if (p.activation == graph::Activation::kRelu6) sum = std::min(sum, 6.0);
          const float got = y[static_cast<size_t>(at)];
          worst = stagecraft::testing::worst_of(worst, std::fabs(got - sum));
        }
      }
    }
  }
  return worst / largest;
}

// The kernel alone against a direct loop (in double): every count of tiles in a register tile's
// last rows (1..6), in one block (up to 24 tiles: with two threads, the output channels split
// between them) and in several, partial tiles, both tile sizes, every activation (outputs up to
// ~+-30, so that ReLU6 clips), one and two threads, nChw8c and nhwc.
TEST(Winograd, KernelEqualsADirectLoopForEveryTileRemainderAndActivation) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  using A = graph::Activation;
  const int64_t cin = 16, cout = 24;
  std::mt19937 rng(3);
  for (int tile : {2, 4}) {
    // One row of 1..30 tiles, the last one partial: 1..24 in one block, 25..30 in four.
    const int64_t height = tile;
    for (int64_t tiles = 1; tiles <= 30; ++tiles) {
      const int64_t width = tiles * tile - 1;
      const int threads = tiles % 2 == 0 ? 2 : 1;
      for (A act : {A::kNone, A::kRelu, A::kRelu6}) {
        for (Layout layout : {Layout::kNChw8c, Layout::kNHWC}) {
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
          EXPECT_LT(kernel_error(p, rng), kTolerance) << "F(" << tile << ") width " << width << " threads "
                                           << threads << " act "
                                           << graph::to_string(act) << " " << graph::to_string(layout);
        }
      }
    }
  }
}

// 1xK and Kx1 kernels alone against a direct loop: K = 3, 5, 7 along either axis, every tile m
// the kernel has for K (alpha = m + K - 1 up to 8, 10 for K = 7: each its own Cook-Toom
// transforms), output lengths that leave every remainder of a tile, padded and unpadded
// (shorter outputs), batch 2 with a residual, every activation, one and two threads, nChw8c,
// nChw16c and nhwc.
TEST(Winograd, LineKernelsEqualADirectLoopForEveryTapTileAndRemainder) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  using A = graph::Activation;
  std::mt19937 rng(11);
  int checked = 0;
  for (int taps : {3, 5, 7}) {
    for (bool along_h : {false, true}) {
      const int max_tile = (taps == 7 ? 10 : 8) - taps + 1;
      for (int tile = 2; tile <= max_tile; ++tile) {
        for (int64_t extra = 0; extra < tile; ++extra) {
          const int64_t length = 2 * tile + extra + (extra == 0 ? 9 * tile : 0);  // 2 tiles + part; 11 tiles
          const bool padded = (extra + taps) % 2 == 0;
          const int64_t pad = padded ? taps / 2 : 0;
          const int variant = checked++;
          const Layout layout = variant % 3 == 0 ? Layout::kNChw8c : variant % 3 == 1 ? Layout::kNHWC : Layout::kNChw16c;
          const A act = variant % 4 == 0 ? A::kNone : variant % 4 == 1 ? A::kRelu : A::kRelu6;
          const int64_t images = variant % 5 == 0 ? 2 : 1, cin = 16, cout = variant % 2 == 0 ? 24 : 32;
          if (layout == Layout::kNChw16c && cout % 16 != 0) continue;
          const int64_t in_len = length + taps - 1 - 2 * pad, across = 3;
          const graph::Shape in_shape = along_h ? graph::Shape{images, cin, in_len, across}
                                                : graph::Shape{images, cin, across, in_len};
          const graph::Shape out_shape = along_h ? graph::Shape{images, cout, length, across}
                                                 : graph::Shape{images, cout, across, length};
          cpu::WinogradProblem p;
          p.src = cpu::host_layout({in_shape, graph::DataType::kF32, layout});
          p.dst = cpu::host_layout({out_shape, graph::DataType::kF32, layout});
          p.kernel_h = along_h ? taps : 1;
          p.kernel_w = along_h ? 1 : taps;
          (along_h ? p.pad_top : p.pad_left) = pad;
          p.activation = act;
          p.residual = variant % 3 != 1;
          p.tile = tile;
          p.threads = variant % 2 == 0 ? 2 : 1;
          ASSERT_TRUE(cpu::winograd_supported(p));
          const cpu::WinogradConv conv(p, std::vector<float>(static_cast<size_t>(cout * cin * taps)), {});
          EXPECT_NE(conv.name().find(along_h ? cat("F(", tile, "x1,", taps, "x1)") : cat("F(1x", tile, ",1x", taps, ")")),
                    std::string::npos)
              << conv.name();
          EXPECT_LT(kernel_error(p, rng), kTolerance)
              << (along_h ? cat(taps, "x1") : cat("1x", taps)) << " m " << tile << " length " << length << " pad "
              << pad << " " << graph::to_string(layout) << " act " << graph::to_string(act) << " images " << images
              << " residual " << p.residual << " threads " << p.threads;
        }
      }
    }
  }
  // Tiles the kernel has no transforms for are refused (the rule never picks them).
  cpu::WinogradProblem p;
  p.src = p.dst = cpu::host_layout({graph::Shape{1, 8, 8, 8}, graph::DataType::kF32, Layout::kNChw8c});
  p.kernel_h = 1;
  for (auto [taps, tile] : {std::pair{7, 5}, {5, 5}, {3, 7}, {9, 2}, {2, 2}, {7, 1}}) {
    p.kernel_w = taps;
    p.tile = tile;
    EXPECT_FALSE(cpu::winograd_supported(p)) << "1x" << taps << " m " << tile;
  }
}

// The FMA-width probe: measured once, 0 without AVX-512, a positive finite ratio with it; its
// value is a timing (bench/winograd_vs_direct prints it: about 1 on AMD Zen 4, about 2 on Intel
// server cores) and is not asserted. A forced value replaces it until it is restored.
TEST(Winograd, Fma512GainIsMeasuredOnceAndCanBeForced) {
  const double gain = executor::cpu::host_fma512_gain();
  EXPECT_EQ(gain, executor::cpu::host_fma512_gain()) << "measured once";
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_GT(gain, 0.0);
    EXPECT_TRUE(std::isfinite(gain));
  } else {
    EXPECT_EQ(gain, 0.0) << "no AVX-512: nothing to measure";
  }
  {
    const ForcedFma512Gain forced(1.7);
    EXPECT_EQ(executor::cpu::host_fma512_gain(), 1.7);
  }
  EXPECT_EQ(executor::cpu::host_fma512_gain(), gain) << "the measurement again once the forced value goes";
}

// One 3x3 convolution of 32 channels (our Winograd kernel's case), its reference output, and the
// blocked layout oneDNN's kernels run it in: nChw16c with AVX-512, nChw8c without (none under
// DNNL_MAX_CPU_ISA=AVX2, the capped shards).
struct OneConv {
  Model m;
  std::vector<HostTensor> want;
  bool onednn_has_avx512 = false;
  Layout layout = Layout::kNChw8c;
};
OneConv one_conv(const std::string& name) {
  networks::NetBuilder b(name, 1, 32, 24, 24);
  const graph::ValueId y = b.conv(b.input(), networks::square_conv(32, 3, 1, 1), "conv");
  OneConv c;
  c.m = stagecraft::testing::model_of(std::move(b).finish({y}), 5);
  c.want = testing::reference_run(c.m.graph, c.m.weights, stagecraft::testing::inputs_of(c.m.graph));
  c.onednn_has_avx512 = cpu::isa_has_avx512(dnnl::get_effective_cpu_isa());
  c.layout = c.onednn_has_avx512 ? Layout::kNChw16c : Layout::kNChw8c;
  return c;
}

// The choice between our Winograd kernel and oneDNN's direct one follows the gain, not a timing
// taken in the test: with 512-bit FMAs as wide as two 256-bit ones ours runs; with twice the
// work per cycle, oneDNN's runs where it has an AVX-512 kernel (an AVX2-only CPU keeps ours).
TEST(Winograd, TheKernelChoiceFollowsTheFma512Gain) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  const auto [m, want, onednn_has_avx512, layout] = one_conv("choice");
  std::string narrow_impl, wide_impl;
  {
    const ForcedFma512Gain narrow(1.0);
    const WinoRun got = run(m, layout, true);
    narrow_impl = implementation_of(got, "conv");
    EXPECT_LT(relative_error(got.outputs[0], want[0]), kTolerance) << narrow_impl;
  }
  {
    const ForcedFma512Gain wide(2.0);
    const WinoRun got = run(m, layout, true);
    wide_impl = implementation_of(got, "conv");
    EXPECT_LT(relative_error(got.outputs[0], want[0]), kTolerance) << wide_impl;
  }
  EXPECT_NE(narrow_impl.find("winograd"), std::string::npos) << narrow_impl;
  if (onednn_has_avx512) {
    EXPECT_EQ(wide_impl.find("winograd"), std::string::npos) << "gain 2 on AVX-512: oneDNN's kernel, got " << wide_impl;
  } else {
    EXPECT_NE(wide_impl.find("winograd"), std::string::npos) << "no AVX-512 kernel to prefer: " << wide_impl;
  }
}

// Without a forced FMA gain the backend times our Winograd kernel against oneDNN's direct one for
// each convolution signature, once per machine: the verdict lands in the cache directory, the plan
// runs the kernel it names, and a later backend obeys the file (here flipped by hand) without
// measuring again.
TEST(Winograd, TheChoiceIsMeasuredPerConvolutionAndTheCacheIsObeyed) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  const auto [m, want, onednn_has_avx512, layout] = one_conv("measured");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("sc-measured-", getpid());
  std::filesystem::remove_all(dir);
  BackendConfig config;
  config.cache_dir = dir.string();
  config.fast_winograd = false;
  const auto plan_with = [&](Backend& backend) {
    PlanOptions options;
    options.layouts = graph::LayoutAssignment::uniform(layout);
    ExecutionPlan plan(m.graph, stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential),
                       m.weights, backend, options);
    Executor executor(plan);
    const auto got = executor.run(stagecraft::testing::inputs_of(m.graph));
    EXPECT_LT(relative_error(got[0], want[0]), kTolerance);
    for (const PlannedKernel& k : plan.kernels()) {
      if (k.label == "conv") return k.kernel->implementation();
    }
    return std::string();
  };
  // The verdict file: its path and its entries (verdict, signature).
  const auto verdicts = [&] {
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      if (f.path().filename().string().rfind("cpu-kernels-", 0) != 0) continue;
      std::ifstream in(f.path());
      std::string line;
      while (std::getline(in, line)) {
        const auto tab = line.find('\t');
        if (tab != std::string::npos) entries.emplace_back(line.substr(0, tab), line.substr(tab + 1));
      }
    }
    return entries;
  };
  std::string first;
  {
    const auto backend = make_backend("cpu", config);
    first = plan_with(*backend);
  }
  const auto entries = verdicts();
  ASSERT_FALSE(entries.empty()) << "no measured choice in " << dir;
  for (const auto& [verdict, signature] : entries) {
    EXPECT_TRUE(verdict == "winograd" || verdict == "direct") << verdict;
  }
  const bool ran_winograd = first.find("winograd") != std::string::npos;
  EXPECT_EQ(ran_winograd, entries.front().first == "winograd") << first;
  // Flip every verdict in the file: the next backend must follow it.
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("cpu-kernels-", 0) != 0) continue;
    std::ifstream in(f.path());
    std::string text, line;
    while (std::getline(in, line)) {
      if (line.rfind("winograd\t", 0) == 0) line = "direct" + line.substr(8);
      else if (line.rfind("direct\t", 0) == 0) line = "winograd" + line.substr(6);
      text += line + "\n";
    }
    in.close();
    std::ofstream(f.path()) << text;
  }
  const auto backend = make_backend("cpu", config);
  const std::string second = plan_with(*backend);
  EXPECT_NE(second.find("winograd") != std::string::npos, ran_winograd) << first << " then " << second;
  std::filesystem::remove_all(dir);
}

// The tile the backend picks for 1xK / Kx1: the fewest transformed points per output row.
TEST(Winograd, LineTileTakesTheFewestTransformedPoints) {
  EXPECT_EQ(cpu::winograd_1d_tile(7, 17), 4);  // 5 tiles x 10 points, not 6 x 9 or 9 x 8
  EXPECT_EQ(cpu::winograd_1d_tile(7, 12), 4);  // 3 x 10 (m = 3: 4 x 9)
  EXPECT_EQ(cpu::winograd_1d_tile(7, 2), 2);   // 1 x 8
  EXPECT_EQ(cpu::winograd_1d_tile(7, 9), 3);   // 3 x 9 (m = 4: 3 x 10)
  EXPECT_EQ(cpu::winograd_1d_tile(3, 8), 4);   // 2 x 6 (m = 6: 2 x 8, m = 3: 3 x 5)
  EXPECT_EQ(cpu::winograd_1d_tile(3, 17), 6);  // 3 x 8
  EXPECT_EQ(cpu::winograd_1d_tile(5, 35), 4);  // 9 x 8 (m = 3: 12 x 7)
}

// Strided, 1x1, grouped and dilated convolutions stay on oneDNN; BackendConfig::winograd = false
// runs the 3x3 one there too, with the same result.
TEST(Winograd, OnlyUngroupedStrideOne3x3ConvolutionsTakeItAndItCanBeTurnedOff) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  const ForcedFma512Gain narrow(1.0);  // our kernels, on every machine
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
  const std::string off = backend(false).device().description();
  EXPECT_NE(off.find("Winograd convolutions off"), std::string::npos) << off;
  EXPECT_NE(backend(true).device().device_fingerprint(), backend(false).device().device_fingerprint())
      << "profiles measured with and without Winograd kernels must not share a cache";
}

}  // namespace
}  // namespace stagecraft::executor

namespace stagecraft::executor {
namespace {

// The rounding error of each tile on an inception_v4-like layer (192 input channels, 17x17; the
// largest difference to a direct loop in double, relative to the largest output): the default
// tiles F(2x2,3x3) and F(2,K) stay within a few times a direct kernel's (about 5e-7 here), the
// fast ones do not (measured on AMD Zen 4: F(4x4,3x3) 9.7e-6, F(4,7) 5.9e-6, F(2,7) 2.0e-6,
// F(2x2,3x3) 5.1e-7).
TEST(WinogradNumerics, DefaultTilesRoundLikeADirectKernelOnADeepLayer) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  std::mt19937 rng(11);
  struct Tile {
    int kh, kw, tile;
    bool default_tile;
  };
  double worst_default = 0, worst_fast = 0;
  for (const Tile c : {Tile{3, 3, 2, true}, Tile{1, 7, 2, true}, Tile{7, 1, 2, true}, Tile{1, 3, 2, true},
                       Tile{1, 5, 2, true}, Tile{3, 3, 4, false}, Tile{1, 7, 4, false}, Tile{1, 3, 6, false}}) {
    graph::TensorDesc in{graph::Shape{1, 192, 17, 17}, graph::DataType::kF32, Layout::kNChw16c};
    graph::TensorDesc out{graph::Shape{1, 32, 17, 17}, graph::DataType::kF32, Layout::kNChw16c};
    cpu::WinogradProblem p;
    p.src = cpu::host_layout(in);
    p.dst = cpu::host_layout(out);
    p.kernel_h = c.kh;
    p.kernel_w = c.kw;
    p.pad_top = c.kh / 2;
    p.pad_left = c.kw / 2;
    p.tile = c.tile;
    ASSERT_TRUE(cpu::winograd_supported(p));
    const double error = kernel_error(p, rng);
    std::printf("%dx%d F(%d): %.2g\n", c.kh, c.kw, c.tile, error);
    (c.default_tile ? worst_default : worst_fast) = std::max(c.default_tile ? worst_default : worst_fast, error);
  }
  EXPECT_LT(worst_default, 4e-6);
  EXPECT_GT(worst_fast, 2 * worst_default) << "the fast tiles would not be the less accurate ones";
}

// The default backend picks F(2x2,3x3) and F(2,K); --fast-winograd the larger tiles.
TEST(WinogradNumerics, TheDefaultBackendPicksTheAccurateTiles) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  const ForcedFma512Gain narrow(1.0);  // our kernels, on every machine
  networks::NetBuilder b("tiles", 1, 32, 17, 17);
  networks::ConvSpec line = networks::square_conv(32, 1);
  line.kernel = {1, 7};
  line.padding = {0, 3, 0, 3};
  const graph::ValueId y = b.conv(b.conv(b.input(), networks::square_conv(32, 3, 1, 1), "square"), line, "line");
  const Model m = stagecraft::testing::model_of(std::move(b).finish({y}), 5);
  const WinoRun accurate = run(m, Layout::kNChw8c, true, false);
  const WinoRun fast = run(m, Layout::kNChw8c, true, true);
  expect_winograd(implementation_of(accurate, "square"), "2x2", "default");
  expect_winograd(implementation_of(accurate, "line"), "F(1x2,1x7)", "default");
  expect_winograd(implementation_of(fast, "square"), "4x4", "fast");
  EXPECT_NE(backend(true, false).device().device_fingerprint(), backend(true, true).device().device_fingerprint())
      << "profiles measured with the fast tiles would be reused for the accurate ones";
}

// A deep network (inception_v3: 3x3, 1x7 and 7x1 convolutions throughout) against the reference
// loops in double: with the default tiles within 2x the error of running every convolution on
// oneDNN, and no worse than the fast tiles.
TEST(WinogradNumerics, ADeepNetworkKeepsTheDirectKernelsError) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 + FMA: no Winograd kernels";
  const Model m = stagecraft::testing::network("inception_v3", 139);
  const auto inputs = stagecraft::testing::inputs_of(m.graph);
  const auto want = testing::reference_run(m.graph, m.weights, inputs);
  const auto error = [&](bool winograd, bool fast) {
    const WinoRun got = run(m, Layout::kNChw8c, winograd, fast);
    return relative_error(got.outputs[0], want[0]);
  };
  const double direct = error(false, false), accurate = error(true, false), fast = error(true, true);
  std::printf("inception_v3 at 139: direct %.2g, default tiles %.2g, fast tiles %.2g\n", direct, accurate, fast);
  EXPECT_LT(accurate, 2 * direct + 1e-7);
  EXPECT_LE(accurate, fast * 1.01);
}

}  // namespace
}  // namespace stagecraft::executor
