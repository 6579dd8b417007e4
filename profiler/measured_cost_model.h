#pragma once
/// Stage latencies measured on a backend, exactly as the executor runs a stage: the stage's ops
/// become a small graph whose inputs are the stage's inputs (already in the plan's layout), the
/// same plan builder assigns streams, threads, events and views, and the executor runs it: warm-up
/// runs, then repeats; the median is the latency. Results go to a ProfileCache, so a second search
/// of the same network measures nothing new.
///
/// Example:
///   auto backend = executor::make_backend("cpu");
///   ProfileCache cache(ProfileCache::default_dir(), backend->device().device_fingerprint());
///   MeasuredCostModel model(*backend, &cache);
///   auto schedule = scheduler::make_scheduler(options)->schedule(graph, model);

#include <limits>
#include <optional>
#include <string>

#include "executor/backend.h"
#include "executor/executor.h"
#include "profiler/profile_cache.h"
#include "scheduler/cost_model.h"

namespace stagecraft::profiler {

/// How stages are measured.
struct MeasureOptions {
  int warmup = 1;                ///< untimed runs first (the last one also sizes the samples)
  int repeats = 5;               ///< timed samples; the median is kept
  double sample_ms = 1.0;        ///< each sample runs the stage back to back for about this long
  int max_runs_per_sample = 16;  ///< (amortises waking the host on short stages)
  /// When the last warm-up run takes longer than this (ms), it is the answer: no samples. The
  /// layout profiler sets it from the op's best layout so far, so hopeless layouts cost one run.
  double give_up_ms = std::numeric_limits<double>::infinity();
  /// Latency added to stages of several groups, as a fraction. A stage timed alone has the
  /// machine to itself; inside a network its streams also compete with the stages before and
  /// after it (no barrier between stages). On the 2-core CPU, concurrent stages ran 1.5-3x slower
  /// inside inception_v3 than alone, so the CPU default is 0.5; other backends default to 0.1.
  /// Applied after the cache, which keeps raw measurements.
  std::optional<double> concurrency_margin;
  int max_streams = 8;           ///< stream slots, as the plan will have (PlanOptions)
  executor::ExecutorOptions executor;  ///< as the executor will launch (CUDA Graph or streams)
  uint64_t seed = 1;             ///< weights and inputs of the measured stages
};

/// Measures stage latencies on a backend, through an optional cache.
class MeasuredCostModel : public scheduler::CostModel {
 public:
  /// A model on `backend`; `cache` may be null (no persistence).
  MeasuredCostModel(executor::Backend& backend, ProfileCache* cache, MeasureOptions options = {});

  std::string name() const override;
  std::string device_fingerprint() const override;
  double stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                          const scheduler::Stage& stage) override;
  /// The cached latency (with the concurrency margin), or nothing: never measures.
  std::optional<double> known_latency_ms(const graph::Graph& graph,
                                         const graph::LayoutAssignment& layouts,
                                         const scheduler::Stage& stage) override;

  /// Latency of a stage in `layouts` without the cache (one measurement).
  double measure(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                 const scheduler::Stage& stage);

  /// Ends the worker threads of the streams measurements ran on (made again by the next
  /// measurement). On the CPU each holds an OpenMP team, and while the process holds more OpenMP
  /// workers than cores GNU OpenMP stops every team's spinning (8-30 us more per kernel). Kept
  /// after a search they slowed every later run of the process: on a 16-core Xeon, Python
  /// sessions beside a dp search ran at 1.5-2.2x the CLI's sequential runs (interleave_gap).
  void release_streams() { streams_.clear(); }
  /// Streams kept for measurements (0 after release_streams()).
  size_t kept_streams() const { return streams_.size(); }
  /// Stages measured (cache misses) so far.
  size_t measurements() const { return measurements_; }
  /// Stages answered by the cache so far.
  size_t cache_hits() const { return cache_hits_; }
  /// Seconds spent measuring.
  double measuring_seconds() const { return measuring_seconds_; }
  /// What besides the stage a measurement of a stage of `graph` depends on: the layouts (the
  /// backend's default resolved for the graph) and the stream slots.
  std::string settings_key(const graph::Graph& graph, const graph::LayoutAssignment& layouts) const;
  /// The cache key of a stage: the activation layout and stream slots, the canonical stage key,
  /// and with per-value layouts the layouts of what the stage reads and writes.
  std::string cache_key(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                        const scheduler::Stage& stage) const;

 private:
  // The factor applied to a stage's measured latency (the concurrency margin).
  double margin(const scheduler::Stage& stage) const;
  // The layout of the graph's activations where `layouts` names none per value.
  graph::Layout default_layout(const graph::Graph& graph, const graph::LayoutAssignment& layouts) const;

  executor::Backend& backend_;
  executor::StreamPool streams_;
  ProfileCache* cache_;
  MeasureOptions options_;
  size_t measurements_ = 0;
  size_t cache_hits_ = 0;
  double measuring_seconds_ = 0;
};

/// A stage as a graph of its own.
struct StageGraph {
  graph::Graph graph;       ///< the stage's ops reading its external inputs as graph inputs
  scheduler::Stage stage;   ///< the stage renumbered for `graph`
  graph::LayoutAssignment layouts;  ///< the full graph's layouts carried over to `graph`
};

/// The graph of one stage: its ops (names, kinds, attributes kept) reading its external inputs as
/// graph inputs (rank-4 op outputs in their layout in `layouts`, as the full plan holds them,
/// `fallback` where it names none; graph inputs as they are), every value read outside the stage
/// as an output; the stage renumbered for it, and the layouts carried over (per value when
/// `layouts` is per value, else the same).
StageGraph stage_graph(const graph::Graph& graph, const scheduler::Stage& stage,
                       const graph::LayoutAssignment& layouts, graph::Layout fallback);

/// Median time (ms) of one run of `schedule` of `sub` planned with `plan_options`: random weights
/// and inputs (by `options.seed`), `options.warmup` untimed runs, then `options.repeats` samples.
double time_plan(executor::Backend& backend, executor::StreamPool& streams, const graph::Graph& sub,
                 const scheduler::Schedule& schedule, const executor::PlanOptions& plan_options,
                 const MeasureOptions& options);

}  // namespace stagecraft::profiler
