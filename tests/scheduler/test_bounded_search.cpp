// The DP on a cost model that measures (SearchBudget): it measures single ops first, estimates
// the other stages from them, and measures only what can change its answer. Checked against the
// exact DP on the same costs (itself checked against brute force in test_search.cpp), on random
// DAGs and on the built-in networks.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "graph/passes.h"
#include "networks/registry.h"
#include "scheduler/search.h"
#include "scheduler/stage_key.h"
#include "test_support.h"

namespace stagecraft::scheduler {
namespace {

using namespace testing;  // test_support.h

// A cost model that measures: it knows a stage's latency only once it measured it (its cache,
// kept across searches), answering with the latencies of `truth`.
class MeasuringModel : public CostModel {
 public:
  explicit MeasuringModel(CostModel& truth) : truth_(truth) {}
  std::string name() const override { return truth_.name(); }
  std::string device_fingerprint() const override { return truth_.device_fingerprint(); }
  double stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                          const Stage& stage) override {
    ++measurements;
    const double ms = truth_.stage_latency_ms(graph, layouts, stage);
    cache_[stage_key(graph, stage)] = ms;
    return ms;
  }
  std::optional<double> known_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& /*layouts*/,
                                         const Stage& stage) override {
    auto it = cache_.find(stage_key(graph, stage));
    if (it == cache_.end()) return std::nullopt;
    return it->second;
  }
  size_t measurements = 0;

 private:
  CostModel& truth_;
  std::map<std::string, double> cache_;
};

SearchOptions dp_options(bool pruned = true, DpMode mode = DpMode::kBoth) {
  SearchOptions options;
  options.strategy = Strategy::kDp;
  options.mode = mode;
  options.pruned = pruned;
  options.budget.seconds = 0;  // tests bound by measurements, never by time
  return options;
}

// The schedule's cost under the true costs (what it would really take).
double true_cost(const graph::Graph& g, CostModel& truth, Schedule s) {
  return cost_schedule(g, truth, s);
}

class BoundedRandomDags : public ::testing::TestWithParam<int> {};

// Exhaustive with no budget finds the exact optimum — the cheap model's DP and, on small graphs,
// brute force over every schedule — pruned and unpruned, in every mode, with arbitrary costs per
// stage (so no estimate is right) and with costs that follow their ops.
TEST_P(BoundedRandomDags, ExhaustiveEqualsTheExactDpAndBruteForce) {
  Rng rng(7000 + GetParam());
  const graph::Graph g = testing::random_dag(rng, 3 + rng.below(6), 1 + rng.below(4));
  RandomCostModels truths(GetParam());
  for (CostModel* truth : truths.both()) {
    for (DpMode mode : {DpMode::kBoth, DpMode::kConcurrent, DpMode::kMerge}) {
      for (bool pruned : {true, false}) {
        SearchOptions options = dp_options(pruned, mode);
        const Schedule exact = search(g, *truth, options);
        if (!pruned && g.num_ops() <= 7) {
          EXPECT_NEAR(exact.meta.predicted_ms, brute_force_best(g, *truth, mode, /*memoise=*/true),
                      kTolerance);
        }
        MeasuringModel measuring(*truth);
        options.budget.exhaustive = true;
        SearchStats stats;
        const Schedule bounded = search(g, measuring, options, &stats);
        EXPECT_NEAR(bounded.meta.predicted_ms, exact.meta.predicted_ms, kTolerance)
            << truth->name() << ", mode " << to_string(mode) << (pruned ? "" : ", unpruned") << ", "
            << g.num_ops() << " ops";
        EXPECT_NEAR(true_cost(g, *truth, bounded), bounded.meta.predicted_ms, kTolerance);
        EXPECT_TRUE(stats.converged);
        EXPECT_LE(stats.measured, stats.stage_keys);
        EXPECT_EQ(measuring.measurements, stats.measured);
      }
    }
  }
}

