#include "layouts/layout_search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "common/strings.h"
#include "graph/quantize.h"
#include "graph/weights.h"
#include "profiler/timing.h"
#include "layouts/layout_dp.h"
#include "scheduler/schedule.h"

namespace stagecraft::layouts {

using profiler::interleaved_ms;
using profiler::summarise;

namespace {

using graph::Layout;

constexpr int kWarmupRuns = 2;
constexpr int kBlocks = 2;

std::string join_layouts(const std::vector<Layout>& layouts) {
  std::string out;
  for (Layout l : layouts) out += cat(out.empty() ? "" : ",", graph::to_string(l));
  return out;
}

// Median time of a sequential run of `graph` under each layout assignment (interleaved).
std::vector<double> end_to_end_ms(executor::Backend& backend, const graph::Graph& graph,
                                  const MeasureOptions& measure,
                                  const std::vector<graph::LayoutAssignment>& assignments, int rounds) {
  const scheduler::Schedule sequential = scheduler::sequential_schedule(graph);
  std::vector<profiler::PlanVariant> variants;
  for (const auto& layouts : assignments) {
    profiler::PlanVariant& v = variants.emplace_back();
    v.schedule = &sequential;
    v.options.max_streams = measure.max_streams;
    v.options.layouts = layouts;
  }
  std::vector<double> medians;
  for (const auto& samples : profiler::interleaved_plan_ms(backend, graph, variants, kWarmupRuns, rounds)) {
    medians.push_back(summarise(samples).median);
  }
  return medians;
}

}  // namespace

LayoutSearch::LayoutSearch(executor::Backend& backend, ProfileCache& cache, VerdictCache& verdicts,
                           LayoutSearchOptions options)
    : backend_(backend), cache_(cache), verdicts_(verdicts), options_(std::move(options)) {}

LayoutChoice LayoutSearch::choose(const graph::Graph& graph) {
  const LayoutPrediction prediction = predict(graph);
  if (prediction.remembered) return chosen_.at(prediction.graph_key);
  if (options_.log) *options_.log << describe(prediction);  // before the end-to-end runs
  const LayoutVerdict verdict = verify(graph, prediction);   // its lines too
  const LayoutCandidate& winner = prediction.options[verdict.winner];
  LayoutChoice choice;
  choice.layouts = winner.layouts;
  choice.name = winner.name;
  choice.predicted_ms = prediction.dp_ms;
  choice.measurements = prediction.measurements;
  choice.measuring_s = prediction.measuring_s;
  choice.verdict_cached = verdict.cached;
  return chosen_.emplace(prediction.graph_key, std::move(choice)).first->second;
}

LayoutPrediction LayoutSearch::predict(const graph::Graph& graph) {
  const LayoutProbes probes =
      plan_layout_probes(backend_, graph, options_.candidates, options_.measure.max_streams);
  LayoutPrediction prediction;
  prediction.candidates = probes.candidates;
  prediction.graph_key = probes.graph_key;
  if (chosen_.count(probes.graph_key)) {
    prediction.remembered = true;
    return prediction;
  }
  std::ostream* log = options_.log;
  if (log) {
    *log << "layouts: measuring " << graph.num_ops() << " ops in " << probes.candidates.size()
         << " candidate layouts (" << join_layouts(probes.candidates) << ")...\n";
  }
  double next_report_s = options_.progress_every_s;
  const auto progress = [&](size_t measured, double seconds) {
    if (options_.on_progress) options_.on_progress(measured, seconds);
    if (!log || seconds < next_report_s) return;
    next_report_s = seconds + options_.progress_every_s;
    *log << "layouts: " << measured << " op/layout combinations measured in " << fixed(seconds, 0)
         << " s...\n";
  };
  LayoutMeasurement measured = measure_layout_probes(backend_, probes, cache_, options_.measure, progress);
  layouts::LayoutDpOptions search;
  search.candidates = probes.candidates;
  const layouts::LayoutPlan dp = layouts::optimize_layouts(graph, measured.table, search);
  prediction.dp_ms = dp.predicted_ms;
  prediction.dp_states = dp.states;
  prediction.dp_dominated = dp.dominated;
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (layouts::chooses_layout(graph, static_cast<graph::ValueId>(v))) ++prediction.dp_counts[dp.value_layouts[v]];
  }
  for (Layout l : probes.candidates) {
    std::vector<Layout> uniform = layouts::uniform_layouts(graph, dp.value_layouts, l);
    const double ms = layouts::layout_plan_cost(graph, measured.table, uniform);
    prediction.options.push_back({cat("uniform ", graph::to_string(l)),
                                  graph::LayoutAssignment::per_value(std::move(uniform), probes.graph_key), ms});
  }
  const graph::LayoutAssignment mix = graph::LayoutAssignment::per_value(dp.value_layouts, probes.graph_key);
  const bool mixed = std::none_of(prediction.options.begin(), prediction.options.end(),
                                  [&](const LayoutCandidate& o) { return o.layouts == mix; });
  if (mixed) prediction.options.push_back({"per-value", mix, dp.predicted_ms});
  prediction.measurements = measured.measurements;
  prediction.cache_hits = measured.cache_hits;
  prediction.measuring_s = measured.measuring_s;
  prediction.verdict_key = cat("layout-verdict;", probes.graph_key, ";", probes.compute_type, ";",
                               join_layouts(probes.candidates),
                               ";streams=", options_.measure.max_streams);
  return prediction;
}

