// The CPU executor: schedules agree with the sequential result on every network, the sequential
// result agrees with the reference loops, merged convolutions agree with their originals, views
// and memory reuse, events across streams, traces, and clear errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/random.h"
#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cuda/devices.h"
#include "executor/executor.h"
#include "executor/trace.h"
#include "graph/errors.h"
#include "graph/passes.h"
#include "networks/builder.h"
#include "networks/registry.h"
#include "profiler/analytic_cost_model.h"
#include "profiler/measured_cost_model.h"
#include "layouts/layout_costs.h"
#include "layouts/layout_search.h"
#include "layouts/layout_dp.h"
#include "reference.h"
#include "support/models.h"
#include "scheduler/search.h"

namespace stagecraft::executor {
namespace {

using networks::NetBuilder;
using networks::square_conv;
using scheduler::Schedule;
using scheduler::Stage;
using scheduler::Strategy;

constexpr double kTolerance = 1e-4;

using stagecraft::testing::every_op_graph;
using stagecraft::testing::inputs_of;
using stagecraft::testing::Model;
using stagecraft::testing::model_of;
using stagecraft::testing::network;

constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

Schedule schedule_of(const graph::Graph& g, Strategy strategy,
                     scheduler::DpMode mode = scheduler::DpMode::kBoth) {
  return stagecraft::testing::analytic_schedule(g, strategy, mode);
}

std::vector<HostTensor> run(const Model& m, const Schedule& s, PlanOptions options = {}) {
  ExecutionPlan plan(m.graph, s, m.weights, cpu(), options);
  Executor executor(plan);
  return executor.run(inputs_of(m.graph));
}

void expect_close(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LT(relative_error(got[i], want[i]), kTolerance) << what << ", output " << i;
  }
}

// ---- Every schedule equals the sequential result, on every network -----------------------------

using stagecraft::testing::NetworkCase;

class EveryNetwork : public ::testing::TestWithParam<NetworkCase> {};

TEST_P(EveryNetwork, SchedulesAndLayoutsMatchTheSequentialResult) {
  const NetworkCase& c = GetParam();
  const Model m = network(c.name, c.size, c.batch);
  PlanOptions nchw;
  nchw.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNCHW);
  const auto want = run(m, schedule_of(m.graph, Strategy::kSequential), nchw);
  // NCHW, the backend's blocked layout, and nChw16c also where it is not native (below AVX-512:
  // its ops then run in a native layout with conversions, which every schedule must survive).
  std::vector<graph::Layout> layouts{graph::Layout::kNCHW, cpu().preferred_layout(graph::DataType::kF32)};
  if (layouts.back() != graph::Layout::kNChw16c) layouts.push_back(graph::Layout::kNChw16c);
  for (graph::Layout layout : layouts) {
    PlanOptions options;
    options.layouts = graph::LayoutAssignment::uniform(layout);
    const std::string where = cat(c.name, " ", graph::to_string(layout));
    expect_close(run(m, schedule_of(m.graph, Strategy::kSequential), options), want,
                 where + " sequential");
    expect_close(run(m, schedule_of(m.graph, Strategy::kGreedy), options), want, where + " greedy");
    for (auto mode : {scheduler::DpMode::kMerge, scheduler::DpMode::kConcurrent,
                      scheduler::DpMode::kBoth}) {
      expect_close(run(m, schedule_of(m.graph, Strategy::kDp, mode), options), want,
                   cat(where, " dp-", scheduler::to_string(mode)));
    }
  }
}

