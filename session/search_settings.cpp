#include "session/search_settings.h"

#include <filesystem>

#include "common/error.h"
#include "common/strings.h"
#include "scheduler/schedule_yaml.h"

namespace stagecraft::session {

scheduler::SearchOptions SearchSettings::options(const std::string& strategy) const {
  scheduler::SearchOptions o;
  o.strategy = scheduler::parse_strategy(strategy);
  o.mode = scheduler::parse_dp_mode(mode);
  o.max_group_size = max_group_size;
  o.max_num_groups = max_num_groups;
  o.pruned = !unpruned;
  o.max_part_transitions = max_part_transitions;
  return o;
}

bool is_strategy_name(const std::string& spec) {
  return spec == "sequential" || spec == "greedy" || spec == "dp";
}

scheduler::Schedule obtain_schedule(const std::string& spec, const graph::Graph& graph,
                                    BackendSession& session, const SearchSettings& settings,
                                    scheduler::SearchStats* stats,
                                    std::function<void(const scheduler::SearchProgress&)> on_progress) {
  if (!is_strategy_name(spec)) {
    if (!std::filesystem::exists(spec)) {
      throw UsageError(cat("--schedule: '", spec, "' is neither a file nor one of sequential, "
                           "greedy, dp"));
    }
    return scheduler::load_schedule(spec, graph);
  }
  scheduler::SearchOptions options = settings.options(spec);
  options.on_progress = std::move(on_progress);
  return scheduler::make_scheduler(options)->schedule(graph, *session.model, stats);
}

}  // namespace stagecraft::session