LayoutVerdict LayoutSearch::verify(const graph::Graph& graph, const LayoutPrediction& prediction) {
  LayoutVerdict verdict;
  const size_t n = prediction.options.size();
  verdict.cached = n == 1;  // nothing to choose between
  if (const std::optional<std::string> known = n > 1 ? verdicts_.find(prediction.verdict_key) : std::nullopt) {
    for (size_t k = 0; k < n && !verdict.cached; ++k) {
      verdict.cached = prediction.options[k].name == *known;
      if (verdict.cached) verdict.winner = k;
    }  // a name no option has (other candidates now): decide again
  }
  if (!verdict.cached) {
    std::vector<graph::LayoutAssignment> assignments;
    for (const LayoutCandidate& o : prediction.options) assignments.push_back(o.layouts);
    for (int b = 0; b < kBlocks; ++b) {
      verdict.blocks.push_back(end_to_end_ms(backend_, graph, options_.measure, assignments, options_.rounds));
    }
    double best_total = std::numeric_limits<double>::infinity();
    for (size_t k = 1; k < n; ++k) {
      bool clearly = true;
      double total = 0;
      for (const auto& ms : verdict.blocks) {
        clearly = clearly && ms[k] < (1.0 - options_.margin) * ms[0];
        total += ms[k];
      }
      if (clearly && total < best_total) {
        verdict.winner = k;
        best_total = total;
      }
    }
    verdicts_.insert(prediction.verdict_key, prediction.options[verdict.winner].name);
    verdicts_.save();
  }
  if (!options_.log) return verdict;
  std::ostringstream out;  // the end-to-end medians (when run now) and the choice
  if (!verdict.blocks.empty()) {
    out << "layouts: end to end (sequential, medians of " << options_.rounds << " interleaved runs, "
        << verdict.blocks.size() << " blocks):";
    for (size_t k = 0; k < n; ++k) {
      out << " " << prediction.options[k].name;
      for (size_t b = 0; b < verdict.blocks.size(); ++b) {
        out << (b == 0 ? " " : "/") << fixed(verdict.blocks[b][k], 2);
      }
    }
    out << " ms\n";
  }
  out << "layouts: using " << prediction.options[verdict.winner].name
      << (verdict.winner == 0 && n > 1
              ? cat(" (nothing beat it by ", fixed(100 * options_.margin, 0), "% in both blocks)")
              : std::string())
      << "\n";
  *options_.log << out.str();
  return verdict;
}

std::string LayoutSearch::describe(const LayoutPrediction& prediction) const {
  std::ostringstream out;
  out << "layouts: predicted " << fixed(prediction.dp_ms, 3) << " ms (sum of ops) with";
  for (const auto& [layout, n] : prediction.dp_counts) out << " " << n << " " << graph::to_string(layout);
  out << "; uniform:";
  for (size_t k = 0; k < prediction.candidates.size(); ++k) {
    out << " " << graph::to_string(prediction.candidates[k]) << " "
        << fixed(prediction.options[k].predicted_ms, 3) << " ms";
  }
  out << " (" << prediction.measurements << " measured, " << prediction.cache_hits << " cached, "
      << fixed(prediction.measuring_s, 1) << " s; " << prediction.dp_states << " DP states, "
      << prediction.dp_dominated << " dominated)\n";
  return out.str();
}

}  // namespace stagecraft::layouts
