#pragma once
/// Schedules found by DP searches on a measured model, kept beside the profile cache (in
/// <cache dir>/schedules/, one YAML file per search key), so that a second run of the same model
/// with the same settings on the same device starts at once instead of searching again.
///
/// The key covers what the search depended on: the graph's content hash, the cost model and
/// device fingerprint, the measurement settings (layouts, stream slots) and the search options
/// (strategy, mode, r, s, pruning, part size, exhaustive, tiny-stage threshold). The time budget
/// is not in the key: a cached schedule serves a search whose budget is no longer than its own,
/// or any search when it converged.
///
/// Example:
///   ScheduleCache cache(ScheduleCache::dir_beside(profile_cache.path()));
///   const std::string key = ScheduleCache::key(graph, model, measured.settings_key(graph), options);
///   if (auto s = cache.find(key, graph, options.budget.seconds)) return *s;
///   ... search ...; cache.store(key, graph, schedule);

#include <optional>
#include <string>

#include "scheduler/cost_model.h"
#include "scheduler/schedule.h"
#include "scheduler/search.h"

namespace stagecraft::session {

/// Searched schedules on disk.
class ScheduleCache {
 public:
  /// A cache in `dir` (created on the first store).
  explicit ScheduleCache(std::string dir) : dir_(std::move(dir)) {}

  /// The schedules folder beside a profile cache file: <its folder>/schedules.
  static std::string dir_beside(const std::string& profile_cache_path);

  /// The key of a search of `graph` on `model` whose measurements depend on `measure_settings`.
  static std::string key(const graph::Graph& graph, const scheduler::CostModel& model,
                         const std::string& measure_settings, const scheduler::SearchOptions& options);

  /// The cached schedule for `key` if one serves a search with a budget of `budget_s` seconds
  /// (0: none): it converged, or its own budget was no shorter. A file that does not load or
  /// does not fit `graph` is a miss.
  std::optional<scheduler::Schedule> find(const std::string& key, const graph::Graph& graph,
                                          double budget_s) const;

  /// Writes `schedule` under `key`. Throws IoError when the folder cannot be written.
  void store(const std::string& key, const graph::Graph& graph, const scheduler::Schedule& schedule) const;

  /// The file of a key.
  std::string path(const std::string& key) const;

 private:
  std::string dir_;
};

}  // namespace stagecraft::session
