#pragma once
/// What a search is asked to do: the scheduler, its stage kinds and limits, the measuring budget.
/// One type for every front end (CLI flags, Python arguments) and for the record a schedule
/// keeps of how it was made (ScheduleMeta::search).
///
/// Example:
///   SearchOptions options;
///   options.strategy = Strategy::kDp;
///   options.mode = parse_dp_mode("merge");
///   options.budget.seconds = 10;

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string_view>

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
  size_t block = 0;         ///< blocks finished (dp: parts whose enumeration is done)
  size_t num_blocks = 0;    ///< blocks in all (dp: parts)
  size_t states = 0;        ///< DP states explored so far
  size_t transitions = 0;   ///< DP transitions so far
  double seconds = 0;       ///< elapsed
  // A search on a model that measures (dp): what it measured and where it stands.
  size_t stages = 0;        ///< distinct candidate stages (canonical keys) found so far
  size_t measured = 0;      ///< stages measured so far (single ops included)
  size_t estimated = 0;     ///< stages costed without measuring (cached, or from single-op times)
  double best_ms = 0;       ///< the best schedule's predicted latency so far (0: none yet)
  double bound_ms = 0;      ///< what the best schedule could reach by the current estimates
  double budget_s = 0;      ///< the time budget (0: none)
};

/// How long a DP on a cost model that measures may take, and what it may skip. The search starts
/// from single-op measurements (the sequential schedule is always complete), costs every other
/// candidate stage from them (optimistic ratios learned from the stages measured so far), and
/// measures only the stages on the schedule the estimates say is best, repeating until that
/// schedule is all measured (converged) or the budget ends; then it returns the best schedule
/// whose every stage is measured or derived from measurements. Cheap cost models (every latency
/// known) get the exact DP.
struct SearchBudget {
  /// Wall-clock seconds for the whole search (enumeration and measurement); 0: no limit. Single
  /// ops are measured even past it (without them there is no schedule).
  double seconds = 40;
  /// Stages measured at most beyond the single ops (deterministic budgets for tests).
  size_t max_measurements = std::numeric_limits<size_t>::max();
  /// Stages whose ops each take less than this (ms, alone) are costed as the sum of their ops'
  /// times, never measured (0: off; on a CPU, tiny ops gain nothing from streams).
  double tiny_ms = 0;
  /// After converging on the estimates, go on measuring every stage that could still win however
  /// optimistic its estimate (the unbounded search: with seconds = 0 it finds the same schedule as
  /// measuring every candidate, in hours on NASNet-A Large).
  bool exhaustive = false;
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
  /// dp on a cost model that measures: time budget and shortcuts.
  SearchBudget budget;
  /// Called about every 0.2 s during a search (optional).
  std::function<void(const SearchProgress&)> on_progress;
};

}  // namespace stagecraft::scheduler
