#pragma once
/// The schedule-search settings shared by the CLI's `schedule`, `run` and `bench` (--mode, -r, -s,
/// --unpruned, --max-part-transitions, --cost-model) and by the Python module, and obtaining a
/// schedule from a file or a strategy name.

#include <string>

#include "scheduler/search.h"
#include "session/backend_session.h"

namespace stagecraft::session {

/// Search settings.
struct SearchSettings {
  std::string mode = "both";   ///< dp stage kinds: both | merge | concurrent
  int max_group_size = 3;      ///< r
  int max_num_groups = 8;      ///< s
  bool unpruned = false;       ///< search every ending and group partition
  double max_part_transitions = 2e5;
  /// dp on a measured model: seconds for the whole search (0: no limit); see SearchBudget.
  double budget_s = scheduler::SearchBudget{}.seconds;
  /// dp on a measured model: measure every stage that could still win (the unbounded search).
  bool exhaustive = false;
  std::string cost_model;  ///< "" = measured with a backend, analytic:v100 without

  /// Scheduler options for `strategy` ("sequential", "greedy", "dp").
  scheduler::SearchOptions options(const std::string& strategy) const;
  /// The same settings with another DP mode.
  SearchSettings with_mode(std::string m) const {
    SearchSettings f = *this;
    f.mode = std::move(m);
    return f;
  }
};

/// Whether `spec` is a strategy name (sequential | greedy | dp) rather than a schedule file.
bool is_strategy_name(const std::string& spec);

/// A schedule from a file (validated against `graph`), or found now with a strategy name
/// ("sequential", "greedy", "dp") and `settings` on the session's cost model. `on_progress`, when
/// given, receives the search's progress. Throws UsageError when `spec` is neither.
scheduler::Schedule obtain_schedule(
    const std::string& spec, const graph::Graph& graph, BackendSession& session,
    const SearchSettings& settings, scheduler::SearchStats* stats = nullptr,
    std::function<void(const scheduler::SearchProgress&)> on_progress = nullptr);

}  // namespace stagecraft::session
