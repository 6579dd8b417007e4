#pragma once
/// Schedulers behind one interface: sequential (one op per stage, topological order), greedy
/// (wavefront of ready ops, one op per group, at most max_num_groups groups) and dp (dynamic
/// programming over ending subsets per block, after IOS, with merge and/or concurrent stages).
///
/// Example:
///   SearchOptions options;
///   options.strategy = Strategy::kDp;
///   SearchStats stats;
///   Schedule s = make_scheduler(options)->schedule(graph, layouts, cost_model, &stats);

#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/schedule.h"
#include "scheduler/search_options.h"

namespace stagecraft::scheduler {

/// Counters of a search.
struct SearchStats {
  size_t blocks = 0;            ///< blocks scheduled
  size_t parts = 0;             ///< parts after splitting wide blocks
  size_t states = 0;            ///< DP states
  size_t transitions = 0;       ///< DP transitions (stage choices evaluated)
  size_t stage_keys = 0;        ///< distinct canonical stage keys costed
  size_t cost_queries = 0;      ///< stage latencies asked of the cost model
  double seconds = 0;           ///< wall time
  std::vector<std::string> splits;  ///< one line per block that had to be split
  // dp on a cost model that measures (SearchBudget):
  size_t measured = 0;          ///< stages measured by this search (single ops included)
  size_t known = 0;             ///< stages the model already knew (its cache)
  size_t estimated = 0;         ///< stages never measured: costed from single-op times
  bool converged = true;        ///< the best schedule by the estimates is all measured
  bool out_of_budget = false;   ///< the budget ended the search
  double bound_ms = 0;          ///< the estimates' best latency (a lower bound when converged)
  size_t rounds = 0;            ///< solve-and-measure rounds
  double measuring_seconds = 0; ///< time spent in the cost model's measurements
  /// Set by callers that keep schedules (session::Pipeline::schedule): the file the schedule came
  /// from instead of a search ("" when it was searched).
  std::string from_cache;
  /// Set by session::Pipeline::search on a measured backend: the searched schedule against the
  /// sequential one end to end, and which was kept (session/schedule_check.h).
  std::string end_to_end;
};

/// A scheduler: turns a graph into a schedule using a cost model.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  /// "sequential", "greedy" or "dp".
  virtual std::string name() const = 0;
  /// Schedules `graph` whose activations run in `layouts`; fills `stats` when given. The result
  /// validates against the graph and carries predicted stage latencies, metadata (network, hash,
  /// batch, device, settings) and `layouts` as given.
  virtual Schedule schedule(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                            CostModel& model, SearchStats* stats = nullptr) = 0;
  /// Schedules `graph` in the backend's default layouts.
  Schedule schedule(const graph::Graph& graph, CostModel& model, SearchStats* stats = nullptr) {
    return schedule(graph, graph::LayoutAssignment{}, model, stats);
  }
};

/// The scheduler `options.strategy` names.
std::unique_ptr<Scheduler> make_scheduler(const SearchOptions& options);

/// Predicted latency of each stage (set in place) and their sum, with one cost query per distinct
/// stage key, in the schedule's layouts.
double cost_schedule(const graph::Graph& graph, CostModel& model, Schedule& schedule);

}  // namespace stagecraft::scheduler
