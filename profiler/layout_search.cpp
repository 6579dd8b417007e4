#include "profiler/layout_search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <ostream>

#include "common/strings.h"
#include "graph/quantize.h"
#include "graph/weights.h"
#include "profiler/measured_layout_cost_model.h"
#include "profiler/timing.h"
#include "scheduler/layout_optimizer.h"
#include "scheduler/schedule.h"

namespace stagecraft::profiler {

namespace {

using graph::Layout;

constexpr int kWarmupRuns = 2;
constexpr int kBlocks = 2;

// Whether the plan chooses value v's layout (rank-4 op outputs; graph inputs keep theirs).
bool chosen_by_plan(const graph::Graph& graph, size_t v) {
  const graph::Value& value = graph.value(static_cast<graph::ValueId>(v));
  return value.producer != graph::kNoOp && value.desc.shape.rank() == 4;
}

std::vector<Layout> uniform(const graph::Graph& graph, std::vector<Layout> base, Layout l) {
  for (size_t v = 0; v < graph.num_values(); ++v)
    if (chosen_by_plan(graph, v)) base[v] = l;
  return base;
}

std::string join_layouts(const std::vector<Layout>& layouts) {
  std::string out;
  for (Layout l : layouts) out += cat(out.empty() ? "" : ",", graph::to_string(l));
  return out;
}

std::vector<Layout> default_candidates(const executor::Backend& backend, const graph::Graph& graph) {
  const Layout preferred = executor::activation_layout(backend, graph, executor::PlanOptions{});
  std::vector<Layout> candidates{preferred};
  // Quantised convolutions have fast kernels in one layout only (nhwc on the CPU).
  if (graph::is_quantised(graph)) return candidates;
  for (Layout l : backend.capabilities().layouts)
    if (l != preferred) candidates.push_back(l);
  return candidates;
}

// Median time of a sequential run of `graph` under each layout assignment: plans built once,
// then runs interleaved round by round (a noisy machine slows all of them alike).
std::vector<double> end_to_end_ms(executor::Backend& backend, const graph::Graph& graph,
                                  const executor::PlanOptions& base,
                                  const std::vector<std::vector<Layout>>& assignments, int rounds) {
  const scheduler::Schedule sequential = scheduler::sequential_schedule(graph);
  const graph::WeightStore weights = graph::random_weights(graph, 1);
  std::vector<executor::HostTensor> inputs;
  for (graph::ValueId v : graph.inputs()) {
    inputs.push_back(executor::random_host_tensor(graph.value(v).desc.shape, 1));
  }
  std::vector<std::unique_ptr<executor::ExecutionPlan>> plans;
  std::vector<std::unique_ptr<executor::Executor>> runs;
  std::vector<executor::Executor*> executors;
  for (const auto& layouts : assignments) {
    executor::PlanOptions p = base;
    p.value_layouts = layouts;
    plans.push_back(std::make_unique<executor::ExecutionPlan>(graph, sequential, weights, backend, p));
    runs.push_back(std::make_unique<executor::Executor>(*plans.back()));
    runs.back()->set_inputs(inputs);
    executors.push_back(runs.back().get());
  }
  std::vector<double> medians;
  for (const auto& samples : interleaved_ms(executors, kWarmupRuns, rounds)) {
    medians.push_back(summarise(samples).median);
  }
  return medians;
}

}  // namespace

LayoutChoice choose_layouts(executor::Backend& backend, const graph::Graph& graph, ProfileCache& cache,
                            const LayoutSearchOptions& options) {
  std::ostream* log = options.log;
  MeasuredLayoutCostModel model(backend, &cache, options.measure);
  scheduler::LayoutOptions search;
  // The backend's preferred layout first: the other layouts of an op then give up after one run
  // when they are far slower.
  search.candidates = options.candidates.empty() ? default_candidates(backend, graph) : options.candidates;
  double next_report_s = options.progress_every_s;
  model.set_progress([&](size_t measured, double seconds) {
    if (options.on_progress) options.on_progress(measured, seconds);
    if (!log || seconds < next_report_s) return;
    next_report_s = seconds + options.progress_every_s;
    *log << "layouts: " << measured << " op/layout combinations measured in " << fixed(seconds, 0)
         << " s...\n";
  });
  if (log) {
    *log << "layouts: measuring " << graph.num_ops() << " ops in " << search.candidates.size()
         << " candidate layouts (" << join_layouts(search.candidates) << ")...\n";
  }
  const scheduler::LayoutPlan dp = scheduler::optimize_layouts(graph, model, search);
  cache.save();
  LayoutChoice choice;
  choice.predicted_ms = dp.predicted_ms;
  choice.measurements = model.measurements();
  choice.measuring_s = model.measuring_seconds();
  if (log) {
    std::map<Layout, size_t> counts;
    for (size_t v = 0; v < graph.num_values(); ++v)
      if (chosen_by_plan(graph, v)) ++counts[dp.value_layouts[v]];
    *log << "layouts: predicted " << fixed(dp.predicted_ms, 3) << " ms (sum of ops) with";
    for (const auto& [layout, n] : counts) *log << " " << n << " " << graph::to_string(layout);
    *log << "; uniform:";
    for (Layout l : search.candidates) {
      *log << " " << graph::to_string(l) << " "
           << fixed(scheduler::layout_plan_cost(graph, model, uniform(graph, dp.value_layouts, l)), 3)
           << " ms";
    }
    *log << " (" << model.measurements() << " measured, " << model.cache_hits() << " cached, "
         << fixed(model.measuring_seconds(), 1) << " s; " << dp.states << " DP states, "
         << dp.dominated << " dominated)\n";
  }
  // The options run end to end: every uniform candidate (preferred first), then the DP's mix.
  std::vector<std::vector<Layout>> assignments;
  std::vector<std::string> names;
  for (Layout l : search.candidates) {
    assignments.push_back(uniform(graph, dp.value_layouts, l));
    names.push_back(cat("uniform ", graph::to_string(l)));
  }
  if (std::find(assignments.begin(), assignments.end(), dp.value_layouts) == assignments.end()) {
    assignments.push_back(dp.value_layouts);
    names.emplace_back("per-value");
  }
  const std::string key = cat("layout-verdict;", scheduler::graph_hash(graph), ";",
                              graph::compute_type(graph), ";", join_layouts(search.candidates),
                              ";streams=", options.measure.plan.max_streams);
  std::optional<double> verdict = assignments.size() > 1 ? cache.find(key) : 0.0;
  choice.verdict_cached = verdict.has_value();
  if (!verdict) {
    std::vector<std::vector<double>> blocks;
    for (int b = 0; b < kBlocks; ++b) {
      blocks.push_back(end_to_end_ms(backend, graph, options.measure.plan, assignments, options.rounds));
    }
    size_t best = 0;
    double best_total = std::numeric_limits<double>::infinity();
    for (size_t k = 1; k < assignments.size(); ++k) {
      bool clearly = true;
      double total = 0;
      for (const auto& ms : blocks) {
        clearly = clearly && ms[k] < (1.0 - options.margin) * ms[0];
        total += ms[k];
      }
      if (clearly && total < best_total) {
        best = k;
        best_total = total;
      }
    }
    verdict = static_cast<double>(best);
    cache.insert(key, *verdict);
    cache.save();
    if (log) {
      *log << "layouts: end to end (sequential, medians of " << options.rounds
           << " interleaved runs, " << kBlocks << " blocks):";
      for (size_t k = 0; k < assignments.size(); ++k) {
        *log << " " << names[k];
        for (const auto& ms : blocks) *log << (&ms == &blocks[0] ? " " : "/") << fixed(ms[k], 2);
      }
      *log << " ms\n";
    }
  }
  const auto winner = std::min(static_cast<size_t>(*verdict), assignments.size() - 1);
  choice.value_layouts = assignments[winner];
  choice.name = names[winner];
  if (log) {
    *log << "layouts: using " << choice.name
         << (winner == 0 && assignments.size() > 1
                 ? cat(" (nothing beat it by ", fixed(100 * options.margin, 0), "% in both blocks)")
                 : std::string())
         << "\n";
  }
  return choice;
}

}  // namespace stagecraft::profiler
