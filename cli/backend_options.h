#pragma once
/// Options shared by the commands that run on a backend or measure on one.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "executor/backend.h"
#include "executor/executor.h"
#include "profiler/cost_models.h"
#include "profiler/profile_cache.h"

namespace stagecraft::cli {

/// --backend, --cache-dir, --layout, --streams, --tf32.
struct BackendOptions {
  std::string backend;     ///< "" = none (analytic model only)
  std::string cache_dir;   ///< "" = ProfileCache::default_dir()
  std::string layout;      ///< "" = the backend's preferred layout
  int max_streams = 8;     ///< stream slots of plans
  bool tf32 = false;       ///< CUDA: allow TF32 tensor-core math for f32
  bool stream_mode = false;  ///< launch kernel by kernel instead of replaying a CUDA Graph

  /// Adds the options; `required` makes --backend default to "cpu" instead of none.
  void add_options(CLI::App& command, bool backend_default_cpu);
  /// Plan options from --layout and --streams (with --layout auto: the backend's layout; see
  /// plan_options_for).
  executor::PlanOptions plan_options() const;
  /// True with --layout auto.
  bool auto_layout() const { return layout == "auto"; }
  /// Executor settings from --stream-mode.
  executor::ExecutorOptions executor_options() const;
  /// Backend settings from --cache-dir and --tf32.
  executor::BackendConfig backend_config() const;
  /// --cache-dir, or the default ($STAGECRAFT_CACHE_DIR or ~/.cache/stagecraft).
  std::string cache_dir_or_default() const;
};

/// A backend and, when measuring, its profile cache and cost model.
struct Session {
  std::unique_ptr<executor::Backend> backend;
  std::unique_ptr<profiler::ProfileCache> cache;
  std::unique_ptr<scheduler::CostModel> model;
  profiler::MeasuredCostModel* measured = nullptr;  ///< model when it is a measured one

  /// Opens the backend (if any) and the cost model `spec` ("" = measured with a backend,
  /// analytic:v100 without).
  static Session open(const BackendOptions& options, const std::string& spec);
};

/// Plan options for running `graph`: plan_options(), and with --layout auto a layout per tensor
/// chosen by the layout DP on op latencies measured on the session's backend (cached with the
/// stage profiles). Prints a summary of the choice to stderr. The session's measured model then
/// measures stages in these layouts: call it before searching.
executor::PlanOptions plan_options_for(const BackendOptions& options, const graph::Graph& graph,
                                       Session& session);

/// Reports the ops of `plan` that do not run in their planned layout: with a layout the user
/// forced (--layout L), one warning line on stderr naming the ops, the layout and where they run
/// instead (once per process and layout); otherwise nothing (the plan line says it). Returns a
/// short note for the plan line ("" when every op runs as planned).
std::string report_fallbacks(const BackendOptions& options, const executor::ExecutionPlan& plan);

/// Records the layouts of `plan` in a schedule that was searched with them (meta.layout: the
/// uniform layout's name, or "auto" with the per-value layouts).
void record_layouts(const BackendOptions& options, const executor::PlanOptions& plan,
                    scheduler::Schedule& schedule);

/// The plan options to run a schedule loaded from a file: the file's layouts unless --layout
/// was given (then `plan`, already chosen).
executor::PlanOptions layouts_of_file(const BackendOptions& options, const scheduler::Schedule& schedule,
                                      executor::PlanOptions plan);

}  // namespace stagecraft::cli