TEST(EveryScheduleOf, ModernOpsMatchesTheSequentialResult) {
  // Squeeze-and-excitation, binary ops with constants, shuffles, reshapes: every schedule (merges,
  // concurrent groups) gives the sequential result.
  const Model m = model_of(stagecraft::testing::modern_ops_graph(2, 12), 3);
  const auto want = run(m, schedule_of(m.graph, Strategy::kSequential));
  expect_close(run(m, schedule_of(m.graph, Strategy::kGreedy)), want, "greedy");
  for (auto mode : {scheduler::DpMode::kMerge, scheduler::DpMode::kConcurrent, scheduler::DpMode::kBoth}) {
    expect_close(run(m, schedule_of(m.graph, Strategy::kDp, mode)), want,
                 cat("dp-", scheduler::to_string(mode)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Networks, EveryNetwork, ::testing::ValuesIn(stagecraft::testing::network_cases()),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// ---- The sequential result equals the reference loops -----------------------------------------

TEST(Reference, SequentialPlanEqualsTheReferenceLoops) {
  for (int64_t batch : {1, 3}) {
    const graph::Graph raw = every_op_graph(batch);
    const graph::WeightStore weights = graph::random_weights(raw, 5);
    const Model unfolded{raw, weights};
    const auto inputs = inputs_of(raw);
    const auto want = testing::reference_run(raw, weights, inputs);
    for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNChw16c, graph::Layout::kNHWC}) {
      PlanOptions options;
      options.layouts = graph::LayoutAssignment::uniform(layout);
      ExecutionPlan plan(raw, schedule_of(raw, Strategy::kSequential), weights, cpu(), options);
      Executor executor(plan);
      expect_close(executor.run(inputs), want, cat("batch ", batch, " ", graph::to_string(layout)));
    }
    // Folded and fused, scheduled by the DP.
    const Model m = model_of(raw, 5);
    expect_close(run(m, schedule_of(m.graph, Strategy::kDp)), want, cat("folded dp batch ", batch));
  }
}

TEST(Reference, SmallNetworksEqualTheReferenceLoops) {
  for (const char* name : {"squeezenet1_1", "googlenet"}) {
    networks::NetworkOptions options;
    options.input_size = 48;
    options.batch = 2;
    const graph::Graph raw = networks::build_network(name, options);
    const graph::WeightStore weights = graph::random_weights(raw, 3);
    const auto want = testing::reference_run(raw, weights, inputs_of(raw));
    const Model m = model_of(raw, 3);
    expect_close(run(m, schedule_of(m.graph, Strategy::kSequential)), want, name);
  }
}

// ---- Merged convolutions equal their originals ---------------------------------------------

TEST(Merge, MergedConvolutionsEqualTheirOriginals) {
  NetBuilder b("merge", 1, 6, 12, 12);
  auto x = b.relu(b.input(), "x");
  auto c1 = b.conv(x, square_conv(4, 1, 1, 0, true), "c1");
  auto c3 = b.conv(x, square_conv(5, 3, 1, 1, false), "c3");
  auto c5 = b.conv(x, square_conv(3, 5, 1, 2, true), "c5");
  networks::ConvSpec r17 = square_conv(2, 1, 1, 0, true);
  r17.kernel = {1, 7};
  r17.padding = graph::Pads::symmetric(0, 3);
  auto c17 = b.conv(x, r17, "c17");
  networks::ConvSpec r71 = r17;
  r71.kernel = {7, 1};
  r71.padding = graph::Pads::symmetric(3, 0);
  auto c71 = b.conv(x, r71, "c71");
  const graph::Graph raw = std::move(b).finish(
      {b.concat({c1, c3}, "cat"), b.max_pool(c5, 3, 1, 1, false, "p5"), b.add({c17, c71}, "sum")});
  const Model m = model_of(raw, 9, {.fuse_residual_adds = false});  // "sum" stays an op
  const auto want = run(m, schedule_of(m.graph, Strategy::kSequential));
  auto id = [&](const char* n) { return m.graph.find_op(n).value(); };
  Schedule s;
  s.stages.push_back(Stage::concurrent({{id("x")}}));
  s.stages.push_back(Stage::merge({id("c1"), id("c3"), id("c5"), id("c17"), id("c71")}));
  for (const char* n : {"cat", "p5", "sum"}) s.stages.push_back(Stage::concurrent({{id(n)}}));
  for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNChw8c}) {
    PlanOptions options;
    options.layouts = graph::LayoutAssignment::uniform(layout);
    ExecutionPlan plan(m.graph, s, m.weights, cpu(), options);
    size_t merged = 0;
    for (const auto& k : plan.kernels()) merged += k.ops.size() == 5 ? 1 : 0;
    EXPECT_EQ(merged, 1u);
    Executor executor(plan);
    expect_close(executor.run(inputs_of(m.graph)), want, std::string(graph::to_string(layout)));
  }
  // Batch 2: channel slices are not contiguous in nchw, so the parts are copied out.
  const Model m2 = model_of(graph::with_batch(raw, 2), 9, {.fuse_residual_adds = false});
  const auto want2 = run(m2, schedule_of(m2.graph, Strategy::kSequential));
  PlanOptions nchw;
  nchw.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNCHW);
  expect_close(run(m2, s, nchw), want2, "batch 2");
}

