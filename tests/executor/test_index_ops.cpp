// top_k and gather_elements (a detector's end-to-end head) on the CPU backend against the
// reference's own loops (a selection by scans where the kernel sorts partially): random data,
// exact ties and NaN ordered as ONNX Runtime orders them, the smallest first, indices of a
// top_k gathering another tensor, a negative index and one outside the axis.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/strings.h"
#include "executor/executor.h"
#include "graph/errors.h"
#include "reference.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using graph::OpKind;

// The graph's outputs on the CPU backend and on the reference, for `inputs`.
void expect_exact(const graph::Graph& g, const std::vector<HostTensor>& inputs, const std::string& what) {
  const stagecraft::testing::Model m = stagecraft::testing::model_of(g, 3);
  const auto want = testing::reference_run(m.graph, m.weights, inputs);
  const auto schedule = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  ExecutionPlan plan(m.graph, schedule, m.weights, stagecraft::testing::cpu_backend(), PlanOptions{});
  EXPECT_TRUE(plan.fallbacks().empty()) << what;
  const auto got = Executor(plan).run(inputs);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape, want[i].shape) << what;
    for (size_t j = 0; j < got[i].data.size(); ++j) {
      const float a = got[i].data[j], b = want[i].data[j];
      EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << what << ": output " << i << " element " << j << ": " << a << " vs " << b;
    }
  }
}

// x [shape] -> top_k(axis, k, largest) -> values, indices; indices gather `data` (x's shape)
// along the axis.
graph::Graph top_k_graph(const graph::Shape& x, int64_t axis, int64_t k, bool largest, bool ordered_nan = true) {
  graph::Graph g("top_k");
  const graph::ValueId in = g.add_input("x", graph::make_desc(x));
  const graph::ValueId data = g.add_input("data", graph::make_desc(x));
  graph::TopKAttrs a;
  a.axis = axis, a.k = k, a.largest = largest, a.ordered_nan = ordered_nan;
  const graph::Op& top = g.op(g.add_op("top", OpKind::kTopK, a, {in}));
  const graph::ValueId values = top.outputs[0], indices = top.outputs[1];
  graph::GatherElementsAttrs ga;
  ga.axis = axis;
  g.add_output(values);
  g.add_output(indices);
  g.add_output(g.op(g.add_op("gather", OpKind::kGatherElements, ga, {data, indices})).outputs[0]);
  return g;
}

TEST(IndexOps, TopKAndGatherElementsMatchTheReference) {
  struct Case {
    graph::Shape x;
    int64_t axis, k;
    bool largest;
  };
  for (const Case& c : {Case{graph::Shape{2, 9, 5}, 1, 3, true}, Case{graph::Shape{3, 40}, 1, 40, false},
                        Case{graph::Shape{1, 4, 3, 6}, 3, 2, true}, Case{graph::Shape{6, 2}, 0, 4, false}}) {
    const graph::Graph g = top_k_graph(c.x, c.axis, c.k, c.largest);
    expect_exact(g, {random_host_tensor(c.x, 5), random_host_tensor(c.x, 6)},
                 cat(c.x.to_string(), " axis ", c.axis, " k ", c.k, c.largest ? " largest" : " smallest"));
  }
}

TEST(IndexOps, TheBestOfEachLineFollowsEitherNaNRule) {
  // k = 1 (the kernel's own running-best loop over lines side by side) on [2, 4, 3000], NaN
  // sprinkled in; by hand on one line: TopK's order takes the NaN, ArgMax's plain comparisons
  // keep the first element when it is NaN and skip a later one.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const graph::Shape s{2, 4, 3000};
  HostTensor x = random_host_tensor(s, 7), data = random_host_tensor(s, 8);
  for (size_t i = 0; i < x.data.size(); i += 37) x.data[i] = nan;
  for (bool largest : {true, false}) {
    for (bool ordered : {true, false}) {
      expect_exact(top_k_graph(s, 1, 1, largest, ordered), {x, data},
                   cat(largest ? "largest" : "smallest", ordered ? ", NaN ordered" : ", plain comparisons"));
    }
  }
  const graph::Shape line{1, 4};
  const HostTensor first_nan{line, {nan, 3, nan, 5}}, later_nan{line, {1, nan, 4, 2}};
  const auto index = [&](const HostTensor& v, bool ordered) {
    const stagecraft::testing::Model m = stagecraft::testing::model_of(top_k_graph(line, 1, 1, true, ordered), 3);
    return testing::reference_run(m.graph, m.weights, {v, v})[1].data[0];
  };
  EXPECT_EQ(index(first_nan, true), 0);
  EXPECT_EQ(index(first_nan, false), 0);
  EXPECT_EQ(index(later_nan, true), 1);
  EXPECT_EQ(index(later_nan, false), 2);
  expect_exact(top_k_graph(line, 1, 1, true, false), {later_nan, later_nan}, "one line, plain comparisons");
}

TEST(IndexOps, TiesGoByLowerIndexAndNaNIsTheLargest) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const graph::Shape s{1, 8};
  HostTensor x{s, {2, 5, nan, 5, -1, 2, nan, 0}}, data{s, {10, 11, 12, 13, 14, 15, 16, 17}};
  for (bool largest : {true, false}) expect_exact(top_k_graph(s, 1, 5, largest), {x, data}, largest ? "largest" : "smallest");
  // By hand: largest NaN (2), NaN (6), 5 (1), 5 (3), 2 (0); smallest -1 (4), 0 (7), 2 (0), 2 (5), 5 (1).
  const stagecraft::testing::Model m = stagecraft::testing::model_of(top_k_graph(s, 1, 5, false), 3);
  const auto want = testing::reference_run(m.graph, m.weights, {x, data});
  EXPECT_EQ(want[1].data, (std::vector<float>{4, 7, 0, 5, 1}));
  EXPECT_EQ(want[2].data, (std::vector<float>{14, 17, 10, 15, 11}));
}

TEST(IndexOps, GatherElementsTakesNegativeIndicesAndGivesNaNOutsideTheAxis) {
  graph::Graph g("gather");
  const graph::Shape s{2, 3};
  const graph::ValueId data = g.add_input("data", graph::make_desc(s));
  const graph::ValueId idx = g.add_input("idx", graph::make_desc(s));
  graph::GatherElementsAttrs a;
  a.axis = 1;
  g.add_output(g.op(g.add_op("gather", OpKind::kGatherElements, a, {data, idx})).outputs[0]);
  const HostTensor d{s, {1, 2, 3, 4, 5, 6}}, i{s, {-1, 0, 3, 2, -3, 1.5f}};
  expect_exact(g, {d, i}, "negative and outside");
  const stagecraft::testing::Model m = stagecraft::testing::model_of(g, 3);
  const auto want = testing::reference_run(m.graph, m.weights, {d, i});
  EXPECT_EQ(want[0].data[0], 3.0f);
  EXPECT_EQ(want[0].data[1], 1.0f);
  EXPECT_TRUE(std::isnan(want[0].data[2]));
  EXPECT_EQ(want[0].data[4], 4.0f);
}

}  // namespace
}  // namespace stagecraft::executor
