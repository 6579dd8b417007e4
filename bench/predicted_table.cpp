// Predicted latency of every strategy on the IOS networks with an analytic device model, as a
// Markdown table (the analogue of the IOS paper's Table 2, in the model's own cost).
// Run: ./build/bench/predicted_table [DEVICE] [BATCH] > bench/results/predicted_v100_b1.md
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "common/strings.h"
#include "graph/passes.h"
#include "networks/registry.h"
#include "profiler/analytic_cost_model.h"
#include "scheduler/search.h"

int main(int argc, char** argv) {
  using namespace stagecraft;
  const std::string device = argc > 1 ? argv[1] : "v100";
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 1;
  profiler::AnalyticCostModel model(profiler::find_device_spec(device));
  struct Column {
    const char* name;
    scheduler::Strategy strategy;
    scheduler::DpMode mode;
  };
  const Column columns[] = {
      {"sequential", scheduler::Strategy::kSequential, scheduler::DpMode::kBoth},
      {"greedy", scheduler::Strategy::kGreedy, scheduler::DpMode::kBoth},
      {"dp-merge", scheduler::Strategy::kDp, scheduler::DpMode::kMerge},
      {"dp-concurrent", scheduler::Strategy::kDp, scheduler::DpMode::kConcurrent},
      {"dp-both", scheduler::Strategy::kDp, scheduler::DpMode::kBoth},
  };
  std::cout << "Predicted latency (ms), analytic model `" << device << "`, batch " << batch
            << ", fp32, r=3 s=8\n\n| network | sequential | greedy | dp-merge | dp-concurrent | "
               "dp-both | dp-both speed-up | dp-both search (s) |\n|---|---|---|---|---|---|---|---|\n";
  double log_speedup = 0;
  int networks = 0;
  for (const char* name : {"inception_v3", "randwire", "nasnet_a_large", "squeezenet1_0"}) {
    networks::NetworkOptions options;
    options.batch = batch;
    const graph::Graph g = graph::prepare_for_inference(networks::build_network(name, options));
    std::cout << "| " << name;
    double sequential = 0, both = 0, seconds = 0;
    for (const Column& c : columns) {
      scheduler::SearchOptions search;
      search.strategy = c.strategy;
      search.mode = c.mode;
      scheduler::SearchStats stats;
      const auto s = scheduler::make_scheduler(search)->schedule(g, model, &stats);
      std::cout << " | " << fixed(s.meta.predicted_ms, 3);
      if (c.strategy == scheduler::Strategy::kSequential) sequential = s.meta.predicted_ms;
      if (c.strategy == scheduler::Strategy::kDp && c.mode == scheduler::DpMode::kBoth) {
        both = s.meta.predicted_ms;
        seconds = stats.seconds;
      }
    }
    std::cout << " | " << fixed(sequential / both, 2) << "x | " << fixed(seconds, 2) << " |\n";
    log_speedup += std::log(sequential / both);
    ++networks;
  }
  std::cout << "\nGeometric-mean speed-up of dp-both over sequential: "
            << fixed(std::exp(log_speedup / networks), 2) << "x\n";
  return 0;
}