// ---- Per-value layouts ------------------------------------------------------------------------

// Every rank-4 value in a random layout: conversions go where kernels need them, and outputs
// stay those of the uniform plan.
TEST(Layouts, RandomPerValueLayoutsMatchTheUniformResult) {
  const graph::Layout choices[] = {graph::Layout::kNCHW, graph::Layout::kNHWC,
                                   graph::Layout::kNChw8c, graph::Layout::kNChw16c};
  SplitMix64 rng(17);
  std::vector<Model> models{network("googlenet", 64), network("squeezenet1_0", 64, 2),
                            network("nasnet_a_mobile", 64), network("resnet50", 64)};
  const graph::Graph every = every_op_graph(2);
  models.push_back(Model{every, graph::random_weights(every, 3)});
  for (const Model& m : models) {
    PlanOptions uniform;
    uniform.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNCHW);
    const auto want = run(m, schedule_of(m.graph, Strategy::kSequential), uniform);
    for (Strategy strategy : {Strategy::kSequential, Strategy::kDp}) {
      PlanOptions mixed;
      std::vector<graph::Layout> by_value;
      for (size_t v = 0; v < m.graph.num_values(); ++v) by_value.push_back(choices[rng.uniform_index(4)]);
      mixed.layouts = graph::LayoutAssignment::per_value(m.graph, by_value);
      expect_close(run(m, schedule_of(m.graph, strategy), mixed), want,
                   cat(m.graph.name(), " ", scheduler::to_string(strategy)));
    }
  }
  PlanOptions wrong;
  wrong.layouts = graph::LayoutAssignment::per_value({graph::Layout::kNC}, "for another graph");
  EXPECT_THROW(run(models[0], schedule_of(models[0].graph, Strategy::kSequential), wrong),
               BackendError);
}

// The layout DP on measured op latencies: the probes cover every query of the table, exact search
// beats or equals every uniform layout on the same table, the chosen per-tensor plan computes the
// sequential NCHW result, a second measurement on the same cache measures nothing, and the
// layout search answers a graph it has seen from memory.
TEST(Layouts, MeasuredLayoutSearchRunsAndIsCached) {
  const Model m = network("squeezenet1_1", 48);
  const std::string dir = (std::filesystem::temp_directory_path() / "stagecraft_layout_cache").string();
  std::filesystem::remove_all(dir);
  profiler::MeasureOptions quick;
  quick.repeats = 1;
  quick.sample_ms = 0.05;
  layouts::LayoutDpOptions search;
  search.candidates = {graph::Layout::kNCHW, graph::Layout::kNHWC, graph::Layout::kNChw16c};
  search.exhaustive = true;
  const layouts::LayoutProbes probes = layouts::plan_layout_probes(cpu(), m.graph, search.candidates, 8);
  EXPECT_EQ(probes.probes.size(), probes.queries.size() + probes.conversions.size());
  EXPECT_GT(probes.queries.size(), 2 * m.graph.num_ops());
  layouts::LayoutPlan chosen;
  {
    profiler::ProfileCache cache(dir, cpu().device().device_fingerprint());
    layouts::LayoutMeasurement measured = layouts::measure_layout_probes(cpu(), probes, cache, quick, nullptr);
    // Repeated squeezenet fire modules share probes: the second of equal probes is a cache hit.
    EXPECT_GT(measured.measurements, m.graph.num_ops());
    EXPECT_EQ(measured.measurements + measured.cache_hits, probes.probes.size());
    chosen = layouts::optimize_layouts(m.graph, measured.table, search);
    EXPECT_GT(chosen.predicted_ms, 0);
    for (graph::Layout l : search.candidates) {
      const auto uniform = layouts::uniform_layouts(m.graph, chosen.value_layouts, l);
      EXPECT_LE(chosen.predicted_ms, layouts::layout_plan_cost(m.graph, measured.table, uniform) * (1 + 1e-12))
          << graph::to_string(l);
    }
    const graph::TensorDesc desc = m.graph.value(m.graph.op(0).outputs[0]).desc;
    EXPECT_EQ(measured.table.conversion_ms(desc, graph::Layout::kNHWC, graph::Layout::kNHWC), 0);
    EXPECT_GT(measured.table.conversion_ms(desc, graph::Layout::kNHWC, graph::Layout::kNChw16c), 0);
  }
  PlanOptions nchw;
  nchw.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNCHW);
  const auto want = run(m, schedule_of(m.graph, Strategy::kSequential), nchw);
  PlanOptions per_value;
  per_value.layouts = graph::LayoutAssignment::per_value(m.graph, chosen.value_layouts);
  expect_close(run(m, schedule_of(m.graph, Strategy::kDp), per_value), want, "auto layouts");

  profiler::ProfileCache cache(dir, cpu().device().device_fingerprint());
  layouts::LayoutMeasurement again = layouts::measure_layout_probes(cpu(), probes, cache, quick, nullptr);
  EXPECT_EQ(again.measurements, 0u);
  EXPECT_EQ(layouts::optimize_layouts(m.graph, again.table, search).value_layouts, chosen.value_layouts);

  layouts::LayoutSearchOptions options;
  options.measure = quick;
  options.rounds = 1;
  options.candidates = {graph::Layout::kNChw16c, graph::Layout::kNHWC};
  VerdictCache verdicts(dir, cpu().device().device_fingerprint(), {}, "layout-verdicts");
  layouts::LayoutSearch search_layouts(cpu(), cache, verdicts, options);
  const layouts::LayoutChoice first = search_layouts.choose(m.graph);
  ASSERT_TRUE(first.layouts.is_per_value());
  ASSERT_EQ(first.layouts.per_value().size(), m.graph.num_values());
  EXPECT_NO_THROW(first.layouts.check_fits(m.graph));
  EXPECT_FALSE(first.verdict_cached);
  const layouts::LayoutChoice remembered = search_layouts.choose(m.graph);
  EXPECT_EQ(remembered.layouts, first.layouts);
  EXPECT_EQ(remembered.name, first.name);
  // Another search on the same caches measures nothing and takes the verdict, by name, from the
  // verdict store.
  layouts::LayoutSearch again_search(cpu(), cache, verdicts, options);
  const layouts::LayoutChoice cached = again_search.choose(m.graph);
  EXPECT_TRUE(cached.verdict_cached);
  EXPECT_EQ(cached.measurements, 0u);
  EXPECT_EQ(cached.name, first.name);
  EXPECT_EQ(cached.layouts, first.layouts);
}

