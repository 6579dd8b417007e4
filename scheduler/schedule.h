#pragma once
/// The schedule model: a schedule is a sequence of stages; a stage either merges same-input
/// convolutions into one (kind merge) or runs disjoint groups of ops concurrently, each group in
/// order on its own stream (kind concurrent). `validate` checks a schedule against its graph.
///
/// Example:
///   Schedule s;
///   s.stages.push_back(Stage::concurrent({{conv_a, relu_a}, {conv_b}}));
///   s.stages.push_back(Stage::merge({conv_c, conv_d}));
///   validate(graph, s);  // throws ScheduleError naming the stage and op when invalid

#include <string>
#include <vector>

#include "common/error.h"
#include "graph/graph.h"
#include "graph/layout_assignment.h"
#include "scheduler/search_options.h"

namespace stagecraft::scheduler {

using graph::OpId;

/// How a stage runs its ops.
enum class StageKind : uint8_t {
  kConcurrent,  ///< groups on separate streams; each group's ops in order
  kMerge,       ///< convolutions merged into one, consumers read channel slices
};

/// "concurrent" or "merge".
std::string_view to_string(StageKind kind);

/// One stage of a schedule.
struct Stage {
  StageKind kind = StageKind::kConcurrent;  ///< strategy
  /// Concurrent: each group's ops in execution order. Merge: one group per merged convolution.
  std::vector<std::vector<OpId>> groups;
  double predicted_ms = 0;  ///< the cost model's latency of this stage (0 when unknown)

  /// A concurrent stage.
  static Stage concurrent(std::vector<std::vector<OpId>> groups);
  /// A merge stage of the given convolutions.
  static Stage merge(const std::vector<OpId>& convs);
  /// Every op of the stage, in group order.
  std::vector<OpId> ops() const;
  /// Number of ops.
  size_t num_ops() const;
};

/// What a schedule is for and how it was made.
struct ScheduleMeta {
  std::string network;           ///< graph name
  std::string graph_hash;        ///< content hash of the graph (graph::graph_hash())
  size_t num_ops = 0;            ///< ops in the graph
  int64_t batch = 1;             ///< batch size
  std::string dtype = "f32";     ///< element type of the input
  std::string device;            ///< device fingerprint of the cost model
  std::string cost_model;        ///< e.g. "analytic:v100"
  /// How it was searched (recorded in the file; on_progress is never kept).
  SearchOptions search = [] {
    SearchOptions options;
    options.strategy = Strategy::kSequential;
    return options;
  }();
  /// dp on a measured model: false when the budget ended the search before it converged.
  bool converged = true;
  double predicted_ms = 0;       ///< sum of stage latencies
  double search_seconds = 0;     ///< wall time of the search
};

/// A schedule: metadata and stages.
struct Schedule {
  ScheduleMeta meta;          ///< what it is for
  std::vector<Stage> stages;  ///< in execution order
  /// The layouts the stages were costed in and run in (the plan's PlanOptions::layouts).
  graph::LayoutAssignment layouts;
};

/// A schedule is invalid for its graph: an op missing or repeated, a dependency broken, a merge
/// of ops that cannot merge, or a file made for another graph, batch or op set.
class ScheduleError : public Error {
 public:
  using Error::Error;
};

/// Checks a schedule against a graph: every op exactly once; no op before the producers of its
/// inputs (earlier stages, or earlier in its own group); groups of a concurrent stage independent
/// of each other; merge stages made of >= 2 convolutions that can merge (see can_merge). Throws
/// ScheduleError naming the stage (1-based) and op.
void validate(const graph::Graph& graph, const Schedule& schedule);

/// Why two convolutions cannot be merged into one, or "" when they can: both plain convolutions
/// (groups 1) reading the same value with the same stride, dilation, activation and output size,
/// and paddings that keep the smaller kernel centred in the larger one.
std::string merge_conflict(const graph::Graph& graph, OpId a, OpId b);

/// Whether all `convs` can be merged pairwise with the first.
bool can_merge(const graph::Graph& graph, const std::vector<OpId>& convs);

/// Attributes of the convolution that computes all `convs` at once: output channels stacked in
/// order, kernel and padding of the largest, bias if any has one. Requires can_merge.
graph::Conv2dAttrs merged_conv_attrs(const graph::Graph& graph, const std::vector<OpId>& convs);

/// One op per stage in topological order, no metadata: the plain run (calibration, checks, the
/// sequential scheduler).
Schedule sequential_schedule(const graph::Graph& graph);

/// `schedule`, made for `from`, for `to`: the same schedule when the graphs are equal in content,
/// else its stages and per-value layouts carried over by op and value name (another load of the
/// same model). Throws ScheduleError, as reading its file for `to` would, when `to` is another
/// network, batch, element type or op set.
Schedule carry_schedule(const graph::Graph& from, const Schedule& schedule, const graph::Graph& to);

}  // namespace stagecraft::scheduler
