// The measured cost model and its persistent profile cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "common/error.h"
#include "executor/backend.h"
#include "executor/plan.h"
#include "graph/passes.h"
#include "graph/weights.h"
#include "networks/registry.h"
#include "profiler/measured_cost_model.h"
#include "profiler/profile_cache.h"
#include "profiler/timing.h"
#include "scheduler/search.h"

namespace stagecraft::profiler {
namespace {

namespace fs = std::filesystem;

TEST(Timing, SeveralPlansAreTimedInAlternatingBlocksAfterAnUntimedRun) {
  // Which plan ran, in order; 'a'/'b' timed or not is told by the sample counts.
  std::string order;
  const std::vector<std::function<void()>> runs = {[&] { order += 'a'; }, [&] { order += 'b'; }};
  std::vector<int> progress;
  const auto ms = interleaved_ms(runs, /*warmup=*/1, /*rounds=*/7,
                                 [&](int done, int all) { progress.push_back(done * 100 + all); });
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].size(), 7u);
  EXPECT_EQ(ms[1].size(), 7u);
  // Warm-up, then a block of 1 + 5 runs each, then 1 + 2 (7 timed runs of each in all).
  EXPECT_EQ(order, "ab" "aaaaaa" "bbbbbb" "aaa" "bbb");
  EXPECT_EQ(progress, (std::vector<int>{507, 707}));
  // One plan alone: no settling runs, progress after every run.
  order.clear();
  progress.clear();
  EXPECT_EQ(interleaved_ms({runs[0]}, 0, 3, [&](int done, int) { progress.push_back(done); })[0].size(), 3u);
  EXPECT_EQ(order, "aaa");
  EXPECT_EQ(progress, (std::vector<int>{1, 2, 3}));
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("stagecraft_" + name);
  fs::remove_all(dir);
  return dir;
}

graph::Graph small_network() {
  networks::NetworkOptions options;
  options.input_size = 48;
  return graph::prepare_for_inference(networks::build_network("squeezenet1_1", options));
}

executor::Backend& cpu() {
  static std::unique_ptr<executor::Backend> backend = executor::make_backend("cpu");
  return *backend;
}

// The kernels the measured model's plan of `stage` launches (its stage graph, planned as
// MeasuredCostModel::measure plans it).
size_t stage_kernels(const graph::Graph& g, const scheduler::Stage& stage) {
  const graph::Layout layout = executor::activation_layout(cpu(), g, {});
  const StageGraph sub_stage = stage_graph(g, stage, {}, layout);
  const graph::Graph& sub = sub_stage.graph;
  scheduler::Schedule schedule;
  schedule.stages = {sub_stage.stage};
  executor::PlanOptions options;
  options.layouts = sub_stage.layouts;
  options.plain_outputs = false;
  options.inputs_may_be_views = true;
  const executor::ExecutionPlan plan(sub, schedule, graph::random_weights(sub, 1), cpu(), options);
  return plan.kernels().size();
}

MeasureOptions quick() {
  MeasureOptions options;
  options.repeats = 1;
  options.sample_ms = 0.05;
  return options;
}

// interleaved_fresh_ms: each block's runner is made at its start and gone at its end, so that
// nothing of one plan (its stream workers, their OpenMP teams) lives while another is timed.
TEST(Timing, FreshRunnersLiveForOneBlockEach) {
  std::string order;
  struct Gone {
    std::string& order;
    ~Gone() { order += 'x'; }
  };
  const auto maker = [&](char name) {
    return [&order, name]() -> std::function<void()> {
      order += static_cast<char>(name - 'a' + 'A');
      auto gone = std::make_shared<Gone>(order);
      return [&order, name, gone] { order += name; };
    };
  };
  const auto ms = interleaved_fresh_ms({maker('a'), maker('b')}, /*warmup=*/1, /*rounds=*/7);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].size(), 7u);
  EXPECT_EQ(ms[1].size(), 7u);
  EXPECT_EQ(order, "Aax" "Bbx" "Aaaaaaax" "Bbbbbbbx" "Aaaax" "Bbbbx");
}

TEST(StageGraph, KeepsTheStageOpsAndMakesItsInputsGraphInputs) {
  const graph::Graph g = small_network();
  const auto fire = *g.find_op("fire2/expand1x1/conv");
  const auto fire3 = *g.find_op("fire2/expand3x3/conv");
  const auto [sub, stage, layouts] = stage_graph(g, scheduler::Stage::concurrent({{fire}, {fire3}}),
                                                 {}, graph::Layout::kNChw16c);
  EXPECT_EQ(layouts.uniform_layout(), graph::Layout::kNChw16c);  // the default, resolved
  EXPECT_EQ(sub.num_ops(), 2u);
  ASSERT_EQ(sub.inputs().size(), 1u);  // both read the squeeze output
  EXPECT_EQ(sub.value(sub.inputs()[0]).desc.layout, graph::Layout::kNChw16c);
  EXPECT_EQ(sub.outputs().size(), 2u);  // both are read by the concatenation outside
  EXPECT_EQ(stage.groups, (std::vector<std::vector<graph::OpId>>{{0}, {1}}));
  EXPECT_EQ(sub.op(0).name, "fire2/expand1x1/conv");
}

