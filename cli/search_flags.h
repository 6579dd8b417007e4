#pragma once
/// The schedule-search options shared by `schedule`, `run` and `bench`: --mode, -r, -s,
/// --unpruned, --max-part-transitions, --cost-model.

#include <CLI/CLI.hpp>
#include <string>

#include "scheduler/search.h"

namespace stagecraft::cli {

/// Search settings from the command line.
struct SearchFlags {
  std::string mode = "both";
  int max_group_size = 3;
  int max_num_groups = 8;
  bool unpruned = false;
  double max_part_transitions = 2e5;
  std::string cost_model;  ///< "" = measured with --backend, analytic:v100 without

  /// Adds the options to `command`.
  void add_options(CLI::App& command);
  /// Scheduler options for `strategy` ("sequential", "greedy", "dp").
  scheduler::SearchOptions options(const std::string& strategy) const;
  /// The same flags with another DP mode.
  SearchFlags with_mode(std::string m) const {
    SearchFlags f = *this;
    f.mode = std::move(m);
    return f;
  }
};

}  // namespace stagecraft::cli
