// Layer normalisation over channels and GELU (erf and tanh forms) on the CPU backend: in every
// layout (channel counts that are not multiples of the block), fused into a convolution or alone,
// against the reference loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "executor/cpu/host_layout.h"
#include "executor/executor.h"
#include "graph/passes.h"
#include "reference.h"
#include "support/kernels.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using graph::Layout;
using graph::OpKind;

TEST(ChannelNorms, LayerNormAndGeluMatchTheReferenceInEveryLayout) {
  for (int64_t channels : {20, 32}) {
    const graph::Graph raw = stagecraft::testing::channel_norms_graph(2, channels);
    const stagecraft::testing::Model m = stagecraft::testing::model_of(raw, 5);
    // The GELU after the convolution fuses into it (a oneDNN post-op); the one after the layer
    // norm runs alone.
    EXPECT_EQ(graph::count_ops(m.graph, OpKind::kGeluTanh), 0u);
    EXPECT_EQ(graph::count_ops(m.graph, OpKind::kGelu), 1u);
    const auto inputs = stagecraft::testing::inputs_of(m.graph);
    const auto want = testing::reference_run(m.graph, m.weights, inputs);
    const auto schedule = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
      PlanOptions options;
      options.layouts = graph::LayoutAssignment::uniform(layout);
      ExecutionPlan plan(m.graph, schedule, m.weights, stagecraft::testing::cpu_backend(), options);
      Executor run(plan);
      const auto got = run.run(inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_LT(relative_error(got[i], want[i]), 1e-5) << channels << " channels, output " << i << " in "
                                                         << graph::to_string(layout);
      }
    }
  }
}

KernelSpec layer_norm_spec(const graph::TensorDesc& d, const graph::OpWeights& w) {
  KernelSpec spec;
  spec.kind = OpKind::kLayerNorm;
  spec.attrs = graph::LayerNormAttrs{};
  spec.srcs = {d};
  spec.dsts = {d};
  spec.weights = &w;
  spec.name = "ln";
  return spec;
}

TEST(ChannelNorms, TheLayerNormRunsNativelyInEveryLayoutAndRefusesInt8) {
  graph::TensorDesc d;
  d.shape = graph::Shape{1, 20, 3, 3};
  graph::OpWeights w;
  w.gamma.assign(20, 1.0f);
  w.beta.assign(20, 0.0f);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
    d.layout = layout;
    KernelSpec spec = layer_norm_spec(d, w);
    EXPECT_TRUE(stagecraft::testing::cpu_backend().supports(spec).is_native()) << graph::to_string(layout);
  }
  d.layout = Layout::kNHWC;
  d.dtype = graph::DataType::kU8;
  d.scale = 0.1f;
  const KernelSpec int8 = layer_norm_spec(d, w);
  EXPECT_FALSE(stagecraft::testing::cpu_backend().supports(int8).runnable());
}

// A layout chosen per tensor (--layout auto) can hand the layer norm one layout and ask for another:
// every pair, against the definition (double precision) at each logical element, padding lanes 0.
TEST(ChannelNorms, TheLayerNormReadsOneLayoutAndWritesAnother) {
  const int64_t n = 2, c = 20, pixels = 15;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n * c * pixels));  // NCHW
  for (float& v : x) v = normal(rng);
  graph::OpWeights w;
  for (int64_t i = 0; i < c; ++i) {
    w.gamma.push_back(normal(rng));
    w.beta.push_back(normal(rng));
  }
  const auto at = [&](int64_t img, int64_t ch, int64_t p) { return x[static_cast<size_t>((img * c + ch) * pixels + p)]; };
  const std::vector<Layout> layouts = {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c};
  for (Layout from : layouts) {
    for (Layout to : layouts) {
      if (from == to) continue;
      graph::TensorDesc s, d;
      s.shape = d.shape = graph::Shape{n, c, 3, 5};
      s.layout = from;
      d.layout = to;
      const cpu::HostLayout hs = cpu::host_layout(s), hd = cpu::host_layout(d);
      std::vector<float> src(static_cast<size_t>(hs.images * hs.batch_stride), 0.0f);
      for (int64_t img = 0; img < n; ++img) {
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t p = 0; p < pixels; ++p) {
            src[static_cast<size_t>(img * hs.batch_stride + hs.channel_offset(ch) + p * hs.pixel_stride)] = at(img, ch, p);
          }
        }
      }
      KernelSpec spec = layer_norm_spec(s, w);
      spec.dsts = {d};
      const std::vector<float> y = stagecraft::testing::run_f32_kernel(stagecraft::testing::cpu_backend(), spec, {src});
      ASSERT_EQ(y.size(), static_cast<size_t>(hd.images * hd.batch_stride));
      double worst = 0;
      for (int64_t img = 0; img < n; ++img) {
        for (int64_t p = 0; p < pixels; ++p) {
          double mean = 0, var = 0;
          for (int64_t ch = 0; ch < c; ++ch) mean += at(img, ch, p) / static_cast<double>(c);
          for (int64_t ch = 0; ch < c; ++ch) var += std::pow(at(img, ch, p) - mean, 2) / static_cast<double>(c);
          for (int64_t ch = 0; ch < hd.padded_channels; ++ch) {
            const float got = y[static_cast<size_t>(img * hd.batch_stride + hd.channel_offset(ch) + p * hd.pixel_stride)];
            const double want = ch < c ? (at(img, ch, p) - mean) / std::sqrt(var + 1e-5) * w.gamma[ch] + w.beta[ch] : 0.0;
            const double err = std::abs(got - want);
            worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
          }
        }
      }
      EXPECT_LT(worst, 1e-4) << graph::to_string(from) << " -> " << graph::to_string(to);
    }
  }
}


// Rows of a row-major tensor (a transformer's tokens) of few and of many features, the values far
// from zero against their spread (50 + N(0, 1): a one-pass variance would cancel): against the
// definition in double precision, the tail past the last whole vector included (100 = 6 x 16 + 4).
// Float sums below 4096 features, double sums above.
TEST(ChannelNorms, TheLayerNormOfRowsWithAnOffsetMatchesTheDefinition) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t c : {100, 768, 5000}) {
    const int64_t rows = 70;
    std::vector<float> x(static_cast<size_t>(rows * c));
    for (float& v : x) v = 50.0f + normal(rng);
    graph::OpWeights w;
    for (int64_t i = 0; i < c; ++i) {
      w.gamma.push_back(1.0f + 0.1f * normal(rng));
      w.beta.push_back(normal(rng));
    }
    graph::TensorDesc d;
    d.shape = graph::Shape{1, rows, c};
    d.layout = Layout::kRowMajor;
    const std::vector<float> y = stagecraft::testing::run_f32_kernel(stagecraft::testing::cpu_backend(), layer_norm_spec(d, w), {x});
    ASSERT_EQ(y.size(), x.size());
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * c;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < c; ++i) mean += row[i] / static_cast<double>(c);
      for (int64_t i = 0; i < c; ++i) var += std::pow(row[i] - mean, 2) / static_cast<double>(c);
      for (int64_t i = 0; i < c; ++i) {
        const double want = (row[i] - mean) / std::sqrt(var + 1e-5) * w.gamma[static_cast<size_t>(i)] + w.beta[static_cast<size_t>(i)];
        const double err = std::abs(y[static_cast<size_t>(r * c + i)] - want);
        worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
      }
    }
    EXPECT_LT(worst, 2e-5) << c << " features";
  }
}

}  // namespace
}  // namespace stagecraft::executor