// Schedules from the DP on measured latencies — cut short by budgets of 0 and 5 measurements
// beyond the single ops, and converged — run and give the sequential result.
TEST(MeasuredSearch, EveryBudgetsScheduleMatchesTheSequentialResult) {
  profiler::MeasureOptions quick;
  quick.repeats = 1;
  quick.sample_ms = 0.05;
  for (const auto& [name, size] : {std::pair<const char*, int64_t>{"squeezenet1_1", 48},
                                   {"randwire_small", 32}}) {
    const Model m = network(name, size);
    const auto want = run(m, schedule_of(m.graph, Strategy::kSequential));
    profiler::MeasuredCostModel model(cpu(), nullptr, quick);
    for (size_t budget : {size_t{0}, size_t{5}, std::numeric_limits<size_t>::max()}) {
      scheduler::SearchOptions options;
      options.budget.seconds = 0;
      options.budget.max_measurements = budget;
      scheduler::SearchStats stats;
      const Schedule s = scheduler::make_scheduler(options)->schedule(m.graph, model, &stats);
      EXPECT_EQ(stats.converged, !stats.out_of_budget);
      expect_close(run(m, s), want, cat(name, " budget ", budget, stats.converged ? " converged" : ""));
    }
  }
}

// ---- Views, memory reuse, events, traces ----------------------------------------------------

TEST(Plan, ConcatenationsAreViewsAndMemoryIsReused) {
  const Model m = network("inception_v3", 75);
  PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(cpu().preferred_layout(graph::DataType::kF32));  // nChw16c or nChw8c
  ExecutionPlan plan(m.graph, schedule_of(m.graph, Strategy::kSequential), m.weights, cpu(),
                     options);
  EXPECT_GT(plan.memory().views, 40u);  // the branches write straight into their concatenation
  EXPECT_LT(plan.memory().activation_bytes, plan.memory().activation_bytes_without_reuse / 2);
  size_t concat_kernels = 0;
  for (const auto& k : plan.kernels())
    for (graph::OpId id : k.ops) concat_kernels += m.graph.op(id).kind == graph::OpKind::kConcat;
  EXPECT_EQ(concat_kernels, 0u);
  options.reuse_memory = false;
  ExecutionPlan no_reuse(m.graph, schedule_of(m.graph, Strategy::kSequential), m.weights, cpu(),
                         options);
  EXPECT_EQ(no_reuse.memory().activation_bytes, no_reuse.memory().activation_bytes_without_reuse);
}

