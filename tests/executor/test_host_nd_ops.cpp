// Our host loops for ONNX ops of any rank on the CPU backend, against the reference's own loops:
// pool_nd (MaxPool / AveragePool of any spatial rank, with dilations: 1-D, 2-D on a convolution's
// tensor in every layout, 3-D; pads, strides, ceil_mode, count_include_pad; extents worked out by
// hand; a NaN in a window) and resize_nd (ONNX Resize in full: every mode, coordinate rule and
// nearest rounding, a cubic coefficient with exclude_outside, antialias, tf_crop_and_resize's
// region and extrapolation in 5-D; the per-axis taps against values worked out by hand; the
// reference takes the tensor product of the taps where the kernel goes axis by axis).
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
using graph::ResizeNdAttrs;

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

// Runs the one-op graph `g` planned in each layout (every CPU layout when its input is 4-D: a
// convolution's tensor the plan converts) against the reference; `what` names the case.
void expect_matches_the_reference(const graph::Graph& g, const std::string& what) {
  const stagecraft::testing::Model m = stagecraft::testing::model_of(g, 3);
  const auto inputs = stagecraft::testing::inputs_of(m.graph);
  const auto want = testing::reference_run(m.graph, m.weights, inputs);
  const auto schedule = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  const bool rank4 = m.graph.value(m.graph.inputs()[0]).desc.shape.rank() == 4;
  const std::vector<Layout> layouts = rank4
      ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}
      : std::vector<Layout>{Layout::kNCHW};
  for (Layout layout : layouts) {
    PlanOptions options;
    options.layouts = graph::LayoutAssignment::uniform(layout);
    ExecutionPlan plan(m.graph, schedule, m.weights, stagecraft::testing::cpu_backend(), options);
    EXPECT_TRUE(plan.fallbacks().empty()) << what;
    const auto got = Executor(plan).run(inputs);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape, want[0].shape) << what;
    EXPECT_LT(relative_error(got[0], want[0]), 1e-6) << what << " in " << graph::to_string(layout);
  }
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
  for (const Case& c : cases()) expect_matches_the_reference(pool_graph(c.x, c.a), c.name);
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

ResizeNdAttrs resize(std::vector<int64_t> sizes, std::vector<double> scales, int64_t mode, int64_t transform) {
  ResizeNdAttrs a;
  a.sizes = std::move(sizes);
  a.scales = std::move(scales);
  a.mode = mode;
  a.transform = transform;
  return a;
}

TEST(ResizeNd, MatchesTheReferenceInEveryModeAndLayout) {
  struct Case {
    std::string name;
    graph::Shape x;
    ResizeNdAttrs a;
  };
  std::vector<Case> cases;
  cases.push_back({"nearest 3-D half_pixel round_prefer_ceil", graph::Shape{2, 5, 7},
                   resize({2, 5, 11}, {1, 1, 11.0 / 7.0}, 0, 0)});
  cases.back().a.nearest = 1;
  cases.push_back({"linear 4-D half_pixel_symmetric", graph::Shape{2, 3, 6, 9}, resize({2, 3, 4, 13}, {1, 1, 0.7, 1.5}, 1, 1)});
  cases.push_back({"cubic a=-0.5 exclude_outside asymmetric", graph::Shape{1, 2, 5, 6},
                   resize({1, 2, 8, 4}, {1, 1, 1.6, 0.7}, 2, 4)});
  cases.back().a.cubic_a = -0.5;
  cases.back().a.exclude_outside = true;
  cases.push_back({"linear antialias downsampling", graph::Shape{1, 2, 12, 10}, resize({1, 2, 5, 4}, {1, 1, 5.0 / 12, 0.4}, 1, 2)});
  cases.back().a.antialias = true;
  cases.push_back({"cubic antialias align_corners", graph::Shape{1, 2, 9, 8}, resize({1, 2, 4, 3}, {1, 1, 4.0 / 9, 3.0 / 8}, 2, 3)});
  cases.back().a.antialias = true;
  cases.push_back({"tf_crop_and_resize with extrapolation, 5-D", graph::Shape{1, 2, 4, 5, 6},
                   resize({1, 2, 3, 7, 4}, {1, 1, 0.75, 1.4, 4.0 / 6}, 1, 5)});
  cases.back().a.roi = {0, 0, 0.2, -0.1, 0.3, 1, 1, 0.9, 1.2, 0.8};
  cases.back().a.extrapolation = 7.5;
  for (const Case& c : cases) {
    graph::Graph g("resize_nd");
    const graph::ValueId in = g.add_input("x", graph::make_desc(c.x));
    g.add_output(g.op(g.add_op("resize", OpKind::kResizeNd, c.a, {in})).outputs[0]);
    expect_matches_the_reference(g, c.name);
  }
}

TEST(ResizeNd, TapsFollowOnnxsRules) {
  // linear, half_pixel, 4 -> 8: output 0 maps to -0.25, its two taps the edge pixel twice
  // (0.25 and 0.75 of pixel 0, clamped from -1); output 3 maps to 1.25: pixels 1 and 2.
  ResizeNdAttrs a = resize({8}, {2.0}, 1, 0);
  graph::ResizeTaps t = graph::resize_taps(a, 0, 4);
  ASSERT_EQ(t.index.size(), 8u);
  EXPECT_EQ(t.index[0], (std::vector<int64_t>{0, 0}));
  EXPECT_DOUBLE_EQ(t.weight[0][0], 0.25);
  EXPECT_EQ(t.index[3], (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(t.weight[3][0], 0.75);
  EXPECT_DOUBLE_EQ(t.weight[3][1], 0.25);
  // nearest, asymmetric, 4 -> 6 (scale 1.5): 2 / 1.5 = 1.33 -> round_prefer_floor 1, ceil 2.
  a = resize({6}, {1.5}, 0, 4);
  t = graph::resize_taps(a, 0, 4);
  const auto picked = [&](size_t y) { return t.weight[y][0] == 1 ? t.index[y][0] : t.index[y][1]; };
  EXPECT_EQ(picked(2), 1);
  a.nearest = 3;
  t = graph::resize_taps(a, 0, 4);
  EXPECT_EQ(picked(2), 2);
  // cubic with exclude_outside at the edge: the taps outside weigh 0, the rest sum to 1.
  a = resize({8}, {2.0}, 2, 0);
  a.exclude_outside = true;
  t = graph::resize_taps(a, 0, 4);
  EXPECT_EQ(t.weight[0][0], 0.0);
  double sum = 0;
  for (double w : t.weight[0]) sum += w;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  // An axis left alone: scale 1, same extent.
  EXPECT_TRUE(graph::resize_taps(resize({4}, {1.0}, 1, 0), 0, 4).identity);
}

}  // namespace
}  // namespace stagecraft::executor
