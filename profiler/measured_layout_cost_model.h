#pragma once
/// Op latencies per layout assignment, measured on a backend, for the layout DP
/// (scheduler/layout_optimizer.h).
///
/// An op is timed alone as the executor runs it: a one-op graph whose inputs are in the given
/// layouts and whose output is in the given layout, planned with the same plan builder, so the
/// conversions the plan inserts when a kernel cannot read an input in its layout are part of the
/// time. To keep the number of measurements linear in the candidates, an op with several rank-4
/// inputs (add, concat) in mixed layouts is priced as the op with every input in the output's
/// layout plus one conversion per differing input (conversions are measured per shape and pair of
/// layouts). Results go to a ProfileCache shared with the stage profiler (distinct keys).
///
/// Example:
///   MeasuredLayoutCostModel model(*backend, &cache);
///   LayoutPlan plan = scheduler::optimize_layouts(graph, model, {.candidates = cpu_layouts});

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "profiler/measured_cost_model.h"
#include "scheduler/layout_optimizer.h"

namespace stagecraft::profiler {

/// Measures op latencies per layout assignment (see the file comment).
class MeasuredLayoutCostModel : public scheduler::LayoutCostModel {
 public:
  /// A model on `backend`; `cache` may be null. `options.plan` gives streams; its layouts are
  /// ignored (each query sets them).
  MeasuredLayoutCostModel(executor::Backend& backend, ProfileCache* cache,
                          MeasureOptions options = {});

  double op_ms(const graph::Graph& graph, graph::OpId id, const std::vector<graph::Layout>& inputs,
               graph::Layout output) override;

  /// Time of converting a tensor of `desc`'s shape from layout `from` to `to` (ms).
  double conversion_ms(const graph::TensorDesc& desc, graph::Layout from, graph::Layout to) override;

  /// Calls `progress(measurements, measuring seconds)` after every measurement (for progress lines).
  void set_progress(std::function<void(size_t, double)> progress) { progress_ = std::move(progress); }

  /// Ops and conversions measured (cache misses) so far.
  size_t measurements() const { return measurements_; }
  /// Queries answered by the cache so far.
  size_t cache_hits() const { return cache_hits_; }
  /// Seconds spent measuring.
  double measuring_seconds() const { return measuring_seconds_; }

 private:
  double cached(const std::string& key, const std::function<double()>& measure);
  double measure_op(const graph::Graph& graph, graph::OpId id,
                    const std::vector<graph::Layout>& inputs, graph::Layout output);
  // Times the single op of `sub` (op 0) with its output in `output`, as the plan runs it.
  double time_one_op(const graph::Graph& sub, graph::Layout output, const MeasureOptions& measure);

  executor::Backend& backend_;
  executor::StreamPool streams_;
  ProfileCache* cache_;
  MeasureOptions options_;
  std::function<void(size_t, double)> progress_;
  std::map<std::string, double> memo_;
  std::map<graph::OpId, double> best_ms_;  // per op, its fastest layout so far (to give up early)  // this run's answers (also when there is no cache)
  size_t measurements_ = 0;
  size_t cache_hits_ = 0;
  double measuring_seconds_ = 0;
};

}  // namespace stagecraft::profiler
