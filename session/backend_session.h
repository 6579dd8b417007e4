#pragma once
/// Opening a backend with its cost model, and the plan options to run a graph on it: shared by the
/// CLI commands that run or measure on a backend and by the Python module.
///
/// Example:
///   BackendOptions options;
///   options.backend = "cpu";
///   BackendSession session = BackendSession::open(options, "");   // measured on the CPU
///   executor::PlanOptions plan = plan_options_for(options, graph, session);

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "executor/backend.h"
#include "executor/executor.h"
#include "profiler/cost_models.h"
#include "profiler/profile_cache.h"

namespace stagecraft::session {

/// Backend, profile cache, layout and stream settings (the CLI's --backend, --cache-dir,
/// --layout, --streams, --tf32, --stream-mode, --no-winograd).
struct BackendOptions {
  std::string backend;     ///< "" = none (analytic model only)
  std::string cache_dir;   ///< "" = ProfileCache::default_dir()
  std::string layout;      ///< "" = the backend's preferred layout; "auto": chosen by measuring
  int max_streams = 8;     ///< stream slots of plans
  bool tf32 = false;       ///< CUDA: allow TF32 tensor-core math for f32
  bool stream_mode = false;  ///< launch kernel by kernel instead of replaying a CUDA Graph
  bool winograd = true;      ///< CPU: Winograd 3x3 convolutions where they apply (BackendConfig)
  /// Progress lines of the layout search and warnings (layouts a kernel cannot run in) go here;
  /// null: quiet.
  std::ostream* log = nullptr;
  /// Called after every op/layout measurement of the layout search with (measurements, seconds)
  /// (optional; it may throw to stop the search).
  std::function<void(size_t, double)> on_layout_progress;

  /// Plan options from `layout` and `max_streams` (with layout "auto": the backend's layout; see
  /// plan_options_for).
  executor::PlanOptions plan_options() const;
  /// True with layout "auto".
  bool auto_layout() const { return layout == "auto"; }
  /// Executor settings from `stream_mode`.
  executor::ExecutorOptions executor_options() const;
  /// Backend settings from `cache_dir`, `tf32` and `winograd`.
  executor::BackendConfig backend_config() const;
  /// `cache_dir`, or the default ($STAGECRAFT_CACHE_DIR or ~/.cache/stagecraft).
  std::string cache_dir_or_default() const;
};

/// A backend and, when measuring, its profile cache and cost model.
struct BackendSession {
  std::unique_ptr<executor::Backend> backend;
  std::unique_ptr<profiler::ProfileCache> cache;
  std::unique_ptr<scheduler::CostModel> model;
  profiler::MeasuredCostModel* measured = nullptr;  ///< model when it is a measured one

  /// Opens the backend (if any) and the cost model `spec` ("" = measured with a backend,
  /// analytic:v100 without).
  static BackendSession open(const BackendOptions& options, const std::string& spec);
};

/// Plan options for running `graph`: plan_options(), and with layout "auto" a layout per tensor
/// chosen by the layout DP on op latencies measured on the session's backend (cached with the
/// stage profiles; a summary goes to options.log). The session's measured model then measures
/// stages in these layouts: call it before searching.
executor::PlanOptions plan_options_for(const BackendOptions& options, const graph::Graph& graph,
                                       BackendSession& session);

/// Reports the ops of `plan` that do not run in their planned layout: with a layout the user
/// forced (layout L), one warning line on options.log naming the ops, the layout and where they
/// run instead (once per process and layout); otherwise nothing. Returns a short note for the plan
/// line ("" when every op runs as planned).
std::string report_fallbacks(const BackendOptions& options, const executor::ExecutionPlan& plan);

/// Records the layouts of `plan` in a schedule that was searched with them (meta.layout: the
/// uniform layout's name, or "auto" with the per-value layouts).
void record_layouts(const BackendOptions& options, const executor::PlanOptions& plan,
                    scheduler::Schedule& schedule);

/// The plan options to run a schedule loaded from a file: the file's layouts unless a layout
/// was given in `options` (then `plan`, already chosen).
executor::PlanOptions layouts_of_file(const BackendOptions& options, const scheduler::Schedule& schedule,
                                      executor::PlanOptions plan);

}  // namespace stagecraft::session
