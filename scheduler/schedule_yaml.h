#pragma once
/// Schedule files (YAML) and drawings (Graphviz). A schedule file records what it is for (network,
/// graph hash, op count, batch, dtype, device, cost model, search settings) and its stages by op
/// name; loading it checks it against the graph and says exactly what differs.
///
/// Format (version 1):
///   format: stagecraft-schedule
///   version: 1
///   network: inception_v3
///   graph_hash: 0123456789abcdef
///   ops: 121
///   batch: 1
///   dtype: f32
///   device: analytic:v100
///   cost_model: analytic:v100
///   search: {strategy: dp, mode: both, max_group_size: 3, max_num_groups: 8, pruned: true}
///   predicted_ms: 4.2
///   search_seconds: 0.31
///   stages:
///     - {kind: concurrent, groups: [[a, b], [c]], predicted_ms: 0.1}
///     - {kind: merge, ops: [d, e], predicted_ms: 0.05}
///
/// Example:
///   save_schedule(graph, schedule, "s.yaml");
///   Schedule back = load_schedule("s.yaml", graph);  // throws ScheduleError on a mismatch

#include <string>

#include "scheduler/schedule.h"

namespace stagecraft::scheduler {

/// The schedule as YAML (ops by name).
std::string schedule_to_yaml(const graph::Graph& graph, const Schedule& schedule);

/// Parses a schedule for `graph` and validates it; `source` names the text in errors. Throws
/// ScheduleError when it was made for another network, batch, op set or graph content, or breaks
/// a scheduling rule.
Schedule schedule_from_yaml(const std::string& text, const graph::Graph& graph,
                            const std::string& source = "<string>");

/// Writes a schedule file.
void save_schedule(const graph::Graph& graph, const Schedule& schedule, const std::string& path);

/// Reads and validates a schedule file.
Schedule load_schedule(const std::string& path, const graph::Graph& graph);

/// Reads only the metadata of a schedule file (to find out which network and batch it is for).
/// `layout` (optional) receives the layout name the file records ("" for the backend's default,
/// "auto" for per-value layouts, which need the graph to be read).
ScheduleMeta read_schedule_meta(const std::string& path, std::string* layout = nullptr);

/// The graph drawn with stages as clusters and groups in colours.
std::string schedule_to_dot(const graph::Graph& graph, const Schedule& schedule);

}  // namespace stagecraft::scheduler
