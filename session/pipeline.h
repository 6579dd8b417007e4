#pragma once
/// The one way from a model to a running plan, for every front end (the CLI's schedule, run and
/// bench, the Python package, a server): open the backend session, then per graph
///   layouts  -> the layout of every tensor (the backend's, a forced one, or chosen by measuring),
///   schedule -> searched now in those layouts (recorded in it), read from a file, or given,
///   plan     -> kernels, streams and memory on the backend, layout fallbacks reported,
/// and an executor in the options' launch mode. The front ends differ only in how they print.
///
/// Example:
///   SessionOptions options;
///   options.backend = "cpu";
///   Pipeline pipeline(options, scheduler::SearchOptions{});
///   Model model = load_model(source);
///   PreparedPlan prepared = pipeline.prepare(model, "dp");
///   auto executor = pipeline.executor(*prepared.plan);
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "executor/executor.h"
#include "executor/plan.h"
#include "profiler/layout_search.h"
#include "scheduler/search.h"
#include "session/backend_session.h"
#include "session/source.h"

namespace stagecraft::session {

/// Receives a search's progress (SearchOptions::on_progress).
using SearchProgressCallback = std::function<void(const scheduler::SearchProgress&)>;

/// A schedule for a graph and the layouts to run it in.
struct ScheduledGraph {
  scheduler::Schedule schedule;
  executor::PlanOptions plan_options;  ///< layouts and stream slots to build its plan with
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

/// The session of one backend and the steps from a graph to a plan on it.
class Pipeline {
 public:
  /// Opens the backend (a missing device fails here, before any work) and its cost model.
  Pipeline(SessionOptions options, scheduler::SearchOptions search);

  const SessionOptions& options() const { return options_; }
  const scheduler::SearchOptions& search_options() const { return search_; }
  BackendSession& session() { return session_; }
  /// The backend; throws UsageError naming `what` ("run", "a session") when there is none.
  executor::Backend& backend(const std::string& what);

  /// Step 1: the plan options of `graph` (layout "auto": chosen by the layout DP on latencies
  /// measured on the backend, once per graph; the measured cost model then measures stages in
  /// these layouts).
  executor::PlanOptions layouts(const graph::Graph& graph);
  /// Step 2: a schedule. `spec` "sequential" | "greedy" | "dp" searches now with the search
  /// options (a dp search on a measured model goes through the schedule cache beside the profile
  /// cache) and records the layouts in the schedule; any other `spec` is a schedule file, run in
  /// the file's layouts unless the options force one. Throws UsageError when `spec` is neither.
  ScheduledGraph schedule(const graph::Graph& graph, const std::string& spec,
                          SearchProgressCallback on_progress = nullptr);
  /// Step 2 with `mode` instead of the options' DP mode (bench's variants).
  ScheduledGraph schedule(const graph::Graph& graph, const std::string& spec, scheduler::DpMode mode,
                          SearchProgressCallback on_progress = nullptr);
  /// Step 2 for a schedule already in memory (validated against `graph`), in its own layouts.
  ScheduledGraph adopt(const graph::Graph& graph, scheduler::Schedule schedule);
  /// Step 3: the plan of `model` with `scheduled`; layout fallbacks are reported on options.log
  /// (once per layout and process) and in PreparedPlan::fallback_note.
  PreparedPlan plan(const Model& model, ScheduledGraph scheduled);
  /// Step 3 for a graph and weights held apart (an int8 graph beside the f32 model's weights).
  PreparedPlan plan(const graph::Graph& graph, const graph::WeightStore& weights,
                    ScheduledGraph scheduled);
  /// Steps 1-3 in one call.
  PreparedPlan prepare(const Model& model, const std::string& spec,
                       SearchProgressCallback on_progress = nullptr);
  /// An executor of `plan` (which must outlive it) in the options' launch mode.
  std::unique_ptr<executor::Executor> executor(executor::ExecutionPlan& plan) const;
  /// Writes the profile cache (when measuring) to its file.
  void save_cache();

 private:
  // A validated schedule with the layouts it records (or the options' forced layout).
  ScheduledGraph in_its_layouts(const graph::Graph& graph, scheduler::Schedule schedule);
  executor::PlanOptions layouts_of_schedule(const graph::Graph& graph,
                                            const scheduler::Schedule& schedule);

  // The layout search of `--layout auto` (made on first use; it remembers its choices).
  profiler::LayoutSearch& layout_search();

  SessionOptions options_;
  scheduler::SearchOptions search_;
  BackendSession session_;
  std::unique_ptr<profiler::ProfileCache> layout_cache_;  // when the session has no cache
  std::unique_ptr<profiler::LayoutSearch> layout_search_;
};

/// Whether `spec` is a strategy name (sequential | greedy | dp) rather than a schedule file.
bool is_strategy_name(const std::string& spec);

}  // namespace stagecraft::session
