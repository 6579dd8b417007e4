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
  executor::PlanOptions plan;    ///< as the executor will run (layout, streams)
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
  double stage_latency_ms(const graph::Graph& graph, const scheduler::Stage& stage) override;
  /// The cached latency (with the concurrency margin), or nothing: never measures.
  std::optional<double> known_latency_ms(const graph::Graph& graph,
                                         const scheduler::Stage& stage) override;

  /// Measures stages with these layouts per value of the graphs it is asked about (the layout
  /// DP's choice; empty: the plan's uniform layout). Part of the cache key.
  void set_value_layouts(std::vector<graph::Layout> layouts) {
    options_.plan.value_layouts = std::move(layouts);
  }

  /// Latency of a stage without the cache (one measurement).
  double measure(const graph::Graph& graph, const scheduler::Stage& stage);

  /// Stages measured (cache misses) so far.
  size_t measurements() const { return measurements_; }
  /// Stages answered by the cache so far.
  size_t cache_hits() const { return cache_hits_; }
  /// Seconds spent measuring.
  double measuring_seconds() const { return measuring_seconds_; }
  /// What besides the stage a measurement of a stage of `graph` depends on: the activation layout
  /// (or the per-value layouts) and the stream slots. Part of every cache key.
  std::string settings_key(const graph::Graph& graph) const;
  /// The cache key of a stage (settings, then the canonical stage key).
  std::string cache_key(const graph::Graph& graph, const scheduler::Stage& stage) const;

 private:
  // The factor applied to a stage's measured latency (the concurrency margin).
  double margin(const scheduler::Stage& stage) const;
  // The per-value layouts when they were set for a graph of this size, else none.
  const std::vector<graph::Layout>& per_value_layouts(const graph::Graph& graph) const;

  executor::Backend& backend_;
  executor::StreamPool streams_;
  ProfileCache* cache_;
  MeasureOptions options_;
  size_t measurements_ = 0;
  size_t cache_hits_ = 0;
  double measuring_seconds_ = 0;
};

/// The graph of one stage: its ops (names, kinds, attributes kept) reading its external inputs as
/// graph inputs (rank-4 op outputs in `layout`, as the full plan holds them; graph inputs as they
/// are), every value read outside the stage as an output; and
/// the stage renumbered for it.
/// With `value_layouts` (per value of `graph`, non-empty), inputs and op outputs get their own
/// layouts instead, and `sub_layouts` receives the layouts by value of the stage graph (for
/// PlanOptions::value_layouts).
std::pair<graph::Graph, scheduler::Stage> stage_graph(
    const graph::Graph& graph, const scheduler::Stage& stage, graph::Layout layout,
    const std::vector<graph::Layout>& value_layouts = {},
    std::vector<graph::Layout>* sub_layouts = nullptr);

/// Median time (ms) of one run of `schedule` of `sub` planned with `plan_options`: random weights
/// and inputs (by `options.seed`), `options.warmup` untimed runs, then `options.repeats` samples.
double time_plan(executor::Backend& backend, executor::StreamPool& streams, const graph::Graph& sub,
                 const scheduler::Schedule& schedule, const executor::PlanOptions& plan_options,
                 const MeasureOptions& options);

}  // namespace stagecraft::profiler