TEST(Plan, GrowingConcatenationsAreWrittenOnceAndEqualTheReferenceLoops) {
  // DenseNet's cat(f0, f1), cat(f0, f1, f2), ...: with parts on channel-block boundaries every
  // concatenation is a view inside the last one (no copies but for a concatenation that is a
  // graph output); with growth 12 in nChw8c parts are
  // not dense slices and the concatenations copy. Either way every layout and schedule gives the
  // reference loops' result, and each pre-activation BN carries its ReLU.
  for (int64_t growth : {8, 12}) {
    for (int64_t batch : {1, 2}) {
      const graph::Graph raw = stagecraft::testing::dense_block_graph(batch, 16, growth, 4);
      const graph::WeightStore weights = graph::random_weights(raw, 11);
      const auto want = testing::reference_run(raw, weights, inputs_of(raw));
      const Model m = model_of(raw, 11);
      EXPECT_EQ(graph::count_ops(m.graph, graph::OpKind::kRelu), 0u);
      for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNHWC, graph::Layout::kNChw8c,
                                   graph::Layout::kNChw16c}) {
        PlanOptions options;
        options.layouts = graph::LayoutAssignment::uniform(layout);
        const std::string where = cat("growth ", growth, " batch ", batch, " ", graph::to_string(layout));
        for (auto strategy : {Strategy::kSequential, Strategy::kGreedy, Strategy::kDp}) {
          const Schedule s = strategy == Strategy::kDp
                                 ? schedule_of(m.graph, strategy, scheduler::DpMode::kConcurrent)
                                 : schedule_of(m.graph, strategy);
          expect_close(run(m, s, options), want, cat(where, " ", scheduler::to_string(strategy)));
        }
        if (growth == 8 && batch == 1 && layout == graph::Layout::kNChw8c) {
          ExecutionPlan plan(m.graph, schedule_of(m.graph, Strategy::kSequential), m.weights, cpu(), options);
          // Only the second concatenation, a graph output of its own, copies its two parts.
          EXPECT_EQ(plan.memory().copies, 2u) << where;
          for (const auto& k : plan.kernels())
            for (graph::OpId id : k.ops) EXPECT_NE(m.graph.op(id).kind, graph::OpKind::kConcat) << where;
        }
      }
    }
  }
}

TEST(Plan, GroupsRunOnStreamsJoinedByEventsAndTraceShowsThem) {
  const Model m = network("googlenet", 64);
  const Schedule greedy = schedule_of(m.graph, Strategy::kGreedy);
  ExecutionPlan plan(m.graph, greedy, m.weights, cpu());
  EXPECT_GT(plan.num_streams(), 1);
  EXPECT_GT(plan.num_events(), 0);
  // A kernel never waits for an event recorded later in launch order.
  std::vector<int> recorded_at(static_cast<size_t>(plan.num_events()), -1);
  for (size_t i = 0; i < plan.kernels().size(); ++i) {
    for (int e : plan.kernels()[i].waits) {
      EXPECT_GE(recorded_at[e], 0) << "kernel " << i;
      EXPECT_NE(plan.kernels()[recorded_at[e]].stream, plan.kernels()[i].stream);
    }
    if (plan.kernels()[i].record >= 0) recorded_at[plan.kernels()[i].record] = static_cast<int>(i);
  }
  Executor executor(plan);
  executor.set_inputs(inputs_of(m.graph));
  std::vector<KernelTiming> timings;
  executor.execute(&timings);
  ASSERT_EQ(timings.size(), plan.kernels().size());
  for (const auto& t : timings) EXPECT_LE(t.start_us, t.end_us);
  const std::string trace = chrome_trace(plan, timings, "googlenet");
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(trace.find("\"stream 1\""), std::string::npos);
  EXPECT_NE(trace.find("\"stage 1\""), std::string::npos);
  EXPECT_GT(executor.execute_repeated(3), 0.0);
}

