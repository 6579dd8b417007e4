#include "session/schedule_cache.h"

#include <filesystem>

#include "common/error.h"
#include "common/hash.h"
#include "common/strings.h"
#include "graph/yaml_io.h"
#include "scheduler/schedule_yaml.h"

namespace stagecraft::session {

std::string ScheduleCache::dir_beside(const std::string& profile_cache_path) {
  return (std::filesystem::path(profile_cache_path).parent_path() / "schedules").string();
}

std::string ScheduleCache::key(const graph::Graph& graph, const scheduler::CostModel& model,
                               const std::string& measure_settings,
                               const scheduler::SearchOptions& o) {
  return cat("graph=", graph::graph_hash(graph), ";model=", model.name(),
             ";device=", model.device_fingerprint(), ";", measure_settings,
             ";strategy=", scheduler::to_string(o.strategy), ";mode=", scheduler::to_string(o.mode),
             ";r=", o.max_group_size, ";s=", o.max_num_groups, ";pruned=", o.pruned,
             ";part_transitions=", o.max_part_transitions, ";part_ops=", o.max_part_ops,
             ";exhaustive=", o.budget.exhaustive, ";tiny_ms=", o.budget.tiny_ms);
}

std::string ScheduleCache::path(const std::string& key) const {
  Fnv1a hash;
  hash.add_string(key);
  return (std::filesystem::path(dir_) / (hex64(hash.digest()) + ".yaml")).string();
}

std::optional<scheduler::Schedule> ScheduleCache::find(const std::string& key,
                                                       const graph::Graph& graph,
                                                       double budget_s) const {
  const std::string file = path(key);
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  try {
    scheduler::Schedule schedule = scheduler::load_schedule(file, graph);
    const double searched_s = schedule.meta.search.budget.seconds;
    const bool longer_or_equal = searched_s == 0 || (budget_s > 0 && searched_s >= budget_s);
    if (schedule.meta.converged || longer_or_equal) return schedule;
  } catch (const Error&) {
    // Written by another version, or damaged: searched again and replaced.
  }
  return std::nullopt;
}

void ScheduleCache::store(const std::string& key, const graph::Graph& graph,
                          const scheduler::Schedule& schedule) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw IoError(cat(dir_, ": cannot create the schedule cache folder (", ec.message(), ")"));
  scheduler::save_schedule(graph, schedule, path(key));
}

}  // namespace stagecraft::session