TEST(StageGraph, PerValueLayoutsReachTheStageGraphAndTheCacheKey) {
  const graph::Graph g = small_network();
  const auto e1 = *g.find_op("fire2/expand1x1/conv");
  const auto squeeze = *g.find_op("fire2/squeeze/conv");
  std::vector<graph::Layout> layouts(g.num_values(), graph::Layout::kNChw16c);
  layouts[static_cast<size_t>(g.op(squeeze).outputs[0])] = graph::Layout::kNHWC;
  const graph::LayoutAssignment per_value = graph::LayoutAssignment::per_value(g, layouts);
  const scheduler::Stage stage = scheduler::Stage::concurrent({{e1}});
  const StageGraph sub = stage_graph(g, stage, per_value, graph::Layout::kNChw16c);
  EXPECT_EQ(sub.graph.value(sub.graph.inputs()[0]).desc.layout, graph::Layout::kNHWC);  // the squeeze's
  ASSERT_TRUE(sub.layouts.is_per_value());
  ASSERT_EQ(sub.layouts.per_value().size(), sub.graph.num_values());
  EXPECT_NO_THROW(sub.layouts.check_fits(sub.graph));
  EXPECT_EQ(sub.layouts.per_value()[static_cast<size_t>(sub.graph.op(0).outputs[0])], graph::Layout::kNChw16c);
  // The model measures in the layouts it is given (a plan of the stage graph) and keys its cache
  // by them.
  MeasuredCostModel model(cpu(), nullptr, quick());
  const std::string uniform_key = model.cache_key(g, {}, stage);
  const std::string keyed = model.cache_key(g, per_value, stage);
  EXPECT_NE(keyed, uniform_key);
  EXPECT_NE(keyed.find("nhwc"), std::string::npos) << keyed;
  EXPECT_NE(model.settings_key(g, per_value), model.settings_key(g, {}));
  EXPECT_GT(model.measure(g, per_value, stage), 0.0);
  // Layouts made for another graph (another size) are refused rather than misapplied.
  const auto other = graph::LayoutAssignment::per_value(std::vector<graph::Layout>(3, graph::Layout::kNHWC), "x");
  EXPECT_THROW(model.cache_key(g, other, stage), Error);
  EXPECT_THROW(model.measure(g, other, stage), Error);
}

TEST(MeasuredCostModel, SecondSearchMeasuresNothingNew) {
  const fs::path dir = fresh_dir("cache_second");
  const graph::Graph g = small_network();
  scheduler::SearchOptions options;
  double first_ms = 0;
  size_t first_measured = 0;
  {
    ProfileCache cache(dir.string(), cpu().device().device_fingerprint());
    MeasuredCostModel model(cpu(), &cache, quick());
    first_ms = scheduler::make_scheduler(options)->schedule(g, model).meta.predicted_ms;
    first_measured = model.measurements();
    EXPECT_GT(first_measured, 10u);
    EXPECT_GT(first_ms, 0.0);
  }  // saved here
  ProfileCache cache(dir.string(), cpu().device().device_fingerprint());
  EXPECT_EQ(cache.size(), first_measured);
  MeasuredCostModel model(cpu(), &cache, quick());
  const double second_ms = scheduler::make_scheduler(options)->schedule(g, model).meta.predicted_ms;
  EXPECT_EQ(model.measurements(), 0u);
  EXPECT_EQ(model.cache_hits(), first_measured);
  EXPECT_DOUBLE_EQ(second_ms, first_ms);
}

TEST(ProfileCache, CorruptOrForeignFilesAreIgnoredWithAWarningAndRebuilt) {
  const fs::path dir = fresh_dir("cache_corrupt");
  std::string path;
  {
    ProfileCache cache(dir.string(), "device-A");
    cache.insert("k1", 1.5);
    cache.insert("k2", 2.5);
    cache.save();
    path = cache.path();
  }
  {
    std::vector<std::string> warnings;
    ProfileCache cache(dir.string(), "device-A", [&](const std::string& w) { warnings.push_back(w); });
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(cache.find("k2"), 2.5);
  }
  // Truncate the file in the middle of a line.
  const std::string text = [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  std::ofstream(path, std::ios::trunc) << text.substr(0, text.size() / 2);
  {
    std::vector<std::string> warnings;
    ProfileCache cache(dir.string(), "device-A", [&](const std::string& w) { warnings.push_back(w); });
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("it will be rebuilt"), std::string::npos) << warnings[0];
    EXPECT_TRUE(cache.rebuilt());
    EXPECT_EQ(cache.size(), 0u);
    cache.insert("k3", 3.0);
  }  // rebuilt file saved
  {
    ProfileCache cache(dir.string(), "device-A", [](const std::string& w) { FAIL() << w; });
    EXPECT_EQ(cache.size(), 1u);
  }
  // Garbage, and a file of another device under this device's name.
  std::ofstream(path, std::ios::trunc) << "\x01\x02 not a cache\n";
  {
    std::vector<std::string> warnings;
    ProfileCache cache(dir.string(), "device-A", [&](const std::string& w) { warnings.push_back(w); });
    EXPECT_EQ(warnings.size(), 1u);
  }
  std::ofstream(path, std::ios::trunc) << "stagecraft-profile-cache 1 device-B\n1\tk\nend 1\n";
  {
    std::vector<std::string> warnings;
    ProfileCache cache(dir.string(), "device-A", [&](const std::string& w) { warnings.push_back(w); });
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("another device"), std::string::npos) << warnings[0];
    EXPECT_FALSE(cache.find("k").has_value());
  }
}

