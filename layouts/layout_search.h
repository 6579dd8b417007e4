#pragma once
/// The `--layout auto` policy: a layout per tensor for running a graph on a backend.
///
/// Inputs: a graph, a backend, a profile cache. Output: per-value layouts (PlanOptions::
/// value_layouts). Three steps, each going down once:
///   predict -> the probes planned and measured (layouts/layout_costs.h), the layout DP
///              (layouts/layout_dp.h) on that table, and every uniform candidate priced
///              on the same table;
///   verify  -> because ops timed alone mislead (in inception_v3 the per-op sums favour nhwc while
///              the whole network runs faster blocked), the DP's per-value choice and every
///              uniform candidate run end to end (sequential schedule, interleaved, two blocks of
///              runs); the backend's preferred uniform layout stays unless another option beats
///              it by `margin` in both blocks. The verdict (the winner's name) is kept in a
///              VerdictCache beside the measurements;
///   report  -> the lines for people: the prediction (describe) before the end-to-end runs, the
///              measured medians and the choice (written by verify).
/// Complexity: the probes' measurements when the cache is cold, none when warm, plus the
/// end-to-end runs (once per graph and settings); a LayoutSearch answers a graph it has chosen
/// for before from memory.
///
/// Example:
///   LayoutSearchOptions options;
///   options.log = &std::cerr;
///   LayoutSearch search(*backend, cache, verdicts, options);
///   plan_options.layouts = search.choose(graph).layouts;

#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "layouts/layout_costs.h"
#include "profiler/profile_cache.h"

namespace stagecraft::layouts {

/// Settings of the `--layout auto` search: how it measures, which layouts it tries, when it
/// replaces the backend's layout and what it prints (the DP's own pruning settings are
/// layouts::LayoutDpOptions, which it fills from these).
struct LayoutSearchOptions {
  /// As the graph will run (stream slots, executor mode).
  MeasureOptions measure;
  /// Candidate layouts of rank-4 op outputs; empty: the backend's native layouts (its
  /// preferred one first), only the preferred one for quantised graphs.
  std::vector<graph::Layout> candidates;
  /// How much faster (fraction) another option must run end to end, in both blocks, to replace
  /// the backend's preferred uniform layout.
  double margin = 0.03;
  /// Interleaved end-to-end runs per block (medians compared).
  int rounds = 11;
  /// Progress lines and the summary go here (none when null).
  std::ostream* log = nullptr;
  /// Seconds between progress lines while measuring.
  double progress_every_s = 10;
  /// Called after every op/layout measurement with (measurements, measuring seconds) (optional;
  /// it may throw to stop the search, e.g. on an interrupt).
  std::function<void(size_t, double)> on_progress;
};

/// One way to lay out every value that the search weighs: a uniform layout or the DP's mix.
struct LayoutCandidate {
  std::string name;                 ///< "uniform nChw8c" or "per-value"
  graph::LayoutAssignment layouts;  ///< per value (graph inputs keep theirs)
  double predicted_ms = 0;          ///< sum of its op and conversion latencies
};

/// Step 1, predict: what the measured op latencies say.
struct LayoutPrediction {
  std::vector<graph::Layout> candidates;  ///< layouts tried (the backend's preferred first)
  /// Uniform layouts in candidate order (the preferred first), then the DP's per-value choice
  /// when it is not one of them.
  std::vector<LayoutCandidate> options;
  double dp_ms = 0;            ///< the DP's predicted latency (its per-value choice)
  std::map<graph::Layout, size_t> dp_counts;  ///< values per layout in the DP's choice
  size_t measurements = 0;     ///< op/layout combinations measured now (cache misses)
  size_t cache_hits = 0;       ///< combinations the cache knew
  double measuring_s = 0;      ///< seconds spent measuring
  size_t dp_states = 0, dp_dominated = 0;  ///< the DP's work
  std::string verdict_key;     ///< where step 2 keeps its verdict in the cache
  std::string graph_key;       ///< the graph's content hash
  /// This search chose for a graph of this content before: nothing was measured (the
  /// fields above are empty) and choose() answers from memory.
  bool remembered = false;
};

/// Step 2, verify: the options run end to end.
struct LayoutVerdict {
  size_t winner = 0;            ///< index into LayoutPrediction::options (cached by its name)
  bool cached = false;          ///< the verdict came from the cache (no runs now)
  /// Per block, the median end-to-end ms of every option (empty when cached).
  std::vector<std::vector<double>> blocks;
};

/// The chosen layouts.
struct LayoutChoice {
  graph::LayoutAssignment layouts;  ///< per value (PlanOptions::layouts)
  std::string name;            ///< "uniform nChw8c" or "per-value"
  double predicted_ms = 0;     ///< the DP's sum of op latencies for its per-value choice
  size_t measurements = 0;     ///< op/layout combinations measured now (cache misses)
  double measuring_s = 0;      ///< seconds spent measuring them
  bool verdict_cached = false;  ///< whether the end-to-end verdict came from the cache
};

/// The layout search of one backend and cache (see the file comment).
class LayoutSearch {
 public:
  /// A search on `backend` measuring into `cache` and keeping its verdicts in `verdicts` (all
  /// must outlive it).
  LayoutSearch(executor::Backend& backend, ProfileCache& cache, VerdictCache& verdicts,
               LayoutSearchOptions options);

  /// The three steps for `graph`, the report on options.log; a graph whose content was chosen
  /// for before is answered from memory (no measuring, no report).
  LayoutChoice choose(const graph::Graph& graph);
  /// Step 1: plans and measures the probes (layouts/layout_costs.h; cached) and runs the layout
  /// DP on them; the uniform options are priced on the same table. Progress lines go to
  /// options.log.
  LayoutPrediction predict(const graph::Graph& graph);
  /// Step 2: runs the predicted options end to end (sequential schedule, interleaved, two
  /// blocks) unless the cache holds the verdict; the preferred uniform layout (option 0) stays
  /// unless another beats it by options.margin in both blocks. The verdict goes to the cache;
  /// the end-to-end medians (when run now) and the choice go to options.log.
  LayoutVerdict verify(const graph::Graph& graph, const LayoutPrediction& prediction);
  /// The line the search prints before step 2: the DP's prediction and every uniform option's.
  std::string describe(const LayoutPrediction& prediction) const;

 private:
  executor::Backend& backend_;
  ProfileCache& cache_;
  VerdictCache& verdicts_;
  LayoutSearchOptions options_;
  std::map<std::string, LayoutChoice> chosen_;  // by graph content hash
};

}  // namespace stagecraft::layouts
