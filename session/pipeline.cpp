#include "session/pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "common/error.h"
#include "common/strings.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "layouts/layout_search.h"
#include "scheduler/schedule_yaml.h"
#include "session/schedule_cache.h"
#include "session/schedule_check.h"

namespace stagecraft::session {

namespace {

constexpr double kCpuTinyStageMs = 0.03;  // ops faster than this alone are "tiny" on a CPU

}  // namespace

// A dp search on a measured model is kept in (and answered from) the schedule cache beside the
// profile cache.
scheduler::Schedule Pipeline::search(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                                     scheduler::SearchOptions options, scheduler::SearchStats* stats) {
  opened_.open_cost_model(options_);
  // On a CPU the streams share the cores: stages of tiny ops gain nothing from running
  // concurrently (measured on 2 cores: concurrent stages whose ops sum to < 0.1 ms ran 0.9-3.7x
  // the sum of their ops alone), so they are judged from their ops without measuring.
  if (opened_.backend && opened_.backend->capabilities().streams_share_cores &&
      !options.budget.exhaustive) {
    options.budget.tiny_ms = kCpuTinyStageMs;
  }
  std::optional<ScheduleCache> cache;
  std::string key;
  if (options.strategy == scheduler::Strategy::kDp && opened_.measured && opened_.cache) {
    cache.emplace(ScheduleCache::dir_beside(opened_.cache->path()));
    key = ScheduleCache::key(graph, *opened_.cost_model, opened_.measured->settings_key(graph, layouts),
                             options);
    if (auto cached = cache->find(key, graph, options.budget.seconds)) {
      if (stats) {
        *stats = scheduler::SearchStats{};
        stats->from_cache = cache->path(key);
      }
      return std::move(*cached);
    }
  }
  scheduler::Schedule schedule =
      scheduler::make_scheduler(options)->schedule(graph, layouts, *opened_.cost_model, stats);
  // The search's measuring streams end here, before the check and the runs (their OpenMP teams
  // would slow both: MeasuredCostModel::release_streams).
  if (opened_.measured) opened_.measured->release_streams();
  if (options.strategy == scheduler::Strategy::kDp && opened_.measured && opened_.backend) {
    // The search costs stages one at a time; the plans themselves decide (schedule_check.h).
    const executor::PlanOptions planned = plan_options(schedule.layouts);  // before the schedule moves
    ScheduleCheck check = check_against_sequential(*opened_.backend, planned, graph, std::move(schedule));
    schedule = std::move(check.kept);
    if (stats) stats->end_to_end = check.verdict;
  }
  if (cache) cache->store(key, graph, schedule);
  return schedule;
}

Pipeline::Pipeline(SessionOptions options, scheduler::SearchOptions search)
    : options_(std::move(options)),
      forced_layout_(options_.forced_layout()),
      search_(std::move(search)),
      opened_(OpenedBackend::open(options_)) {
  // A cost model the options name is opened now (its errors before any work); the default one
  // when a search first needs it (a pipeline that only loads or calibrates never opens it).
  if (!options_.cost_model.empty()) opened_.open_cost_model(options_);
}

executor::Backend& Pipeline::backend(const std::string& what) {
  if (!opened_.backend) {
    throw UsageError(cat(what, " needs a backend (--backend cpu; in Python backend='cpu')"));
  }
  return *opened_.backend;
}

void Pipeline::check_precision(const graph::Graph& graph) const {
  if (!opened_.backend) return;
  const graph::DataType dtype = graph::compute_dtype(graph);
  const executor::Device& device = opened_.backend->device();
  if (device.capabilities().computes(dtype)) return;
  throw UsageError(cat("--dtype ", graph::compute_type(graph), ": the ", opened_.backend->name(),
                       " backend does not compute in ", graph::to_string(dtype), " on this machine (",
                       device.description(),
                       dtype == graph::DataType::kBF16 ? "; bf16 needs a CPU with AVX512_BF16 or AMX"
                       : dtype == graph::DataType::kF16 ? "; f16 runs on the CUDA backend"
                                                        : "",
                       "); use --dtype f32"));
}

Model Pipeline::load(const GraphSource& source) {
  Model model = load_model(source, [&](const Model& f32) {
    quant::CalibrationOptions options;
    options.samples = source.calibration_samples;
    options.progress = source.on_calibration_progress;
    return calibrate(f32, options);
  });
  model.graph = with_quantised_residuals(std::move(model.graph));
  return model;
}

graph::Graph Pipeline::load_graph(const GraphSource& source) {
  const bool calibrates_now = source.dtype == "int8" && source.calibration.empty();
  return calibrates_now ? load(source).graph : with_quantised_residuals(load_source(source));
}

graph::Graph Pipeline::with_quantised_residuals(graph::Graph graph) const {
  if (!opened_.backend || !opened_.backend->device().capabilities().quantised_residuals) return graph;
  if (!graph::is_quantised(graph)) return graph;
  return graph::fuse_residual_adds(graph, nullptr, /*quantised=*/true);
}

graph::Calibration Pipeline::calibrate(const Model& f32, const quant::CalibrationOptions& options) {
  executor::Backend* cpu = opened_.backend && opened_.backend->name() == "cpu" ? opened_.backend.get()
                                                                                 : calibration_cpu_.get();
  if (!cpu) {
    calibration_cpu_ = executor::make_backend("cpu");
    cpu = calibration_cpu_.get();
  }
  return quant::calibrate(f32.graph, f32.weights, *cpu, options);
}

graph::LayoutAssignment Pipeline::layouts(const graph::Graph& graph) {
  if (forced_layout_) return graph::LayoutAssignment::uniform(*forced_layout_);
  if (options_.auto_layout()) return layout_search().choose(graph).layouts;
  return {};
}

executor::PlanOptions Pipeline::plan_options(const graph::LayoutAssignment& layouts) const {
  executor::PlanOptions plan;
  plan.layouts = layouts;
  plan.max_streams = options_.max_streams;
  return plan;
}

layouts::LayoutSearch& Pipeline::layout_search() {
  if (layout_search_) return *layout_search_;
  if (!opened_.backend) {
    throw UsageError("--layout auto measures layouts on a backend: add --backend cpu (or cuda)");
  }
  opened_.open_cost_model(options_);  // its profile cache keeps the layout measurements too
  profiler::ProfileCache* cache = opened_.cache.get();
  if (!cache) {  // the analytic cost model: the layout measurements still go to the cache file
    layout_cache_ = std::make_unique<profiler::ProfileCache>(options_.cache_dir_or_default(),
                                                             opened_.backend->device().device_fingerprint());
    cache = layout_cache_.get();
  }
  layouts::LayoutSearchOptions search;
  search.measure.max_streams = options_.max_streams;
  search.measure.executor = options_.executor;
  search.log = options_.log;
  search.on_progress = options_.on_layout_progress;
  layout_verdicts_ = std::make_unique<VerdictCache>(options_.cache_dir_or_default(),
                                                    opened_.backend->device().device_fingerprint(),
                                                    std::function<void(const std::string&)>{},
                                                    "layout-verdicts");
  layout_search_ = std::make_unique<layouts::LayoutSearch>(*opened_.backend, *cache, *layout_verdicts_,
                                                           std::move(search));
  return *layout_search_;
}

ScheduledGraph Pipeline::schedule(const graph::Graph& graph, const ScheduleSource& source,
                                  SearchProgressCallback on_progress) {
  return schedule(graph, source, search_.mode, std::move(on_progress));
}

ScheduledGraph Pipeline::schedule(const graph::Graph& graph, const ScheduleSource& source,
                                  scheduler::DpMode mode, SearchProgressCallback on_progress) {
  check_precision(graph);
  // Layouts first: a search measures stages in them and records them; over a schedule file's own
  // layouts only a layout the user gives (--layout) wins.
  const graph::LayoutAssignment graph_layouts = layouts(graph);
  ScheduledGraph result;
  if (!source.is_file()) {
    scheduler::SearchOptions options = search_;
    options.strategy = source.strategy();
    options.mode = mode;
    options.on_progress = std::move(on_progress);
    result.schedule = search(graph, graph_layouts, std::move(options), &result.stats);
    result.searched = true;
    return result;
  }
  result.schedule = scheduler::load_schedule(source.path(), graph);  // validated
  if (!options_.layout.empty()) result.schedule.layouts = graph_layouts;
  result.schedule.layouts.check_fits(graph);
  return result;
}

// The ops of `plan` that do not run in their planned layout: with a layout the user forced
// (layout L), one warning line on options.log naming the ops, the layout and where they run
// instead (once per pipeline and layout). Returns a short note for the plan line ("" when every op
// runs as planned).
std::string Pipeline::report_fallbacks(const executor::ExecutionPlan& plan) {
  const SessionOptions& options = options_;
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
  const std::lock_guard<std::mutex> lock(warned_mutex_);
  if (options.log && forced_layout_ && warned_layouts_.insert(options.layout).second) {
    *options.log << "stagecraft: warning: --layout " << options.layout << ": " << fallbacks.size()
              << " op(s) have only a reference kernel in " << wanted << " on this "
              << (plan.backend().name() == "cpu" ? "CPU" : "device") << " ("
              << plan.backend().device().description() << "); they run " << where
              << " with conversions around them. First reason: " << fallbacks.front().reason << "\n";
  }
  return cat(fallbacks.size(), " op(s) without a native kernel in their layout: ", where);
}

ScheduledGraph Pipeline::adopt(const graph::Graph& graph, scheduler::Schedule schedule) {
  scheduler::validate(graph, schedule);
  return in_its_layouts(graph, std::move(schedule));
}

ScheduledGraph Pipeline::in_its_layouts(const graph::Graph& graph, scheduler::Schedule schedule) {
  if (!options_.layout.empty()) schedule.layouts = layouts(graph);  // a layout the user gives wins
  schedule.layouts.check_fits(graph);
  ScheduledGraph result;
  result.schedule = std::move(schedule);
  return result;
}

PreparedPlan Pipeline::plan(const Model& model, ScheduledGraph scheduled) {
  return plan(model.graph, model.weights, std::move(scheduled));
}

PreparedPlan Pipeline::plan(const graph::Graph& graph, const graph::WeightStore& weights,
                            ScheduledGraph scheduled) {
  check_precision(graph);
  executor::Backend& b = backend("running a plan");
  executor::PlanOptions options = plan_options(scheduled.schedule.layouts);
  // Where kernels divide cores between threads, a run may use kernels built for fewer of them
  // while another process holds cores (Executor::execute); the weights outlive the plan here.
  options.can_limit_threads = b.capabilities().streams_share_cores;
  PreparedPlan prepared;
  prepared.plan = std::make_unique<executor::ExecutionPlan>(graph, scheduled.schedule, weights, b, options);
  prepared.fallback_note = report_fallbacks(*prepared.plan);
  prepared.scheduled = std::move(scheduled);
  return prepared;
}

PreparedPlan Pipeline::prepare(const Model& model, const ScheduleSource& source,
                               SearchProgressCallback on_progress) {
  backend("running a plan");  // before any search
  ScheduledGraph scheduled = schedule(model.graph, source, std::move(on_progress));
  save_cache();
  return plan(model, std::move(scheduled));
}

std::unique_ptr<executor::Executor> Pipeline::executor(executor::ExecutionPlan& plan) const {
  executor::ExecutorOptions options = options_.executor;
  // Runs with kernels built for fewer threads round a few last bits differently (up to 1e-6 of
  // the largest output): STAGECRAFT_ADAPT_THREADS=0 keeps every run bit for bit the same.
  if (const char* adapt = std::getenv("STAGECRAFT_ADAPT_THREADS"); adapt && std::string(adapt) == "0") {
    options.adapt_threads = false;
  }
  return std::make_unique<executor::Executor>(plan, nullptr, options);
}

void Pipeline::save_cache() {
  if (opened_.cache) opened_.cache->save();
}

}  // namespace stagecraft::session
