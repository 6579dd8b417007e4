// The end-to-end check of a searched schedule against the sequential one (session/schedule_check.h):
// both planned and run on the CPU, the verdict names both medians, a schedule of one op per stage
// is not checked, and the kept schedule is the searched one or the sequential one in the same
// layouts, whichever the margin gives.
#include <gtest/gtest.h>

#include <filesystem>

#include "executor/executor.h"
#include "session/pipeline.h"
#include "session/schedule_source.h"
#include "scheduler/search.h"
#include "session/schedule_check.h"
#include "support/models.h"

namespace stagecraft::session {
namespace {

// Two branches of one input: a concurrent stage for the schedule to hold.
graph::Graph two_branches() {
  graph::Graph g("two_branches");
  const graph::ValueId x = g.add_input("x", graph::make_desc(graph::Shape{1, 16, 12, 12}));
  graph::Conv2dAttrs c;
  c.in_channels = 16;
  c.out_channels = 16;
  c.kernel = graph::Hw::square(3);
  c.padding = graph::Pads{1, 1, 1, 1};
  const graph::OpId a = g.add_op("a", graph::OpKind::kConv2d, c, {x});
  const graph::OpId b = g.add_op("b", graph::OpKind::kConv2d, c, {x});
  graph::BinaryAttrs add;
  add.op = graph::BinaryOp::kAdd;
  const graph::OpId s = g.add_op("sum", graph::OpKind::kBinary, add, {g.op(a).outputs[0], g.op(b).outputs[0]});
  g.add_output(g.op(s).outputs[0]);
  return g;
}

scheduler::Schedule concurrent_schedule(const graph::Graph& g) {
  scheduler::Schedule s = scheduler::sequential_schedule(g);
  s.stages = {scheduler::Stage::concurrent({{graph::OpId{0}}, {graph::OpId{1}}}),
              scheduler::Stage::concurrent({{graph::OpId{2}}})};
  s.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNChw16c);
  return s;
}

TEST(ScheduleCheck, KeepsWhatTheMarginGivesAndSaysWhy) {
  const graph::Graph g = two_branches();
  executor::Backend& cpu = stagecraft::testing::cpu_backend();
  executor::PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNChw16c);
  // Sequential kept whenever it is under 101x the searched time; never when it must be 100% faster.
  const ScheduleCheck sequential = check_against_sequential(cpu, options, g, concurrent_schedule(g), -100.0);
  EXPECT_EQ(sequential.kept.stages.size(), 3u);
  for (const auto& st : sequential.kept.stages) EXPECT_EQ(st.num_ops(), 1u);
  EXPECT_EQ(sequential.kept.layouts.uniform_layout(), graph::Layout::kNChw16c);
  EXPECT_NE(sequential.verdict.find("sequential schedule kept"), std::string::npos) << sequential.verdict;
  EXPECT_NE(sequential.verdict.find("searched "), std::string::npos) << sequential.verdict;
  const ScheduleCheck searched = check_against_sequential(cpu, options, g, concurrent_schedule(g), 1.0);
  EXPECT_EQ(searched.kept.stages.size(), 2u);
  EXPECT_EQ(searched.kept.stages[0].groups.size(), 2u);
  EXPECT_NE(searched.verdict.find("searched schedule kept"), std::string::npos) << searched.verdict;
}

TEST(ScheduleCheck, OneOpPerStageIsNotChecked) {
  const graph::Graph g = two_branches();
  const ScheduleCheck c = check_against_sequential(stagecraft::testing::cpu_backend(), executor::PlanOptions{}, g,
                                                   scheduler::sequential_schedule(g), -100.0);
  EXPECT_TRUE(c.verdict.empty());
  EXPECT_EQ(c.kept.stages.size(), 3u);
}

// A dp search measures stages on streams it keeps (concurrent ones on worker threads, on the CPU
// each with an OpenMP team, which slows every other team of the process while it lives); the
// pipeline ends them all when its search is over.
TEST(PipelineSearch, EndsTheStreamsItMeasuredOn) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("stagecraft_search_streams_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  SessionOptions options;
  options.backend = "cpu";
  options.cache_dir = dir.string();
  scheduler::SearchOptions search;
  search.strategy = scheduler::Strategy::kDp;
  Pipeline pipeline(options, search);
  const graph::Graph g = two_branches();
  pipeline.schedule(g, ScheduleSource::search(scheduler::Strategy::kDp));
  ASSERT_NE(pipeline.opened().measured, nullptr);
  EXPECT_GT(pipeline.opened().measured->measurements(), 0u);
  EXPECT_EQ(pipeline.opened().measured->kept_streams(), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stagecraft::session
