// Schedule files: round trip, and one clear error for each kind of mismatch or malformed file.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "common/strings.h"
#include "graph/graph.h"
#include "graph/passes.h"
#include "graph/yaml_io.h"
#include "networks/registry.h"
#include "scheduler/schedule_yaml.h"
#include "scheduler/search.h"
#include "test_support.h"

namespace stagecraft::scheduler {
namespace {

graph::Graph squeeze(int64_t batch = 1) {
  networks::NetworkOptions options;
  options.batch = batch;
  options.input_size = 64;
  return graph::prepare_for_inference(networks::build_network("squeezenet1_0", options));
}

Schedule dp_schedule(const graph::Graph& g) {
  testing::RandomOpCostModel model(3);
  SearchOptions options;
  return make_scheduler(options)->schedule(g, model);
}

std::string error_of(const std::string& text, const graph::Graph& g) {
  try {
    schedule_from_yaml(text, g, "s.yaml");
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "<loaded>";
}

void replace(std::string& text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  ASSERT_NE(pos, std::string::npos) << from;
  text.replace(pos, from.size(), to);
}

// A schedule moves between loads of a model without a file: the same when the graphs are equal,
// its ops and per-value layouts by name when the ids differ, an error for another batch.
TEST(CarrySchedule, FollowsOpsByNameAndRefusesAnotherGraph) {
  const graph::Graph g = squeeze();
  Schedule s = dp_schedule(g);
  std::vector<graph::Layout> layouts(g.num_values(), graph::Layout::kNHWC);
  for (size_t v = 0; v < g.num_values(); ++v) {
    const auto& value = g.value(static_cast<graph::ValueId>(v));
    if (value.producer == graph::kNoOp || value.desc.shape.rank() != 4) layouts[v] = value.desc.layout;
  }
  layouts[g.op(1).outputs[0]] = graph::Layout::kNChw16c;
  s.layouts = graph::LayoutAssignment::per_value(g, layouts);
  const Schedule same = carry_schedule(g, s, squeeze());
  EXPECT_EQ(schedule_to_yaml(g, same), schedule_to_yaml(g, s));
  // The same ops added in another order: other ids, the same names.
  graph::Graph shuffled(g.name());
  std::map<graph::ValueId, graph::ValueId> mapped;
  for (graph::ValueId v : g.inputs()) mapped[v] = shuffled.add_input(g.value(v).name, g.value(v).desc);
  // A topological order other than the ids': the ready op of the largest id first.
  std::vector<graph::OpId> order;
  std::vector<bool> done(g.num_ops(), false);
  while (order.size() < g.num_ops()) {
    for (size_t k = g.num_ops(); k-- > 0;) {
      if (done[k]) continue;
      bool ready = true;
      for (graph::ValueId v : g.op(static_cast<graph::OpId>(k)).inputs) {
        ready = ready && (g.value(v).producer == graph::kNoOp || done[g.value(v).producer]);
      }
      if (!ready) continue;
      done[k] = true;
      order.push_back(static_cast<graph::OpId>(k));
      break;
    }
  }
  ASSERT_NE(order, g.topological_order());
  for (graph::OpId id : order) {
    std::vector<graph::ValueId> inputs;
    for (graph::ValueId v : g.op(id).inputs) inputs.push_back(mapped.at(v));
    const graph::OpId nid = graph::copy_op(shuffled, g, id, inputs);
    for (size_t k = 0; k < g.op(id).outputs.size(); ++k) mapped[g.op(id).outputs[k]] = shuffled.op(nid).outputs[k];
  }
  for (graph::ValueId v : g.outputs()) shuffled.add_output(mapped.at(v));
  ASSERT_NE(graph::graph_hash(shuffled), graph::graph_hash(g));
  const Schedule carried = carry_schedule(g, s, shuffled);
  ASSERT_EQ(carried.stages.size(), s.stages.size());
  for (size_t k = 0; k < s.stages.size(); ++k) {
    for (size_t i = 0; i < s.stages[k].groups.size(); ++i) {
      for (size_t j = 0; j < s.stages[k].groups[i].size(); ++j) {
        EXPECT_EQ(shuffled.op(carried.stages[k].groups[i][j]).name, g.op(s.stages[k].groups[i][j]).name);
      }
    }
  }
  ASSERT_TRUE(carried.layouts.is_per_value());
  EXPECT_EQ(carried.layouts.per_value()[static_cast<size_t>(mapped.at(g.op(1).outputs[0]))],
            graph::Layout::kNChw16c);
  EXPECT_NO_THROW(carried.layouts.check_fits(shuffled));
  try {
    carry_schedule(g, s, squeeze(2));
    FAIL() << "a schedule for batch 1 must not fit batch 2";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("batch 1"), std::string::npos) << e.what();
  }
}

TEST(ScheduleYaml, LayoutsPerValueRoundTripAndErrors) {
  const graph::Graph g = squeeze();
  Schedule s = dp_schedule(g);
  std::vector<graph::Layout> layouts(g.num_values(), graph::Layout::kNHWC);
  for (size_t v = 0; v < g.num_values(); v += 3) layouts[v] = graph::Layout::kNChw16c;
  for (size_t v = 0; v < g.num_values(); ++v) {
    const auto& value = g.value(static_cast<graph::ValueId>(v));
    if (value.producer == graph::kNoOp || value.desc.shape.rank() != 4) {
      layouts[v] = value.desc.layout;  // not chosen by a plan
    }
  }
  s.layouts = graph::LayoutAssignment::per_value(g, layouts);
  const std::string text = schedule_to_yaml(g, s);
  EXPECT_NE(text.find("layout: auto"), std::string::npos) << text;
  const Schedule back = schedule_from_yaml(text, g);
  EXPECT_TRUE(back.layouts.is_per_value());
  EXPECT_EQ(back.layouts.per_value(), layouts);
  EXPECT_EQ(back.layouts, s.layouts);  // the graph's hash too
  EXPECT_EQ(schedule_to_yaml(g, back), text);
  // A uniform layout alone.
  Schedule uniform = dp_schedule(g);
  uniform.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNHWC);
  const Schedule uniform_back = schedule_from_yaml(schedule_to_yaml(g, uniform), g);
  EXPECT_EQ(uniform_back.layouts.name(), "nhwc");
  EXPECT_EQ(uniform_back.layouts.uniform_layout(), graph::Layout::kNHWC);
  EXPECT_TRUE(uniform_back.layouts.per_value().empty());
  // The backend's default writes no layout.
  EXPECT_EQ(schedule_to_yaml(g, dp_schedule(g)).find("layout:"), std::string::npos);
  // Errors name the value or layout.
  const std::string first = g.value(g.op(0).outputs[0]).name;
  std::string bad = text;
  replace(bad, cat(first, ": "), "no_such_value: ");
  EXPECT_NE(error_of(bad, g).find("'no_such_value'"), std::string::npos) << error_of(bad, g);
  bad = text;
  replace(bad, cat(first, ": ", graph::to_string(layouts[g.op(0).outputs[0]])),
          cat(first, ": nc"));
  EXPECT_NE(error_of(bad, g).find("unknown layout 'nc'"), std::string::npos) << error_of(bad, g);
  bad = text;
  replace(bad, "layout: auto", "layout: sideways");
  EXPECT_NE(error_of(bad, g).find("'sideways'"), std::string::npos) << error_of(bad, g);
}

TEST(ScheduleYaml, RoundTripKeepsStagesAndMetadata) {
  const graph::Graph g = squeeze();
  const Schedule s = dp_schedule(g);
  const std::string text = schedule_to_yaml(g, s);
  const Schedule back = schedule_from_yaml(text, g);
  ASSERT_EQ(back.stages.size(), s.stages.size());
  for (size_t i = 0; i < s.stages.size(); ++i) {
    EXPECT_EQ(back.stages[i].kind, s.stages[i].kind);
    EXPECT_EQ(back.stages[i].groups, s.stages[i].groups);
    EXPECT_NEAR(back.stages[i].predicted_ms, s.stages[i].predicted_ms, 1e-6);
  }
  EXPECT_EQ(back.meta.graph_hash, s.meta.graph_hash);
  EXPECT_EQ(back.meta.search.strategy, Strategy::kDp);
  EXPECT_EQ(schedule_to_yaml(g, back), text);
  bool has_merge = false;
  for (const auto& stage : s.stages) has_merge = has_merge || stage.kind == StageKind::kMerge;
  EXPECT_TRUE(has_merge) << "squeezenet's expand convolutions should merge in this model";
}

TEST(ScheduleYaml, OtherBatchIsRejectedWithTheFix) {
  const graph::Graph g = squeeze();
  const std::string text = schedule_to_yaml(g, dp_schedule(g));
  const std::string m = error_of(text, squeeze(4));
  EXPECT_NE(m.find("the schedule is for batch 1 but the graph has batch 4"), std::string::npos) << m;
  EXPECT_NE(m.find("--batch 4"), std::string::npos) << m;
}

TEST(ScheduleYaml, OtherNetworkOpsAndContentAreRejected) {
  const graph::Graph g = squeeze();
  const std::string text = schedule_to_yaml(g, dp_schedule(g));
  networks::NetworkOptions options;
  options.input_size = 64;
  const graph::Graph other =
      graph::prepare_for_inference(networks::build_network("squeezenet1_1", options));
  std::string m = error_of(text, other);
  EXPECT_NE(m.find("the schedule is for network 'squeezenet1_0' but the graph is "
                   "'squeezenet1_1'"),
            std::string::npos)
      << m;

  std::string renamed = text;
  replace(renamed, "fire2/squeeze/conv", "fire2/squash/conv");
  m = error_of(renamed, g);
  EXPECT_NE(m.find("1 op(s) not in the graph (fire2/squash/conv)"), std::string::npos) << m;
  EXPECT_NE(m.find("1 graph op(s) not scheduled (fire2/squeeze/conv)"), std::string::npos) << m;

  std::string rehashed = text;
  replace(rehashed, "graph_hash: ", "graph_hash: 0");
  m = error_of(rehashed, g);
  EXPECT_NE(m.find("the graph differs from the one the schedule was made for"), std::string::npos)
      << m;
}

TEST(ScheduleYaml, InvalidStagesAndMalformedFiles) {
  const graph::Graph g = squeeze();
  Schedule s = dp_schedule(g);
  // Swap the first two stages: an op now runs before its input.
  std::swap(s.stages[0], s.stages[1]);
  std::string m = error_of(schedule_to_yaml(g, s), g);
  EXPECT_NE(m.find("s.yaml: stage 1"), std::string::npos) << m;
  EXPECT_NE(m.find("runs before its input"), std::string::npos) << m;

  EXPECT_NE(error_of("stages: [", g).find("s.yaml:"), std::string::npos);
  EXPECT_NE(error_of("- a\n", g).find("must be a YAML map"), std::string::npos);
  EXPECT_NE(error_of("format: stagecraft-graph\nversion: 1\n", g).find("not a schedule file"),
            std::string::npos);
  std::string text = schedule_to_yaml(g, dp_schedule(g));
  replace(text, "kind: concurrent", "kind: parallel");
  EXPECT_NE(error_of(text, g).find("unknown stage kind 'parallel'"), std::string::npos);
  text = schedule_to_yaml(g, dp_schedule(g));
  replace(text, "batch: 1", "batch: one");
  EXPECT_NE(error_of(text, g).find("field 'batch' has the wrong type"), std::string::npos);
}

TEST(ScheduleYaml, FilesAndMetaOnly) {
  const graph::Graph g = squeeze();
  const auto dir = std::filesystem::temp_directory_path() / "stagecraft_schedule_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "s.yaml").string();
  save_schedule(g, dp_schedule(g), path);
  EXPECT_EQ(read_schedule_meta(path).network, "squeezenet1_0");
  EXPECT_EQ(load_schedule(path, g).meta.batch, 1);
  const std::string dot = schedule_to_dot(g, load_schedule(path, g));
  EXPECT_NE(dot.find("cluster_stage0"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::scheduler
