// Search cost of the DP scheduler (r=3, s=8, analytic V100 model) per network, with states,
// transitions and distinct stage keys as counters. Run: ./build/bench/bench_search
#include <benchmark/benchmark.h>

#include "graph/passes.h"
#include "networks/registry.h"
#include "profiler/analytic_cost_model.h"
#include "scheduler/search.h"

namespace {

using namespace stagecraft;

void BM_DpSearch(benchmark::State& state, const char* network) {
  const graph::Graph g = graph::prepare_for_inference(networks::build_network(network));
  profiler::AnalyticCostModel model(profiler::find_device_spec("v100"));
  scheduler::SearchOptions options;
  scheduler::SearchStats stats;
  double predicted = 0;
  for (auto _ : state) {
    const auto schedule = scheduler::make_scheduler(options)->schedule(g, model, &stats);
    predicted = schedule.meta.predicted_ms;
    benchmark::DoNotOptimize(schedule.stages.data());
  }
  state.counters["ops"] = static_cast<double>(g.num_ops());
  state.counters["states"] = static_cast<double>(stats.states);
  state.counters["transitions"] = static_cast<double>(stats.transitions);
  state.counters["stage_keys"] = static_cast<double>(stats.stage_keys);
  state.counters["parts"] = static_cast<double>(stats.parts);
  state.counters["predicted_ms"] = predicted;
  state.counters["transitions_per_s"] =
      benchmark::Counter(static_cast<double>(stats.transitions),
                         benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_DpSearch, inception_v3, "inception_v3")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DpSearch, nasnet_a_large, "nasnet_a_large")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DpSearch, randwire, "randwire")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DpSearch, squeezenet1_0, "squeezenet1_0")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
