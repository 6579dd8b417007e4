#include "session/pipeline.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "common/error.h"
#include "common/strings.h"
#include "profiler/layout_search.h"
#include "scheduler/schedule_yaml.h"
#include "session/schedule_cache.h"

namespace stagecraft::session {

namespace {

constexpr double kCpuTinyStageMs = 0.03;  // ops faster than this alone are "tiny" on a CPU

// The ops of `plan` that do not run in their planned layout: with a layout the user forced
// (layout L), one warning line on options.log naming the ops, the layout and where they run
// instead (once per process and layout). Returns a short note for the plan line ("" when every op
// runs as planned).
std::string report_fallbacks(const SessionOptions& options, const executor::ExecutionPlan& plan) {
  const auto& fallbacks = plan.fallbacks();
  if (fallbacks.empty()) return "";
  constexpr size_t kNamed = 4;
  // Group by where the ops run: "nChw8c: a, b, c (+12 more)".
  std::map<std::string, std::vector<std::string>> by_target;
  for (const auto& f : fallbacks) {
    by_target[f.used ? std::string(graph::to_string(*f.used)) : "the reference kernel"].push_back(f.op);
  }
  std::string where;
  for (const auto& [target, ops] : by_target) {
    std::vector<std::string> named(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(std::min(kNamed, ops.size())));
    where += cat(where.empty() ? "" : "; ", ops.size(), " in ", target, " (", join(named, ", "),
                 ops.size() > kNamed ? cat(", +", ops.size() - kNamed, " more") : std::string(), ")");
  }
  const std::string wanted(graph::to_string(fallbacks.front().wanted));
  static std::mutex warned_mutex;  // sessions may build plans on several threads (Python)
  static std::set<std::string> warned;
  const std::lock_guard<std::mutex> lock(warned_mutex);
  if (options.log && !options.layout.empty() && !options.auto_layout() &&
      warned.insert(options.layout).second) {
    *options.log << "stagecraft: warning: --layout " << options.layout << ": " << fallbacks.size()
              << " op(s) have only a reference kernel in " << wanted << " on this "
              << (plan.backend().name() == "cpu" ? "CPU" : "device") << " ("
              << plan.backend().device().description() << "); they run " << where
              << " with conversions around them. First reason: " << fallbacks.front().reason << "\n";
  }
  return cat(fallbacks.size(), " op(s) without a native kernel in their layout: ", where);
}

// A schedule searched now with `options` on the session's model; a dp search on a measured
// model is kept in (and answered from) the schedule cache beside the profile cache.
scheduler::Schedule search_schedule(const graph::Graph& graph, BackendSession& session,
                                    scheduler::SearchOptions options, scheduler::SearchStats* stats) {
  // On a CPU the streams share the cores: stages of tiny ops gain nothing from running
  // concurrently (measured on 2 cores: concurrent stages whose ops sum to < 0.1 ms ran 0.9-3.7x
  // the sum of their ops alone), so they are judged from their ops without measuring.
  if (session.backend && session.backend->capabilities().streams_share_cores &&
      !options.budget.exhaustive) {
    options.budget.tiny_ms = kCpuTinyStageMs;
  }
  std::optional<ScheduleCache> cache;
  std::string key;
  if (options.strategy == scheduler::Strategy::kDp && session.measured && session.cache) {
    cache.emplace(ScheduleCache::dir_beside(session.cache->path()));
    key = ScheduleCache::key(graph, *session.model, session.measured->settings_key(graph), options);
    if (auto cached = cache->find(key, graph, options.budget.seconds)) {
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

}  // namespace

bool is_strategy_name(const std::string& spec) {
  return spec == "sequential" || spec == "greedy" || spec == "dp";
}

Pipeline::Pipeline(SessionOptions options, scheduler::SearchOptions search)
    : options_(std::move(options)), search_(std::move(search)), session_(BackendSession::open(options_)) {}

executor::Backend& Pipeline::backend(const std::string& what) {
  if (!session_.backend) {
    throw UsageError(cat(what, " needs a backend (--backend cpu; in Python backend='cpu')"));
  }
  return *session_.backend;
}

executor::PlanOptions Pipeline::layouts(const graph::Graph& graph) {
  executor::PlanOptions plan = options_.plan_options();
  if (options_.auto_layout()) plan.value_layouts = layout_search().choose(graph).value_layouts;
  return plan;
}

profiler::LayoutSearch& Pipeline::layout_search() {
  if (layout_search_) return *layout_search_;
  if (!session_.backend) {
    throw UsageError("--layout auto measures layouts on a backend: add --backend cpu (or cuda)");
  }
  profiler::ProfileCache* cache = session_.cache.get();
  if (!cache) {  // the analytic cost model: the layout measurements still go to the cache file
    layout_cache_ = std::make_unique<profiler::ProfileCache>(options_.cache_dir_or_default(),
                                                             session_.backend->device().device_fingerprint());
    cache = layout_cache_.get();
  }
  profiler::LayoutSearchOptions search;
  search.measure.plan = options_.plan_options();
  search.measure.executor = options_.executor;
  search.log = options_.log;
  search.on_progress = options_.on_layout_progress;
  layout_search_ = std::make_unique<profiler::LayoutSearch>(*session_.backend, *cache, std::move(search));
  return *layout_search_;
}

ScheduledGraph Pipeline::schedule(const graph::Graph& graph, const std::string& spec,
                                  SearchProgressCallback on_progress) {
  return schedule(graph, spec, search_.mode, std::move(on_progress));
}

ScheduledGraph Pipeline::schedule(const graph::Graph& graph, const std::string& spec,
                                  scheduler::DpMode mode, SearchProgressCallback on_progress) {
  ScheduledGraph result;
  if (!is_strategy_name(spec)) {
    if (!std::filesystem::exists(spec)) {
      throw UsageError(cat("--schedule: '", spec, "' is neither a file nor one of sequential, "
                           "greedy, dp"));
    }
    return in_its_layouts(graph, scheduler::load_schedule(spec, graph));  // validated on loading
  }
  // Layouts first: the search measures stages in them, and the schedule records them.
  result.plan_options = layouts(graph);
  if (session_.measured) session_.measured->set_value_layouts(result.plan_options.value_layouts);
  scheduler::SearchOptions options = search_;
  options.strategy = scheduler::parse_strategy(spec);
  options.mode = mode;
  options.on_progress = std::move(on_progress);
  result.schedule = search_schedule(graph, session_, std::move(options), &result.stats);
  result.searched = true;
  const executor::PlanOptions& plan = result.plan_options;
  if (options_.auto_layout() && !plan.value_layouts.empty()) {
    result.schedule.meta.layout = "auto";
    result.schedule.value_layouts = plan.value_layouts;
  } else if (plan.layout) {
    result.schedule.meta.layout = std::string(graph::to_string(*plan.layout));
  }
  return result;
}

ScheduledGraph Pipeline::adopt(const graph::Graph& graph, scheduler::Schedule schedule) {
  scheduler::validate(graph, schedule);
  return in_its_layouts(graph, std::move(schedule));
}

ScheduledGraph Pipeline::in_its_layouts(const graph::Graph& graph, scheduler::Schedule schedule) {
  ScheduledGraph result;
  result.plan_options = layouts_of_schedule(graph, schedule);
  result.schedule = std::move(schedule);
  return result;
}

executor::PlanOptions Pipeline::layouts_of_schedule(const graph::Graph& graph,
                                                    const scheduler::Schedule& schedule) {
  if (!options_.layout.empty()) return layouts(graph);  // a layout the user gives wins
  executor::PlanOptions plan = options_.plan_options();
  if (!schedule.value_layouts.empty()) {
    plan.value_layouts = schedule.value_layouts;
  } else if (const auto l = graph::parse_layout(schedule.meta.layout)) {
    plan.layout = *l;
  }
  return plan;
}

PreparedPlan Pipeline::plan(const Model& model, ScheduledGraph scheduled) {
  return plan(model.graph, model.weights, std::move(scheduled));
}

PreparedPlan Pipeline::plan(const graph::Graph& graph, const graph::WeightStore& weights,
                            ScheduledGraph scheduled) {
  PreparedPlan prepared;
  prepared.plan = std::make_unique<executor::ExecutionPlan>(
      graph, scheduled.schedule, weights, backend("running a plan"), scheduled.plan_options);
  prepared.fallback_note = report_fallbacks(options_, *prepared.plan);
  prepared.scheduled = std::move(scheduled);
  return prepared;
}

PreparedPlan Pipeline::prepare(const Model& model, const std::string& spec,
                               SearchProgressCallback on_progress) {
  backend("running a plan");  // before any search
  ScheduledGraph scheduled = schedule(model.graph, spec, std::move(on_progress));
  save_cache();
  return plan(model, std::move(scheduled));
}

std::unique_ptr<executor::Executor> Pipeline::executor(executor::ExecutionPlan& plan) const {
  return std::make_unique<executor::Executor>(plan, nullptr, options_.executor);
}

void Pipeline::save_cache() {
  if (session_.cache) session_.cache->save();
}

}  // namespace stagecraft::session
