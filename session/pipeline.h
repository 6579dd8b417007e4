#pragma once
/// The one way from a model to a running plan, for every front end (the CLI's schedule, run and
/// bench, the Python package, a server): open the backend session, load the model (an int8 one
/// calibrated on the pipeline's CPU backend, or one it opens and keeps), then per graph
///   layouts  -> one graph::LayoutAssignment (the backend's, a forced one, or chosen by measuring),
///   schedule -> searched now in those layouts (the cost model measures in them; the schedule
///               records them), read from a file (in its recorded layouts unless one is forced),
///               or given,
///   plan     -> kernels, streams and memory on the backend in the schedule's layouts, layout
///               fallbacks reported,
/// and an executor in the options' launch mode. The front ends differ only in how they print.
///
/// Example:
///   SessionOptions options;
///   options.backend = "cpu";
///   Pipeline pipeline(options, scheduler::SearchOptions{});
///   Model model = pipeline.load(source);
///   PreparedPlan prepared = pipeline.prepare(model, ScheduleSource::parse("dp"));
///   auto executor = pipeline.executor(*prepared.plan);
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "executor/executor.h"
#include "executor/plan.h"
#include "quant/calibration.h"
#include "layouts/layout_search.h"
#include "scheduler/search.h"
#include "session/opened_backend.h"
#include "session/schedule_source.h"
#include "session/source.h"

namespace stagecraft::session {

/// Receives a search's progress (SearchOptions::on_progress).
using SearchProgressCallback = std::function<void(const scheduler::SearchProgress&)>;

/// A schedule for a graph (with the layouts to run it in: schedule.layouts).
struct ScheduledGraph {
  scheduler::Schedule schedule;
  bool searched = false;               ///< searched (or taken from the schedule cache) now
  scheduler::SearchStats stats;        ///< of that search
};

/// A plan ready to execute, with the schedule it came from.
struct PreparedPlan {
  ScheduledGraph scheduled;
  std::unique_ptr<executor::ExecutionPlan> plan;
  /// Ops that do not run in their planned layout, in one line ("" when all do).
  std::string fallback_note;
};

/// One backend, its cost model and caches, and the steps from a graph to a plan on it.
class Pipeline {
 public:
  /// Opens the backend (a missing device fails here, before any work) and its cost model.
  Pipeline(SessionOptions options, scheduler::SearchOptions search);

  const SessionOptions& options() const { return options_; }
  const scheduler::SearchOptions& search_options() const { return search_; }
  OpenedBackend& opened() { return opened_; }
  /// The backend; throws UsageError naming `what` ("run", "a session") when there is none.
  executor::Backend& backend(const std::string& what);

  /// Step 0: the model of `source` (session/source.h). An int8 source without a calibration
  /// file is calibrated now (calibrate(), `source.calibration_samples` generated inputs); its
  /// additions fuse into 8-bit convolutions where the backend computes them
  /// (Capabilities::quantised_residuals).
  Model load(const GraphSource& source);
  /// The graph of `source` without its weights where none are needed (load_source), else of load().
  graph::Graph load_graph(const GraphSource& source);
  /// The value ranges of the f32 model `f32` for int8 quantisation, run on the CPU: the
  /// pipeline's backend when it is the CPU, else a CPU backend the pipeline opens once and keeps.
  graph::Calibration calibrate(const Model& f32, const quant::CalibrationOptions& options);

  /// Step 1: the layouts of `graph`: the one the options force, the backend's default, or with
  /// layout "auto" one per value chosen by the layout DP on latencies measured on the backend
  /// (once per graph).
  graph::LayoutAssignment layouts(const graph::Graph& graph);
  /// Step 2: a schedule. A strategy searches now in the graph's layouts (step 1) with the search
  /// options (a dp search on a measured model goes through the schedule cache beside the profile
  /// cache); the schedule records the layouts. A file is run in the layouts it records unless
  /// the options force one.
  ScheduledGraph schedule(const graph::Graph& graph, const ScheduleSource& source,
                          SearchProgressCallback on_progress = nullptr);
  /// Step 2 with `mode` instead of the options' DP mode (bench's variants).
  ScheduledGraph schedule(const graph::Graph& graph, const ScheduleSource& source,
                          scheduler::DpMode mode, SearchProgressCallback on_progress = nullptr);
  /// Step 2 for a schedule already in memory (validated against `graph`), in its own layouts.
  ScheduledGraph adopt(const graph::Graph& graph, scheduler::Schedule schedule);
  /// Step 3: the plan of `model` with `scheduled`; layout fallbacks are reported on options.log
  /// (once per layout and process) and in PreparedPlan::fallback_note. The model's weights must
  /// outlive the plan (on the CPU its executors may build kernels again for fewer threads).
  PreparedPlan plan(const Model& model, ScheduledGraph scheduled);
  /// Step 3 for a graph and weights held apart (an int8 graph beside the f32 model's weights).
  PreparedPlan plan(const graph::Graph& graph, const graph::WeightStore& weights,
                    ScheduledGraph scheduled);
  /// Steps 1-3 in one call.
  PreparedPlan prepare(const Model& model, const ScheduleSource& source,
                       SearchProgressCallback on_progress = nullptr);
  /// The plan options of a graph run in `layouts` (stream slots from the options).
  executor::PlanOptions plan_options(const graph::LayoutAssignment& layouts) const;
  /// An executor of `plan` (which must outlive it) in the options' launch mode.
  std::unique_ptr<executor::Executor> executor(executor::ExecutionPlan& plan) const;
  /// Writes the profile cache (when measuring) to its file.
  void save_cache();
  /// Whether the cost model measures (its known stages are cache hits; a cheap model knows all).
  bool measures() const { return opened_.measured != nullptr; }

  /// `graph` as the backend runs it: its 8-bit additions fused into the convolutions producing an
  /// operand where the backend takes quantised residuals (Capabilities::quantised_residuals),
  /// else `graph` (a model loaded without a backend: the Python API's).
  graph::Graph with_quantised_residuals(graph::Graph graph) const;

 private:
  // Throws UsageError when the opened backend does not compute in the graph's precision (bf16 on
  // a CPU without native bf16): one line before any search or plan.
  void check_precision(const graph::Graph& graph) const;
  // A validated schedule in the layouts it records, or in the options' forced layout.
  ScheduledGraph in_its_layouts(const graph::Graph& graph, scheduler::Schedule schedule);
  // A schedule searched now in `layouts`, through the schedule cache when it serves.
  scheduler::Schedule search(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                             scheduler::SearchOptions options, scheduler::SearchStats* stats);
  // Ops of `plan` not in their planned layout: a note for the plan line, and with a forced
  // layout one warning line on options.log (once per layout).
  std::string report_fallbacks(const executor::ExecutionPlan& plan);

  // The layout search of `--layout auto` (made on first use; it remembers its choices).
  layouts::LayoutSearch& layout_search();

  SessionOptions options_;
  std::optional<graph::Layout> forced_layout_;  // options_.layout parsed once
  scheduler::SearchOptions search_;
  OpenedBackend opened_;
  std::set<std::string> warned_layouts_;        // layouts whose fallbacks were reported
  std::mutex warned_mutex_;                     // plans may be built on several threads
  std::unique_ptr<executor::Backend> calibration_cpu_;   // when the backend is not the CPU
  std::unique_ptr<profiler::ProfileCache> layout_cache_;  // when the session has no cache
  std::unique_ptr<VerdictCache> layout_verdicts_;         // the layout search's verdicts
  std::unique_ptr<layouts::LayoutSearch> layout_search_;
};

}  // namespace stagecraft::session
