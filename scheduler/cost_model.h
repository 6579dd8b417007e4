#pragma once
/// The cost model interface the scheduler consumes: the latency of one stage run on its own
/// (inputs ready, all outputs complete at the end). Implementations live in profiler/ (analytic,
/// and measured on a backend); the scheduler never includes them.
///
/// A model whose answers are expensive (it measures) says which latencies it already knows
/// (known_latency_ms: cached ones); the DP then measures only the stages that can change its
/// answer (see SearchBudget in search.h). Cheap models answer everything there.
///
/// Every question names the layouts the graph's activations run in (graph/layout_assignment.h):
/// a model that measures runs the stage in them; one that does not may ignore them.
///
/// Example:
///   class FixedCost : public CostModel { ... double stage_latency_ms(...) override { return 1; } };
///   auto s = make_scheduler(options)->schedule(graph, layouts, model);

#include <optional>
#include <string>

#include "graph/graph.h"
#include "graph/layout_assignment.h"
#include "scheduler/schedule.h"

namespace stagecraft::scheduler {

/// Latency of stages on some device.
class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Name recorded in schedules ("analytic:v100").
  virtual std::string name() const = 0;
  /// Fingerprint of the device the latencies are for (recorded in schedules and cache keys).
  virtual std::string device_fingerprint() const = 0;
  /// Latency in milliseconds of `stage` of `graph`, run on its own with the graph's activations
  /// in `layouts`.
  virtual double stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                                  const Stage& stage) = 0;
  /// The latency of `stage` if it can be had without measuring (a cached measurement), else
  /// nothing. Default: every latency is cheap, so it is stage_latency_ms().
  virtual std::optional<double> known_latency_ms(const graph::Graph& graph,
                                                 const graph::LayoutAssignment& layouts,
                                                 const Stage& stage) {
    return stage_latency_ms(graph, layouts, stage);
  }
};

}  // namespace stagecraft::scheduler
