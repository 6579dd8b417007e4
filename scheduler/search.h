#pragma once
/// Schedulers behind one interface: sequential (one op per stage, topological order), greedy
/// (wavefront of ready ops, one op per group, at most max_num_groups groups) and dp (dynamic
/// programming over ending subsets per block, after IOS, with merge and/or concurrent stages).
///
/// Example:
///   SearchOptions options;
///   options.strategy = Strategy::kDp;
///   SearchStats stats;
///   Schedule s = make_scheduler(options)->schedule(graph, cost_model, &stats);

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/schedule.h"

namespace stagecraft::scheduler {

/// Which scheduler.
enum class Strategy : uint8_t { kSequential, kGreedy, kDp };
/// Which stage kinds the DP may use.
enum class DpMode : uint8_t { kBoth, kMerge, kConcurrent };

/// "sequential" | "greedy" | "dp".
std::string_view to_string(Strategy strategy);
/// "both" | "merge" | "concurrent".
std::string_view to_string(DpMode mode);
/// Parses a strategy name; throws UsageError listing the valid ones.
Strategy parse_strategy(std::string_view name);
/// Parses a DP mode name; throws UsageError listing the valid ones.
DpMode parse_dp_mode(std::string_view name);

/// Progress of a running search, reported to SearchOptions::on_progress.
struct SearchProgress {
  size_t block = 0;         ///< blocks finished
  size_t num_blocks = 0;    ///< blocks in all
  size_t states = 0;        ///< DP states explored so far
  size_t transitions = 0;   ///< DP transitions so far
  double seconds = 0;       ///< elapsed
};

/// Options of every scheduler (each uses the ones that apply to it).
struct SearchOptions {
  Strategy strategy = Strategy::kDp;  ///< which scheduler
  DpMode mode = DpMode::kBoth;        ///< dp: stage kinds
  int max_group_size = 3;             ///< r: ops per group of a concurrent stage (dp)
  int max_num_groups = 8;             ///< s: groups per stage (dp and greedy)
  bool pruned = true;                 ///< dp: false searches every ending and group partition
  /// dp: a block whose estimated transitions exceed this is split into parts at the points where
  /// the fewest tensors cross (reported in SearchStats::splits; no stage spans two parts).
  double max_part_transitions = 2e5;
  /// dp: hard cap on ops per part (the DP state is a 64-bit set).
  int max_part_ops = 64;
  /// Called about every 0.2 s during a search (optional).
  std::function<void(const SearchProgress&)> on_progress;
};

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
};

/// A scheduler: turns a graph into a schedule using a cost model.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  /// "sequential", "greedy" or "dp".
  virtual std::string name() const = 0;
  /// Schedules `graph`; fills `stats` when given. The result validates against the graph and
  /// carries predicted stage latencies and metadata (network, hash, batch, device, settings).
  virtual Schedule schedule(const graph::Graph& graph, CostModel& model,
                            SearchStats* stats = nullptr) = 0;
};

/// The scheduler `options.strategy` names.
std::unique_ptr<Scheduler> make_scheduler(const SearchOptions& options);

/// Predicted latency of each stage (set in place) and their sum, with one cost query per distinct
/// stage key.
double cost_schedule(const graph::Graph& graph, CostModel& model, Schedule& schedule);

}  // namespace stagecraft::scheduler
