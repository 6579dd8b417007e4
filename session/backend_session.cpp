#include "session/backend_session.h"

#include <algorithm>
#include <chrono>
#include <ostream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/strings.h"
#include "graph/quantize.h"
#include "graph/weights.h"
#include "profiler/layout_search.h"
#include "scheduler/schedule.h"

namespace stagecraft::session {

executor::ExecutorOptions BackendOptions::executor_options() const {
  executor::ExecutorOptions options;
  options.graph = !stream_mode;
  return options;
}

std::string BackendOptions::cache_dir_or_default() const {
  return cache_dir.empty() ? profiler::ProfileCache::default_dir() : cache_dir;
}

executor::BackendConfig BackendOptions::backend_config() const {
  executor::BackendConfig config;
  config.cache_dir = cache_dir;
  config.tf32 = tf32;
  config.winograd = winograd;
  return config;
}

executor::PlanOptions BackendOptions::plan_options() const {
  executor::PlanOptions options;
  options.max_streams = max_streams;
  if (!layout.empty() && !auto_layout()) {
    const auto parsed = graph::parse_layout(layout);
    if (!parsed || graph::layout_rank(*parsed) != 4) {
      throw UsageError(cat("--layout: unknown activation layout '", layout,
                           "' (known: nchw, nhwc, nChw8c, nChw16c, auto)"));
    }
    options.layout = parsed;
  }
  return options;
}

BackendSession BackendSession::open(const BackendOptions& options, const std::string& spec) {
  BackendSession session;
  const std::string model = spec.empty() ? (options.backend.empty() ? "analytic:v100" : "measured")
                                         : spec;
  if (!options.backend.empty()) {
    session.backend = executor::make_backend(options.backend, options.backend_config());
  }
  profiler::CostModelContext context;
  context.backend = session.backend.get();
  context.measure.plan = options.plan_options();
  context.measure.executor = options.executor_options();
  if (model.rfind("measured", 0) == 0 && session.backend) {
    session.cache = std::make_unique<profiler::ProfileCache>(options.cache_dir_or_default(),
                                                             session.backend->device_fingerprint());
    context.cache = session.cache.get();
  }
  session.model = profiler::make_cost_model(model, context);
  session.measured = dynamic_cast<profiler::MeasuredCostModel*>(session.model.get());
  return session;
}

executor::PlanOptions plan_options_for(const BackendOptions& options, const graph::Graph& graph,
                                       BackendSession& session) {
  executor::PlanOptions plan = options.plan_options();
  if (!options.auto_layout() || !session.backend) return plan;
  std::unique_ptr<profiler::ProfileCache> own_cache;
  profiler::ProfileCache* cache = session.cache.get();
  if (!cache) {
    own_cache = std::make_unique<profiler::ProfileCache>(options.cache_dir_or_default(),
                                                         session.backend->device_fingerprint());
    cache = own_cache.get();
  }
  profiler::LayoutSearchOptions search;
  search.measure.plan = plan;
  search.measure.executor = options.executor_options();
  search.log = options.log;
  search.on_progress = options.on_layout_progress;
  plan.value_layouts = profiler::choose_layouts(*session.backend, graph, *cache, search).value_layouts;
  // Schedules searched from now on are measured in these layouts.
  if (session.measured) session.measured->set_value_layouts(plan.value_layouts);
  return plan;
}

std::string report_fallbacks(const BackendOptions& options, const executor::ExecutionPlan& plan) {
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
              << plan.backend().description() << "); they run " << where
              << " with conversions around them. First reason: " << fallbacks.front().reason << "\n";
  }
  return cat(fallbacks.size(), " op(s) without a native kernel in their layout: ", where);
}

void record_layouts(const BackendOptions& options, const executor::PlanOptions& plan,
                    scheduler::Schedule& schedule) {
  if (options.auto_layout() && !plan.value_layouts.empty()) {
    schedule.meta.layout = "auto";
    schedule.value_layouts = plan.value_layouts;
  } else if (plan.layout) {
    schedule.meta.layout = std::string(graph::to_string(*plan.layout));
  }
}

executor::PlanOptions layouts_of_file(const BackendOptions& options, const scheduler::Schedule& schedule,
                                      executor::PlanOptions plan) {
  if (!options.layout.empty()) return plan;  // --layout wins
  if (!schedule.value_layouts.empty()) {
    plan.value_layouts = schedule.value_layouts;
  } else if (const auto l = graph::parse_layout(schedule.meta.layout)) {
    plan.layout = *l;
  }
  return plan;
}

}  // namespace stagecraft::session
