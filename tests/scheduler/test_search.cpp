// Property tests of the schedulers on hundreds of random DAGs, against brute force.
#include <gtest/gtest.h>

#include "graph/blocks.h"
#include "graph/yaml_io.h"
#include "networks/builder.h"
#include "scheduler/dp.h"
#include "scheduler/search.h"
#include "scheduler/stage_key.h"
#include "test_support.h"

namespace stagecraft::scheduler {
namespace {

using namespace testing;  // test_support.h

Schedule run(const graph::Graph& g, CostModel& model, Strategy strategy, DpMode mode, bool pruned,
             int r = 3, int s = 8) {
  SearchOptions options;
  options.strategy = strategy;
  options.mode = mode;
  options.pruned = pruned;
  options.max_group_size = r;
  options.max_num_groups = s;
  return search(g, model, options);
}

// The schedule's cost recomputed from scratch must equal what the search predicted.
void expect_consistent_cost(const graph::Graph& g, CostModel& model, Schedule schedule) {
  const double predicted = schedule.meta.predicted_ms;
  EXPECT_NEAR(cost_schedule(g, model, schedule), predicted, kTolerance);
}

class RandomDags : public ::testing::TestWithParam<int> {};

// Unpruned DP == exhaustive enumeration of every schedule (no memo) on graphs of <= 7 ops.
TEST_P(RandomDags, UnprunedDpEqualsExhaustiveEnumeration) {
  Rng rng(1000 + GetParam());
  const graph::Graph g = testing::random_dag(rng, 3 + rng.below(5), 1 + rng.below(4));
  for (DpMode mode : {DpMode::kBoth, DpMode::kConcurrent, DpMode::kMerge}) {
    RandomKeyCostModel model(GetParam());
    size_t seen = 0;
    const double best = brute_force_best(g, model, mode, /*memoise=*/false, &seen);
    const Schedule dp = run(g, model, Strategy::kDp, mode, /*pruned=*/false);
    EXPECT_NEAR(dp.meta.predicted_ms, best, kTolerance)
        << "mode " << to_string(mode) << ", " << g.num_ops() << " ops, " << seen << " schedules";
    expect_consistent_cost(g, model, dp);
  }
}

// Unpruned DP == memoised forward enumeration on graphs of 8-10 ops; pruned DP never better;
// DP never worse than greedy and sequential; every schedule validates and respects r and s.
TEST_P(RandomDags, DpBoundsOnLargerGraphs) {
  Rng rng(5000 + GetParam());
  const graph::Graph g = testing::random_dag(rng, 8 + rng.below(3), 1 + rng.below(6));
  RandomCostModels models(GetParam());
  for (CostModel* model : models.both()) {
    const double best = brute_force_best(g, *model, DpMode::kBoth, /*memoise=*/true);
    const Schedule unpruned = run(g, *model, Strategy::kDp, DpMode::kBoth, false);
    EXPECT_NEAR(unpruned.meta.predicted_ms, best, kTolerance) << model->name();
    const int r = 1 + rng.below(3);
    const int s = 1 + rng.below(4);
    const Schedule pruned = run(g, *model, Strategy::kDp, DpMode::kBoth, true, r, s);
    EXPECT_GE(pruned.meta.predicted_ms, unpruned.meta.predicted_ms - kTolerance);
    for (const Stage& stage : pruned.stages) {
      if (stage.kind != StageKind::kConcurrent) continue;
      EXPECT_LE(static_cast<int>(stage.groups.size()), s);
      for (const auto& group : stage.groups) EXPECT_LE(static_cast<int>(group.size()), r);
    }
    const Schedule sequential = run(g, *model, Strategy::kSequential, DpMode::kBoth, true);
    const Schedule greedy = run(g, *model, Strategy::kGreedy, DpMode::kBoth, true, r, s);
    const Schedule dp = run(g, *model, Strategy::kDp, DpMode::kBoth, true, r, s);
    EXPECT_LE(dp.meta.predicted_ms, sequential.meta.predicted_ms + kTolerance);
    EXPECT_LE(dp.meta.predicted_ms, greedy.meta.predicted_ms + kTolerance);
    for (const Schedule* s2 : {&pruned, &sequential, &greedy}) expect_consistent_cost(g, *model, *s2);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomDags, ::testing::Range(0, 150));

TEST(Search, SequentialIsOneOpPerStageInTopologicalOrder) {
  Rng rng(7);
  const graph::Graph g = testing::random_dag(rng, 9, 3);
  RandomOpCostModel model(1);
  const Schedule s = run(g, model, Strategy::kSequential, DpMode::kBoth, true);
  ASSERT_EQ(s.stages.size(), g.num_ops());
  for (size_t i = 0; i < s.stages.size(); ++i) {
    EXPECT_EQ(s.stages[i].groups, (std::vector<std::vector<OpId>>{{static_cast<OpId>(i)}}));
  }
}

TEST(Search, GreedyTakesTheWholeWavefrontUpToTheCap) {
  // input -> 5 independent relus -> add of all: wavefronts {5 relus}, {add}
  networks::NetBuilder b("wave", 1, 2, 4, 4);
  std::vector<graph::ValueId> branches;
  for (int i = 0; i < 5; ++i) branches.push_back(b.relu(b.input()));
  const graph::Graph g = std::move(b).finish({b.add(branches)});
  RandomOpCostModel model(1);
  Schedule s = run(g, model, Strategy::kGreedy, DpMode::kBoth, true, 3, 8);
  ASSERT_EQ(s.stages.size(), 2u);
  EXPECT_EQ(s.stages[0].groups.size(), 5u);
  s = run(g, model, Strategy::kGreedy, DpMode::kBoth, true, 3, 2);  // cap of 2 streams
  ASSERT_EQ(s.stages.size(), 4u);
  EXPECT_EQ(s.stages[0].groups.size(), 2u);
  EXPECT_EQ(s.stages[2].groups.size(), 1u);
}

TEST(Search, MetadataDescribesTheSearch) {
  Rng rng(3);
  const graph::Graph g = testing::random_dag(rng, 6, 2);
  RandomOpCostModel model(2);
  const Schedule s = run(g, model, Strategy::kDp, DpMode::kMerge, true, 2, 5);
  EXPECT_EQ(s.meta.network, "random");
  EXPECT_EQ(s.meta.graph_hash, graph::graph_hash(g));
  EXPECT_EQ(s.meta.num_ops, g.num_ops());
  EXPECT_EQ(s.meta.batch, 1);
  EXPECT_EQ(s.meta.dtype, "f32");
  EXPECT_EQ(s.meta.cost_model, "random-op");
  EXPECT_EQ(s.meta.search.strategy, Strategy::kDp);
  EXPECT_EQ(s.meta.search.mode, DpMode::kMerge);
  EXPECT_EQ(s.meta.search.max_group_size, 2);
  EXPECT_EQ(s.meta.search.max_num_groups, 5);
  for (const Stage& stage : s.stages) {
    // merge mode: single ops or merges, never concurrent groups
    if (stage.kind == StageKind::kConcurrent) {
      EXPECT_EQ(stage.num_ops(), 1u);
    }
  }
}

TEST(Search, IdenticalStagesAreCostedOnce) {
  // Two identical branches: their single-op stages share canonical keys.
  networks::NetBuilder b("twins", 1, 8, 8, 8);
  graph::ValueId x = b.input();
  graph::ValueId l = b.conv(x, networks::square_conv(8, 3, 1, 1), "left");
  graph::ValueId r = b.conv(x, networks::square_conv(8, 3, 1, 1), "right");
  const graph::Graph g = std::move(b).finish({b.add({l, r})});
  struct Counting : RandomOpCostModel {
    using RandomOpCostModel::RandomOpCostModel;
    int calls = 0;
    double stage_latency_ms(const graph::Graph& gr, const graph::LayoutAssignment& /*layouts*/,
                            const Stage& st) override {
      ++calls;
      return RandomOpCostModel::stage_latency_ms(gr, {}, st);
    }
  } model(1);
  SearchStats stats;
  SearchOptions options;
  make_scheduler(options)->schedule(g, model, &stats);
  EXPECT_EQ(static_cast<size_t>(model.calls), stats.stage_keys);
  EXPECT_LT(stats.stage_keys, stats.transitions);
  // {left} and {right} alone are the same stage: one key for both.
  EXPECT_EQ(stage_key(g, Stage::concurrent({{0}})), stage_key(g, Stage::concurrent({{1}})));
  EXPECT_EQ(stage_key(g, Stage::concurrent({{0}, {1}})), stage_key(g, Stage::concurrent({{1}, {0}})));
  EXPECT_NE(stage_key(g, Stage::concurrent({{0}, {1}})), stage_key(g, Stage::merge({0, 1})));
}

TEST(Search, WideBlocksAreSplitAndReported) {
  // 12 independent two-op branches: far more transitions than a tiny budget allows.
  networks::NetBuilder b("wide", 1, 8, 8, 8);
  std::vector<graph::ValueId> branches;
  for (int i = 0; i < 12; ++i) branches.push_back(b.relu(b.relu(b.input())));
  const graph::Graph g = std::move(b).finish({b.concat(branches)});
  SearchOptions options;
  options.max_part_transitions = 500;
  std::string note;
  const auto blocks = graph::partition_blocks(g);
  ASSERT_EQ(blocks.size(), 1u);
  const auto parts = split_block(g, blocks[0].ops, options, &note);
  EXPECT_GT(parts.size(), 1u);
  size_t total = 0;
  for (const auto& part : parts) {
    total += part.size();
    EXPECT_LE(estimate_transitions(g, part, options), 500.0);
  }
  EXPECT_EQ(total, g.num_ops());
  EXPECT_NE(note.find("split into"), std::string::npos);
  RandomOpCostModel model(1);
  SearchStats stats;
  search(g, model, options, &stats);
  ASSERT_EQ(stats.splits.size(), 1u);
  EXPECT_EQ(stats.parts, parts.size());
}

TEST(Search, ProgressIsReported) {
  Rng rng(11);
  const graph::Graph g = testing::random_dag(rng, 10, 4);
  RandomOpCostModel model(1);
  SearchOptions options;
  std::vector<SearchProgress> reports;
  options.on_progress = [&](const SearchProgress& p) { reports.push_back(p); };
  make_scheduler(options)->schedule(g, model);
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().block, reports.back().num_blocks);
  EXPECT_GT(reports.back().states, 0u);
}

TEST(Search, BadOptionsAreUsageErrors) {
  SearchOptions options;
  options.max_group_size = 0;
  EXPECT_THROW(make_scheduler(options), UsageError);
  EXPECT_THROW(parse_strategy("dynamic"), UsageError);
  EXPECT_THROW(parse_dp_mode("parallel"), UsageError);
  EXPECT_EQ(parse_dp_mode("concurrent"), DpMode::kConcurrent);
}

}  // namespace
}  // namespace stagecraft::scheduler