TEST(Plan, RepeatedRunsGiveIdenticalOutputs) {
  const Model m = network("randwire_small", 64);
  ExecutionPlan plan(m.graph, schedule_of(m.graph, Strategy::kGreedy), m.weights, cpu());
  Executor executor(plan);
  const auto first = executor.run(inputs_of(m.graph));
  for (int i = 0; i < 3; ++i) {
    const auto again = executor.run(inputs_of(m.graph));
    ASSERT_EQ(again.size(), first.size());
    EXPECT_EQ(again[0].data, first[0].data);
  }
}

// ---- Errors ---------------------------------------------------------------------------------

TEST(Errors, UnsupportedOpIsNamed) {
  graph::Graph g("half");
  graph::TensorDesc d = graph::make_desc(graph::Shape{1, 4, 8, 8}, graph::DataType::kF16);
  const auto x = g.add_input("x", d);
  const auto r = g.add_op("act", graph::OpKind::kRelu, graph::NoAttrs{}, {x});
  g.add_output(g.op(r).outputs[0]);
  try {
    ExecutionPlan plan(g, schedule_of(g, Strategy::kSequential), graph::WeightStore{}, cpu());
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("op 'act' (relu)"), std::string::npos) << m;
    EXPECT_NE(m.find("f32"), std::string::npos) << m;
  }
}

TEST(Errors, ForeignScheduleMissingWeightsBadInputsAndBackends) {
  const Model m = network("squeezenet1_1", 64);
  const Model other = network("squeezenet1_0", 64);
  EXPECT_THROW(ExecutionPlan(m.graph, schedule_of(other.graph, Strategy::kSequential), m.weights,
                             cpu()),
               scheduler::ScheduleError);
  EXPECT_THROW(ExecutionPlan(m.graph, schedule_of(m.graph, Strategy::kSequential),
                             graph::WeightStore{}, cpu()),
               graph::GraphError);
  ExecutionPlan plan(m.graph, schedule_of(m.graph, Strategy::kSequential), m.weights, cpu());
  Executor executor(plan);
  try {
    executor.run({random_host_tensor(graph::Shape{1, 3, 32, 32}, 1)});
    FAIL();
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("expects 1x3x64x64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(executor.run({}), BackendError);
  try {
    make_backend("tpu");
    FAIL();
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'tpu'"), std::string::npos);
  }
  const DeviceQuery gpus = query_cuda_devices();
  if (gpus.devices.empty()) {
    try {
      make_backend("cuda");
      FAIL() << "a CUDA backend without a usable GPU";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find("backend 'cuda'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(gpus.reason), std::string::npos) << e.what();
    }
  }
}

TEST(BackendBuffers, KeepTheAlignmentAndKindAsked) {
  auto backend = make_backend("cpu");
  for (size_t alignment : {size_t{64}, size_t{4096}, size_t{1} << 21}) {
    for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
      auto buffer = backend->allocate_buffer({.bytes = 1000, .alignment = alignment, .kind = kind});
      EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % alignment, 0u) << alignment;
      EXPECT_GE(buffer->alignment(), alignment);
      EXPECT_EQ(buffer->kind(), kind);
      EXPECT_EQ(buffer->bytes(), 1000u);
    }
  }
  EXPECT_EQ(backend->allocate(10)->kind(), MemoryKind::kDevice);
  EXPECT_THROW(backend->allocate_buffer({.bytes = 8, .alignment = 48}), BackendError);
}

TEST(BackendRegistry, NamesTheBuiltBackendsAndOpensThem) {
  std::vector<std::string> built;
  bool has_cpu = false, has_cuda = false;
  for (const BackendEntry& e : backend_registry()) {
    EXPECT_FALSE(std::string(e.description).empty()) << e.name;
    if (e.built) built.emplace_back(e.name);
    has_cpu = has_cpu || std::string(e.name) == "cpu";
    has_cuda = has_cuda || std::string(e.name) == "cuda";
  }
  EXPECT_TRUE(has_cpu);
  EXPECT_TRUE(has_cuda);  // listed even when not built: its error then says why
  EXPECT_EQ(backend_names(), built);
  EXPECT_EQ(make_backend("cpu")->name(), "cpu");
  // Settings another backend's: refused by the CPU backend's own factory.
  BackendConfig tf32;
  tf32.tf32 = true;
  EXPECT_THROW(make_backend("cpu", tf32), BackendError);
}

}  // namespace
}  // namespace stagecraft::executor