TEST(VerdictCache, KeepsWordsApartFromLatenciesAndRefusesWhatItCannotStore) {
  const fs::path dir = fresh_dir("verdicts");
  {
    VerdictCache verdicts(dir.string(), "device", {}, "layout-verdicts");
    verdicts.insert("net;streams=8", "uniform nChw8c");
    verdicts.insert("conv-a", "unfused");
    EXPECT_THROW(verdicts.insert("bad", "two\twords"), Error);
    EXPECT_THROW(verdicts.insert("bad", ""), Error);
    ProfileCache latencies(dir.string(), "device");
    EXPECT_THROW(latencies.insert("negative", -1.0), Error);  // a measurement is never negative
    latencies.insert("stage", 0.25);
  }
  VerdictCache verdicts(dir.string(), "device", {}, "layout-verdicts");
  EXPECT_EQ(verdicts.find("net;streams=8"), "uniform nChw8c");
  EXPECT_EQ(verdicts.find("conv-a"), "unfused");
  EXPECT_FALSE(verdicts.rebuilt());
  ProfileCache latencies(dir.string(), "device");
  EXPECT_EQ(latencies.find("stage"), 0.25);
  EXPECT_EQ(latencies.find("net;streams=8"), std::nullopt);  // separate files
  // A verdict file read as latencies (or the other way round) is refused, not misread.
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& w) { warnings.push_back(w); };
  ProfileCache wrong_kind(dir.string(), "device", warn, "layout-verdicts");
  EXPECT_TRUE(wrong_kind.rebuilt());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not a cache of this kind"), std::string::npos) << warnings[0];
}

TEST(ProfileCache, UnusableDirectoryIsAClearError) {
  const fs::path dir = fresh_dir("cache_file");
  fs::create_directories(dir);
  const fs::path file = dir / "plain_file";
  std::ofstream(file) << "x";
  try {
    ProfileCache cache((file / "sub").string(), "device");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot use cache directory"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--cache-dir"), std::string::npos);
  }
}

TEST(MeasuredCostModel, MergedAndConcurrentStagesAreMeasured) {
  const graph::Graph g = small_network();
  MeasuredCostModel model(cpu(), nullptr, quick());
  const auto e1 = *g.find_op("fire3/expand1x1/conv");
  const auto e3 = *g.find_op("fire3/expand3x3/conv");
  EXPECT_GT(model.stage_latency_ms(g, {}, scheduler::Stage::merge({e1, e3})), 0.0);
  EXPECT_GT(model.stage_latency_ms(g, {}, scheduler::Stage::concurrent({{e1}, {e3}})), 0.0);
  // A stage of views only (the concatenation) launches no kernel (what makes it nearly free;
  // its time is not compared here: timings belong in bench/), a convolution's one.
  const auto concat = *g.find_op("fire3/concat");
  EXPECT_GE(model.stage_latency_ms(g, {}, scheduler::Stage::concurrent({{concat}})), 0.0);
  EXPECT_EQ(stage_kernels(g, scheduler::Stage::concurrent({{concat}})), 0u);
  EXPECT_EQ(stage_kernels(g, scheduler::Stage::concurrent({{e3}})), 1u);
  EXPECT_EQ(model.measurements(), 3u);
  EXPECT_EQ(model.name(), "measured:cpu");
}

// The streams measurements ran on keep their worker threads (and, on the CPU, their OpenMP
// teams) until release_streams(): the pipeline releases them after its search.
TEST(MeasuredCostModel, ReleasesTheStreamsItMeasuredOn) {
  const auto threads = [] {
    return static_cast<size_t>(std::distance(fs::directory_iterator("/proc/self/task"), fs::directory_iterator{}));
  };
  const graph::Graph g = small_network();
  MeasuredCostModel model(cpu(), nullptr, quick());
  const size_t before = threads();
  const auto e1 = *g.find_op("fire3/expand1x1/conv");
  const auto e3 = *g.find_op("fire3/expand3x3/conv");
  model.measure(g, {}, scheduler::Stage::concurrent({{e1}, {e3}}));
  EXPECT_EQ(model.kept_streams(), 2u) << "a caller stream and one worker";
  EXPECT_GT(threads(), before) << "the worker's thread";
  model.release_streams();
  EXPECT_EQ(model.kept_streams(), 0u);
  EXPECT_EQ(threads(), before) << "its thread ended";
  EXPECT_GT(model.measure(g, {}, scheduler::Stage::concurrent({{e1}, {e3}})), 0.0) << "made again when needed";
}

}  // namespace
}  // namespace stagecraft::profiler
