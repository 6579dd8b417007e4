#include "session/search_settings.h"

#include <filesystem>
#include <optional>

#include "common/error.h"
#include "common/strings.h"
#include "scheduler/schedule_yaml.h"
#include "session/schedule_cache.h"

namespace stagecraft::session {

namespace {
constexpr double kCpuTinyStageMs = 0.03;  // ops faster than this alone are "tiny" on a CPU
}  // namespace

scheduler::SearchOptions SearchSettings::options(const std::string& strategy) const {
  scheduler::SearchOptions o;
  o.strategy = scheduler::parse_strategy(strategy);
  o.mode = scheduler::parse_dp_mode(mode);
  o.max_group_size = max_group_size;
  o.max_num_groups = max_num_groups;
  o.pruned = !unpruned;
  o.max_part_transitions = max_part_transitions;
  o.budget.seconds = budget_s;
  o.budget.exhaustive = exhaustive;
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
  // On a CPU the streams share the cores: stages of tiny ops gain nothing from running
  // concurrently (measured on 2 cores: concurrent stages whose ops sum to < 0.1 ms ran 0.9-3.7x
  // the sum of their ops alone), so they are judged from their ops without measuring.
  if (session.backend && session.backend->capabilities().streams_share_cores && !settings.exhaustive) {
    options.budget.tiny_ms = kCpuTinyStageMs;
  }
  // A search on a measured model is kept in the schedule cache beside the profile cache.
  std::optional<ScheduleCache> cache;
  std::string key;
  if (options.strategy == scheduler::Strategy::kDp && session.measured && session.cache) {
    cache.emplace(ScheduleCache::dir_beside(session.cache->path()));
    key = ScheduleCache::key(graph, *session.model, session.measured->settings_key(graph), options);
    if (auto cached = cache->find(key, graph, settings.budget_s)) {
      if (stats) {
        *stats = scheduler::SearchStats{};
        stats->from_cache = cache->path(key);
      }
      return std::move(*cached);
    }
  }
  scheduler::Schedule schedule = scheduler::make_scheduler(options)->schedule(graph, *session.model, stats);
  if (cache) cache->store(key, graph, schedule);
  return schedule;
}

}  // namespace stagecraft::session
