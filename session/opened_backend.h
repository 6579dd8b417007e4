#pragma once
/// Opening a backend, and its profile cache and cost model when a search needs them (the first
/// step of the pipeline, session/pipeline.h, which the front ends call).
///
/// Example:
///   SessionOptions options;
///   options.backend = "cpu";
///   OpenedBackend opened = OpenedBackend::open(options);   // the CPU
///   opened.open_cost_model(options);                          // measured on it

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "executor/backend.h"
#include "executor/executor.h"
#include "profiler/cost_models.h"
#include "profiler/profile_cache.h"

namespace stagecraft::session {

/// Where and how a model is measured and run: the backend and its settings, the profile cache,
/// the cost model, layouts, streams and the launch mode (the CLI's --backend, --cache-dir,
/// --cost-model, --layout, --streams, --tf32, --no-winograd, --stream-mode; the Python package's
/// arguments of the same names).
struct SessionOptions {
  std::string backend;     ///< "" = none (analytic model only)
  std::string cache_dir;   ///< "" = ProfileCache::default_dir()
  std::string cost_model;  ///< "" = measured with a backend, analytic:v100 without
  std::string layout;      ///< "" = the backend's preferred layout; "auto": chosen by measuring
  int max_streams = 8;     ///< stream slots of plans
  /// The backend's own settings (TF32, Winograd, workspace); its cache_dir is set from
  /// `cache_dir` when the backend opens.
  executor::BackendConfig backend_config;
  executor::ExecutorOptions executor;  ///< launch mode of plans (and of measurements)
  /// Progress lines of the layout search and warnings (layouts a kernel cannot run in) go here;
  /// null: quiet.
  std::ostream* log = nullptr;
  /// Called after every op/layout measurement of the layout search with (measurements, seconds)
  /// (optional; it may throw to stop the search).
  std::function<void(size_t, double)> on_layout_progress;

  /// The layout `layout` forces (nothing for "" and "auto"); throws UsageError for an unknown
  /// name.
  std::optional<graph::Layout> forced_layout() const;
  /// True with layout "auto".
  bool auto_layout() const { return layout == "auto"; }
  /// `cache_dir`, or the default ($STAGECRAFT_CACHE_DIR or ~/.cache/stagecraft).
  std::string cache_dir_or_default() const;
};

/// A backend and, once opened, its cost model (and profile cache when measuring).
struct OpenedBackend {
  std::unique_ptr<executor::Backend> backend;
  std::unique_ptr<profiler::ProfileCache> cache;
  std::unique_ptr<scheduler::CostModel> cost_model;  ///< prices stages for the schedule search
  profiler::MeasuredCostModel* measured = nullptr;   ///< cost_model when it measures

  /// Opens the backend (if any).
  static OpenedBackend open(const SessionOptions& options);
  /// Opens the cost model options.cost_model (and its profile cache) unless open.
  void open_cost_model(const SessionOptions& options);
};

}  // namespace stagecraft::session
