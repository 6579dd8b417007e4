// The layout DP against exhaustive enumeration of every assignment on small random graphs.
#include <gtest/gtest.h>

#include <limits>

#include "common/hash.h"
#include "scheduler/layout_optimizer.h"
#include "test_support.h"

namespace stagecraft::scheduler {
namespace {

using graph::Layout;

// A cost per (op, input layouts, output layout) from a hash: arbitrary but consistent; a few
// combinations cannot run (infinity).
class RandomLayoutCost : public LayoutCostModel {
 public:
  explicit RandomLayoutCost(uint64_t salt) : salt_(salt) {}
  double op_ms(const graph::Graph&, graph::OpId id, const std::vector<Layout>& inputs,
               Layout output) override {
    Fnv1a h;
    h.add_int(salt_);
    h.add_int(static_cast<uint64_t>(id));
    for (Layout l : inputs) h.add_int(static_cast<uint64_t>(l));
    h.add_int(static_cast<uint64_t>(output));
    const uint64_t d = h.digest();
    if (d % 23 == 0) return std::numeric_limits<double>::infinity();
    return 0.1 + static_cast<double>(d % 1000) / 1000.0;
  }

 private:
  uint64_t salt_;
};

double exhaustive_best(const graph::Graph& g, LayoutCostModel& model,
                       const std::vector<Layout>& candidates) {
  std::vector<graph::ValueId> free;
  std::vector<Layout> layouts;
  for (size_t v = 0; v < g.num_values(); ++v) {
    const auto& value = g.value(static_cast<graph::ValueId>(v));
    layouts.push_back(value.desc.shape.rank() == 4 ? value.desc.layout : Layout::kNC);
  }
  // One choice per op (its outputs share it).
  std::vector<graph::OpId> ops;
  for (const auto& op : g.ops())
    if (g.value(op.outputs[0]).desc.shape.rank() == 4) ops.push_back(op.id);
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> choice(ops.size(), 0);
  for (;;) {
    for (size_t i = 0; i < ops.size(); ++i)
      for (graph::ValueId v : g.op(ops[i]).outputs) layouts[v] = candidates[choice[i]];
    best = std::min(best, layout_plan_cost(g, model, layouts));
    size_t i = 0;
    while (i < choice.size() && ++choice[i] == candidates.size()) choice[i++] = 0;
    if (i == choice.size()) break;
  }
  return best;
}

class RandomLayoutGraphs : public ::testing::TestWithParam<int> {};

TEST_P(RandomLayoutGraphs, ExhaustiveDpEqualsEnumerationAndPruningNeverWins) {
  testing::Rng rng(900 + GetParam());
  const graph::Graph g = testing::random_dag(rng, 3 + rng.below(4), 1 + rng.below(4));
  const std::vector<Layout> candidates = {Layout::kNCHW, Layout::kNHWC, Layout::kNChw16c};
  RandomLayoutCost model(GetParam());
  const double best = exhaustive_best(g, model, candidates);
  LayoutOptions options;
  options.candidates = candidates;
  options.exhaustive = true;
  const LayoutPlan exact = optimize_layouts(g, model, options);
  EXPECT_NEAR(exact.predicted_ms, best, 1e-9);
  EXPECT_NEAR(layout_plan_cost(g, model, exact.value_layouts), exact.predicted_ms, 1e-9);
  options.exhaustive = false;
  options.max_states = 2;
  options.prune_factor = 1.05;
  const LayoutPlan pruned = optimize_layouts(g, model, options);
  EXPECT_GE(pruned.predicted_ms, exact.predicted_ms - 1e-9);
  EXPECT_NEAR(layout_plan_cost(g, model, pruned.value_layouts), pruned.predicted_ms, 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomLayoutGraphs, ::testing::Range(0, 100));

TEST(LayoutOptimizer, NoCandidatesIsAnError) {
  testing::Rng rng(1);
  const graph::Graph g = testing::random_dag(rng, 3, 2);
  RandomLayoutCost model(1);
  EXPECT_THROW(optimize_layouts(g, model, LayoutOptions{}), UsageError);
}

}  // namespace
}  // namespace stagecraft::scheduler
