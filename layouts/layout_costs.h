#pragma once
/// The measurements behind `--layout auto`: op latencies per layout combination and conversion
/// times, measured on a backend into the table the layout DP reads
/// (layouts::LayoutCostTable).
///
/// Two steps:
///   plan_layout_probes    -> the table's queries (layouts::LayoutCostTable::queries and
///                            conversions), each with its profile-cache key;
///   measure_layout_probes -> the filled table: cache hits, and for each miss the graph that times
///                            it, made then (the op alone, inputs and output in the query's
///                            layouts, planned with the same plan builder, so that conversions the
///                            plan inserts are part of the time; a conversion is an identity op).
/// An op is measured in its candidates in order (the backend's preferred first): a layout whose
/// first run is far slower than the op's best so far is not sampled further. A layout whose
/// kernel is reference-only is priced at infinity without being timed. Results go to a
/// ProfileCache shared with the stage profiler (distinct keys).
/// Complexity: per op, candidates² combinations (one chosen input) or candidates (several:
/// mixed inputs are priced with conversions); per distinct shape read, candidates² conversions.
///
/// Example:
///   LayoutProbes probes = plan_layout_probes(*backend, graph, {}, options.max_streams);
///   LayoutMeasurement measured = measure_layout_probes(*backend, probes, cache, options, nullptr);
///   LayoutPlan plan = layouts::optimize_layouts(graph, measured.table, {probes.candidates});

#include <functional>
#include <string>
#include <vector>

#include "profiler/measured_cost_model.h"
#include "layouts/layout_dp.h"

namespace stagecraft::layouts {

using profiler::MeasureOptions;
using profiler::ProfileCache;

/// One thing to time: a query of the table (LayoutProbes::queries, then conversions, in order).
struct LayoutProbe {
  std::string key;       ///< profile-cache key
  graph::Layout output = graph::Layout::kNCHW;  ///< layout of its outputs
  graph::OpId op = graph::kNoOp;  ///< the op (probes of one op share a give-up bound); kNoOp: a conversion
};

/// What the layout search measures for one graph.
struct LayoutProbes {
  std::vector<graph::Layout> candidates;  ///< layouts tried (the backend's preferred first)
  std::vector<layouts::LayoutQuery> queries;
  std::vector<layouts::ConversionQuery> conversions;
  /// One per query, then one per conversion.
  std::vector<LayoutProbe> probes;
  const graph::Graph* graph = nullptr;  ///< the graph probed (it must outlive the probes)
  std::string compute_type;  ///< the graph's (graph::compute_type)
  std::string graph_key;  ///< the graph's content hash (graph::graph_hash)
};

/// The filled table and what it cost.
struct LayoutMeasurement {
  layouts::LayoutCostTable table{{}};
  size_t measurements = 0;  ///< probes measured now (cache misses)
  size_t cache_hits = 0;    ///< probes the cache knew
  double measuring_s = 0;   ///< seconds spent measuring
};

/// The layouts `backend` runs rank-4 op outputs natively in, its preferred one for `graph` first
/// (only that one for quantised graphs: their fast kernels are in one layout).
std::vector<graph::Layout> default_layout_candidates(const executor::Backend& backend,
                                                     const graph::Graph& graph);

/// Step 1: the probes of `graph` over `candidates` (empty: default_layout_candidates);
/// `max_streams` (the plan's stream slots) is part of the cache keys.
LayoutProbes plan_layout_probes(const executor::Backend& backend, const graph::Graph& graph,
                                const std::vector<graph::Layout>& candidates,
                                int max_streams);

/// Step 2: the table, from `cache` where it knows a probe and measured otherwise (then cached);
/// `progress(measurements, measuring seconds)` after every measurement (optional; it may throw
/// to stop, e.g. on an interrupt). The cache is saved at the end.
LayoutMeasurement measure_layout_probes(executor::Backend& backend, const LayoutProbes& probes,
                                        ProfileCache& cache, const MeasureOptions& options,
                                        const std::function<void(size_t, double)>& progress);

}  // namespace stagecraft::layouts
