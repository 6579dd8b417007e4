// pool_nd (ONNX MaxPool / AveragePool of any spatial rank, with dilations) on the CPU backend's
// host loop against the reference's written-out loop: 1-D, 2-D (a convolution's tensor, read in
// every layout the plan may hold it in) and 3-D, with pads, strides, dilations, ceil_mode and
// count_include_pad; the output extents against values worked out by hand; a NaN in a window.
#include <gtest/gtest.h>

#include <cmath>

#include "common/strings.h"
#include "executor/executor.h"
#include "graph/errors.h"
#include "reference.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using graph::Layout;
using graph::OpKind;
using graph::PoolNdAttrs;

PoolNdAttrs attrs(bool max, std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> dilation,
                  std::vector<int64_t> begin, std::vector<int64_t> end, bool ceil, bool include_pad) {
  PoolNdAttrs a;
  a.max = max;
  a.kernel = std::move(kernel);
  a.stride = std::move(stride);
  a.dilation = std::move(dilation);
  a.pad_begin = std::move(begin);
  a.pad_end = std::move(end);
  a.ceil_mode = ceil;
  a.count_include_pad = include_pad;
  return a;
}

graph::Graph pool_graph(const graph::Shape& x, const PoolNdAttrs& a) {
  graph::Graph g("pool_nd");
  const graph::ValueId in = g.add_input("x", graph::make_desc(x));
  g.add_output(g.op(g.add_op("pool", OpKind::kPoolNd, a, {in})).outputs[0]);
  return g;
}

struct Case {
  std::string name;
  graph::Shape x;
  PoolNdAttrs a;
};

std::vector<Case> cases() {
  return {
      {"max 3-D, dilated, pads", graph::Shape{1, 2, 5, 6, 7},
       attrs(true, {2, 3, 2}, {1, 2, 2}, {1, 1, 2}, {0, 1, 1}, {1, 1, 0}, false, false)},
      {"average 3-D, ceil, count_include_pad", graph::Shape{2, 2, 5, 6, 7},
       attrs(false, {3, 2, 2}, {2, 2, 3}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1}, true, true)},
      {"average 3-D, ceil, dilated, pads excluded", graph::Shape{1, 3, 8, 7, 6},
       attrs(false, {2, 2, 3}, {3, 2, 2}, {2, 3, 1}, {1, 1, 0}, {0, 1, 2}, true, false)},
      {"max 2-D, dilated (a convolution's tensor)", graph::Shape{2, 3, 9, 11},
       attrs(true, {3, 2}, {2, 1}, {2, 3}, {1, 0}, {1, 2}, false, false)},
      {"average 1-D, dilated", graph::Shape{2, 3, 10},
       attrs(false, {3}, {2}, {2}, {1}, {2}, true, true)},
  };
}

TEST(PoolNd, MatchesTheReferenceInEveryRankAndLayout) {
  for (const Case& c : cases()) {
    const stagecraft::testing::Model m = stagecraft::testing::model_of(pool_graph(c.x, c.a), 3);
    const auto inputs = stagecraft::testing::inputs_of(m.graph);
    const auto want = testing::reference_run(m.graph, m.weights, inputs);
    const auto schedule = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
    const std::vector<Layout> layouts = c.x.rank() == 4
        ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}
        : std::vector<Layout>{Layout::kNCHW};
    for (Layout layout : layouts) {
      PlanOptions options;
      options.layouts = graph::LayoutAssignment::uniform(layout);
      ExecutionPlan plan(m.graph, schedule, m.weights, stagecraft::testing::cpu_backend(), options);
      EXPECT_TRUE(plan.fallbacks().empty()) << c.name;
      const auto got = Executor(plan).run(inputs);
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].shape, want[0].shape) << c.name;
      EXPECT_LT(relative_error(got[0], want[0]), 1e-6) << c.name << " in " << graph::to_string(layout);
    }
  }
}

TEST(PoolNd, OutputExtentsFollowOnnx) {
  // in 4, window 2, stride 2, pad_end 1: floor((4 + 1 - 2) / 2) + 1 = 2; with ceil_mode 3 windows
  // would fit, but the third would start at 4, past the input: 2.
  PoolNdAttrs a = attrs(true, {2}, {2}, {1}, {0}, {1}, false, false);
  EXPECT_EQ(graph::pool_nd_extent(a, 0, 4), 2);
  a.ceil_mode = true;
  EXPECT_EQ(graph::pool_nd_extent(a, 0, 4), 2);
  // in 5, window 2, stride 2, no pads: floor(3 / 2) + 1 = 2, ceil 3 (the third starts at 4 < 5).
  a = attrs(true, {2}, {2}, {1}, {0}, {0}, false, false);
  EXPECT_EQ(graph::pool_nd_extent(a, 0, 5), 2);
  a.ceil_mode = true;
  EXPECT_EQ(graph::pool_nd_extent(a, 0, 5), 3);
  // A dilated window: kernel 3, dilation 4 spans 9: in 9 gives 1, in 8 none.
  a = attrs(false, {3}, {1}, {4}, {0}, {0}, false, false);
  EXPECT_EQ(graph::pool_nd_extent(a, 0, 9), 1);
  EXPECT_EQ(graph::pool_nd_extent(a, 0, 8), 0);
  // Shape inference refuses it in one line.
  graph::Graph g("too_small");
  const graph::ValueId in = g.add_input("x", graph::make_desc(graph::Shape{1, 1, 8}));
  try {
    g.add_op("pool", OpKind::kPoolNd, a, {in});
    ADD_FAILURE() << "a window larger than the input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the padded input"), std::string::npos) << e.what();
  }
}

TEST(PoolNd, ANaNInAWindowIsTheMaximum) {
  const stagecraft::testing::Model m =
      stagecraft::testing::model_of(pool_graph(graph::Shape{1, 1, 2, 2, 4}, attrs(true, {1, 1, 2}, {1, 1, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, false, false)), 3);
  HostTensor x{graph::Shape{1, 1, 2, 2, 4}, std::vector<float>(16, 1.0f)};
  x.data[5] = NAN;  // window (0, 1, 0) holds it
  ExecutionPlan plan(m.graph, stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential),
                     m.weights, stagecraft::testing::cpu_backend(), PlanOptions{});
  const auto got = Executor(plan).run({x});
  ASSERT_EQ(got[0].data.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(std::isnan(got[0].data[i]), i == 2) << i;
}

}  // namespace
}  // namespace stagecraft::executor