// Any budget gives a valid schedule no worse than sequential (single ops are always measured);
// more measurements never give a worse one (the search measures the same stages in the same order
// until its budget ends); every stage's predicted latency is what it was measured at, or for a
// chain the sum of its ops.
TEST_P(BoundedRandomDags, EveryBudgetGivesAValidScheduleAndMoreBudgetNeverWorse) {
  Rng rng(9000 + GetParam());
  const graph::Graph g = testing::random_dag(rng, 8 + rng.below(5), 1 + rng.below(5));
  RandomOpCostModel truth(GetParam());
  SearchOptions sequential = dp_options();
  sequential.strategy = Strategy::kSequential;
  const double sequential_ms = search(g, truth, sequential).meta.predicted_ms;
  double previous = std::numeric_limits<double>::infinity();
  for (size_t budget : {0, 1, 2, 4, 8, 16, 64, 100000}) {
    MeasuringModel measuring(truth);
    SearchOptions options = dp_options();
    options.budget.max_measurements = budget;
    SearchStats stats;
    const Schedule s = search(g, measuring, options, &stats);
    EXPECT_LE(s.meta.predicted_ms, sequential_ms + kTolerance) << "budget " << budget;
    EXPECT_LE(s.meta.predicted_ms, previous + kTolerance) << "budget " << budget;
    previous = s.meta.predicted_ms;
    EXPECT_LE(stats.measured, g.num_ops() + budget);
    EXPECT_EQ(s.meta.converged, stats.converged);
    if (!stats.converged) {
      EXPECT_TRUE(stats.out_of_budget);
    }
    for (const Stage& stage : s.stages) {
      double ops_ms = 0;
      for (OpId op : stage.ops()) ops_ms += truth.stage_latency_ms(g, {}, Stage::concurrent({{op}}));
      const double measured = truth.stage_latency_ms(g, {}, stage);
      const bool chain = stage.kind == StageKind::kConcurrent && stage.groups.size() == 1;
      EXPECT_TRUE(std::abs(stage.predicted_ms - measured) < kTolerance ||
                  (chain && std::abs(stage.predicted_ms - ops_ms) < kTolerance))
          << "budget " << budget << ": predicted " << stage.predicted_ms << ", measured " << measured;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, BoundedRandomDags, ::testing::Range(0, 60));

TEST(BoundedSearch, ASecondSearchOnTheSameCacheMeasuresNothing) {
  Rng rng(3);
  const graph::Graph g = testing::random_dag(rng, 12, 4);
  RandomOpCostModel truth(5);
  MeasuringModel measuring(truth);
  const Schedule first = search(g, measuring, dp_options());
  const size_t measured = measuring.measurements;
  EXPECT_GT(measured, 0u);
  SearchStats stats;
  const Schedule second = search(g, measuring, dp_options(), &stats);
  EXPECT_EQ(measuring.measurements, measured);
  EXPECT_EQ(stats.measured, 0u);
  EXPECT_EQ(stats.known, measured);
  EXPECT_DOUBLE_EQ(second.meta.predicted_ms, first.meta.predicted_ms);
}

TEST(BoundedSearch, ProgressSaysWhatWasMeasuredAndTheBestSoFar) {
  Rng rng(11);
  const graph::Graph g = testing::random_dag(rng, 12, 4);
  RandomOpCostModel truth(1);
  MeasuringModel measuring(truth);
  SearchOptions options = dp_options();
  std::vector<SearchProgress> reports;
  options.on_progress = [&](const SearchProgress& p) { reports.push_back(p); };
  SearchStats stats;
  const Schedule s = search(g, measuring, options, &stats);
  ASSERT_FALSE(reports.empty());
  const SearchProgress& last = reports.back();
  EXPECT_EQ(last.block, last.num_blocks);
  EXPECT_EQ(last.measured, stats.measured);
  EXPECT_EQ(last.stages, stats.stage_keys);
  EXPECT_EQ(last.estimated, stats.estimated);
  EXPECT_GE(last.best_ms, s.meta.predicted_ms - kTolerance);
  EXPECT_GT(last.bound_ms, 0.0);
}

// The built-in networks, costs that follow their ops (RandomOpCostModel: concurrent stages cost
// max(longest group, half the total) + 0.1 per extra group, merges 0.6 x their convolutions):
// exhaustive finds the exact DP's schedule; the default search comes within 5% of it while
// measuring a fraction of the candidates.
class BoundedNetworks : public ::testing::TestWithParam<std::string> {};

TEST_P(BoundedNetworks, BoundedSearchAgreesWithTheExactDp) {
  networks::NetworkOptions net;
  net.input_size = 96;
  const graph::Graph g = graph::prepare_for_inference(networks::build_network(GetParam(), net));
  RandomOpCostModel truth(17);
  SearchStats exact_stats;
  const Schedule exact = search(g, truth, dp_options(), &exact_stats);

  MeasuringModel measuring(truth);
  SearchStats stats;
  const Schedule bounded = search(g, measuring, dp_options(), &stats);
  EXPECT_TRUE(stats.converged);
  EXPECT_LE(bounded.meta.predicted_ms, exact.meta.predicted_ms * 1.05) << GetParam();
  // Beyond the single ops (always measured), at most half the other candidates; far fewer on the
  // large networks.
  std::set<std::string> singles;
  for (OpId op = 0; static_cast<size_t>(op) < g.num_ops(); ++op) singles.insert(stage_key(g, Stage::concurrent({{op}})));
  EXPECT_LE(stats.measured - singles.size(), (exact_stats.stage_keys - singles.size()) / 2) << GetParam();
  if (exact_stats.stage_keys > 10000) {
    EXPECT_LT(stats.measured, exact_stats.stage_keys / 10) << GetParam();
  }
  EXPECT_NEAR(true_cost(g, truth, bounded), bounded.meta.predicted_ms, 1e-6);

  SearchOptions exhaustive = dp_options();
  exhaustive.budget.exhaustive = true;
  MeasuringModel again(truth);
  SearchStats full_stats;
  const Schedule full = search(g, again, exhaustive, &full_stats);
  // Exhaustive rounds measure in batches: a few more rounds than the estimates' search.
  EXPECT_LE(full_stats.rounds, stats.rounds + 10) << GetParam();
  EXPECT_TRUE(full_stats.converged);
  EXPECT_NEAR(full.meta.predicted_ms, exact.meta.predicted_ms, 1e-6) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(BuiltIn, BoundedNetworks,
                         ::testing::Values("inception_v3", "googlenet", "squeezenet1_1",
                                           "randwire_small", "nasnet_a_mobile"));

}  // namespace
}  // namespace stagecraft::scheduler
