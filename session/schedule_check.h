#pragma once
/// The end-to-end check of a dp search on a measured backend: the searched schedule against the
/// sequential one, both planned and run, interleaved, on random inputs and weights. The search
/// costs stages one at a time; on a CPU whose streams share the cores, concurrent stages that each
/// measured faster can add up to a slower run than one op after another (2 cores: PVT v2 ran 1.4x
/// its sequential schedule). Where the sequential schedule is faster by more than the noise
/// margin, it is kept instead (and cached under the search's key), and the report says so.
///
/// Example:
///   ScheduleCheck c = check_against_sequential(backend, plan_options, graph, std::move(dp));
///   schedule = std::move(c.kept);  // c.verdict: "end to end: dp 21.3 ms, sequential 14.9 ms: ..."

#include <string>

#include "executor/backend.h"
#include "executor/plan.h"
#include "graph/graph.h"
#include "scheduler/schedule.h"

namespace stagecraft::session {

struct ScheduleCheck {
  scheduler::Schedule kept;  ///< the searched schedule, or the sequential one in its layouts
  std::string verdict;       ///< one line for the report ("" when nothing was checked)
};

/// Sequential is kept where its median is below (1 - kScheduleCheckMargin) of the searched one's.
inline constexpr double kScheduleCheckMargin = 0.03;

/// Checks `searched` (a dp schedule of `graph`) against the sequential schedule on `backend` with
/// `plan_options` (its layouts included). A schedule of one op per stage is returned unchecked.
/// `margin`: the fraction by which sequential must be faster to be kept (tests force either way).
ScheduleCheck check_against_sequential(executor::Backend& backend, const executor::PlanOptions& plan_options,
                                       const graph::Graph& graph, scheduler::Schedule searched,
                                       double margin = kScheduleCheckMargin);

}  // namespace stagecraft::session
