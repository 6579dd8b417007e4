// Layer normalisation over channels and GELU (erf and tanh forms) on the CPU backend: in every
// layout (channel counts that are not multiples of the block), fused into a convolution or alone,
// against the reference loops.
#include <gtest/gtest.h>

#include "executor/executor.h"
#include "graph/passes.h"
#include "reference.h"
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

}  // namespace
}  // namespace stagecraft::executor
