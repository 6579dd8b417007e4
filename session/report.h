#pragma once
/// Text reports of a schedule, as `stagecraft show` prints them (and the Python module's
/// Schedule.summary()).

#include <string>

#include "executor/plan.h"
#include "graph/graph.h"
#include "scheduler/schedule.h"

namespace stagecraft::session {

/// Two or three lines: network, batch, dtype, cost model and search settings; predicted latency,
/// stage counts; the layouts when recorded. Ends with a newline.
std::string schedule_summary(const scheduler::Schedule& schedule);

/// A table of the stages: index, kind, op count, predicted ms and the groups by op name
/// ("[a > b] | [c]" for concurrent groups, "merge [a] + [b]" for a merge). Ends with a newline.
std::string stage_table(const graph::Graph& graph, const scheduler::Schedule& schedule);

/// One line describing a plan: kernels, streams, events, layouts (with `note`, e.g. from
/// report_fallbacks, in parentheses when not empty), activation memory with and without reuse,
/// views, copies and workspace. Starts with "plan: ", no newline.
std::string plan_summary(const executor::ExecutionPlan& plan, const std::string& note = "");

}  // namespace stagecraft::session
