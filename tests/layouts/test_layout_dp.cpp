// The layout DP against exhaustive enumeration of every assignment on small random graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/hash.h"
#include "layouts/layout_dp.h"
#include "../scheduler/test_support.h"

namespace stagecraft::layouts {
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

// Costs where converting and then reading never beats reading directly: an op pays a base cost
// for its output layout plus, per input, a conversion to its output's layout priced by a metric
// (weight of the tensor x distance between layouts on a line). Dominance pruning is exact here.
class ConvertingLayoutCost : public LayoutCostModel {
 public:
  explicit ConvertingLayoutCost(uint64_t salt) : salt_(salt) {}
  double op_ms(const graph::Graph& g, graph::OpId id, const std::vector<Layout>& inputs,
               Layout output) override {
    Fnv1a h;
    h.add_int(salt_);
    h.add_int(static_cast<uint64_t>(id));
    h.add_int(static_cast<uint64_t>(output));
    double cost = 0.1 + static_cast<double>(h.digest() % 1000) / 1000.0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      cost += conversion_ms(g.value(g.op(id).inputs[i]).desc, inputs[i], output);
    }
    return cost;
  }
  double conversion_ms(const graph::TensorDesc& desc, Layout from, Layout to) override {
    const double weight = 0.05 * static_cast<double>(desc.shape[1] % 7 + 1);
    return weight * std::abs(position(from) - position(to));
  }

 private:
  static double position(Layout l) {
    return l == Layout::kNHWC ? 1.0 : l == Layout::kNChw16c ? 2.0 : 0.0;
  }
  uint64_t salt_;
};

// The layouts every test here chooses among.
const std::vector<Layout> kCandidates = {Layout::kNCHW, Layout::kNHWC, Layout::kNChw16c};

// The exact (exhaustive) layout DP over kCandidates.
LayoutDpOptions exhaustive_options() {
  LayoutDpOptions options;
  options.candidates = kCandidates;
  options.exhaustive = true;
  return options;
}

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
  scheduler::testing::Rng rng(900 + GetParam());
  const graph::Graph g = scheduler::testing::random_dag(rng, 3 + rng.below(4), 1 + rng.below(4));
  RandomLayoutCost model(GetParam());
  const double best = exhaustive_best(g, model, kCandidates);
  LayoutDpOptions options = exhaustive_options();
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

class DominanceGraphs : public ::testing::TestWithParam<int> {};

TEST_P(DominanceGraphs, DominancePruningKeepsTheOptimumWhenConvertingNeverHelps) {
  scheduler::testing::Rng rng(1900 + GetParam());
  const graph::Graph g = scheduler::testing::random_dag(rng, 4 + rng.below(5), 1 + rng.below(4));
  ConvertingLayoutCost model(GetParam());
  LayoutDpOptions options = exhaustive_options();
  const LayoutPlan exact = optimize_layouts(g, model, options);
  EXPECT_NEAR(exact.predicted_ms, exhaustive_best(g, model, kCandidates), 1e-9);
  // Dominance alone (no factor, no cap): the same optimum with fewer states.
  options.exhaustive = false;
  options.prune_factor = std::numeric_limits<double>::infinity();
  options.max_states = std::numeric_limits<size_t>::max();
  const LayoutPlan pruned = optimize_layouts(g, model, options);
  EXPECT_NEAR(pruned.predicted_ms, exact.predicted_ms, 1e-9);
  EXPECT_NEAR(layout_plan_cost(g, model, pruned.value_layouts), pruned.predicted_ms, 1e-9);
  EXPECT_LE(pruned.states, exact.states);
}

INSTANTIATE_TEST_SUITE_P(Seeds, DominanceGraphs, ::testing::Range(0, 60));

TEST(LayoutOptimizer, DominanceDropsStatesOnTheseGraphs) {
  // Not vacuous: dominance drops states (and keeps the optimum).
  scheduler::testing::Rng rng(7);
  const graph::Graph g = scheduler::testing::random_dag(rng, 9, 3);
  ConvertingLayoutCost model(7);
  LayoutDpOptions options;
  options.candidates = kCandidates;
  options.prune_factor = std::numeric_limits<double>::infinity();
  const LayoutPlan pruned = optimize_layouts(g, model, options);
  options.dominance = false;
  const LayoutPlan plain = optimize_layouts(g, model, options);
  EXPECT_GT(pruned.dominated, 0u);
  EXPECT_LT(pruned.states, plain.states);
  EXPECT_NEAR(pruned.predicted_ms, plain.predicted_ms, 1e-9);
}

// A table filled from the random model at exactly its queries and conversions: the DP never asks
// for a combination the queries missed (that throws), the exhaustive DP on the table equals
// enumeration on it, and ops reading two or more chosen values cost their uniform time plus one
// conversion per differing input.
class TableGraphs : public ::testing::TestWithParam<int> {};

TEST_P(TableGraphs, QueriesCoverEveryLookupAndMixedInputsPayConversions) {
  scheduler::testing::Rng rng(1300 + GetParam());
  const graph::Graph g = scheduler::testing::random_dag(rng, 3 + rng.below(4), 1 + rng.below(4));
  RandomLayoutCost source(GetParam());
  LayoutCostTable table(kCandidates);
  for (const LayoutQuery& q : table.queries(g)) table.set(q, source.op_ms(g, q.op, q.inputs, q.output));
  size_t conversions = 0;
  for (const ConversionQuery& c : table.conversions(g)) {
    table.set(c, 0.01 * static_cast<double>(1 + ++conversions));
    EXPECT_NE(c.from, c.to);
  }
  const LayoutPlan exact = optimize_layouts(g, table, exhaustive_options());
  EXPECT_NEAR(exact.predicted_ms, exhaustive_best(g, table, kCandidates), 1e-9);
  for (const auto& op : g.ops()) {
    std::vector<size_t> chosen;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (chooses_layout(g, op.inputs[i])) chosen.push_back(i);
    if (chosen.size() < 2 || !chooses_layout(g, op.outputs[0])) continue;
    std::vector<Layout> inputs(op.inputs.size(), Layout::kNC);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const graph::TensorDesc& desc = g.value(op.inputs[i]).desc;
      inputs[i] = desc.shape.rank() == 4 ? desc.layout : Layout::kNC;
    }
    std::vector<Layout> mixed = inputs;
    for (size_t i : chosen) inputs[i] = mixed[i] = Layout::kNHWC;
    mixed[chosen[0]] = Layout::kNCHW;
    const double conversion = table.conversion_ms(g.value(op.inputs[chosen[0]]).desc, Layout::kNCHW, Layout::kNHWC);
    EXPECT_GT(conversion, 0);
    EXPECT_NEAR(table.op_ms(g, op.id, mixed, Layout::kNHWC),
                table.op_ms(g, op.id, inputs, Layout::kNHWC) + conversion, 1e-12);
  }
  // A combination outside the queries is an error, not a silent zero.
  LayoutCostTable empty(kCandidates);
  EXPECT_THROW(optimize_layouts(g, empty, exhaustive_options()), Error);
}

INSTANTIATE_TEST_SUITE_P(Seeds, TableGraphs, ::testing::Range(0, 40));

TEST(LayoutOptimizer, NoCandidatesIsAnError) {
  scheduler::testing::Rng rng(1);
  const graph::Graph g = scheduler::testing::random_dag(rng, 3, 2);
  RandomLayoutCost model(1);
  EXPECT_THROW(optimize_layouts(g, model, LayoutDpOptions{}), UsageError);
}

}  // namespace
}  // namespace stagecraft::layouts
