#pragma once
/// Text reports of a schedule, as `stagecraft show` prints them (and the Python module's
/// Schedule.summary()).

#include <string>

#include "executor/plan.h"
#include "graph/graph.h"
#include "quant/calibration.h"
#include "scheduler/schedule.h"
#include "scheduler/search.h"

namespace stagecraft::session {

/// Two or three lines: network, batch, dtype, cost model and search settings; predicted latency,
/// stage counts; the layouts when recorded. Ends with a newline.
std::string schedule_summary(const scheduler::Schedule& schedule);

/// A table of the stages: index, kind, op count, predicted ms and the groups by op name
/// ("[a > b] | [c]" for concurrent groups, "merge [a] + [b]" for a merge). Ends with a newline.
std::string stage_table(const graph::Graph& graph, const scheduler::Schedule& schedule);

/// One progress line of a running search (no newline): parts enumerated, then — on a model that
/// measures — stages measured and estimated, the best predicted latency so far and what the
/// estimates say it could reach, and the time against the budget.
std::string search_progress_text(const scheduler::SearchProgress& progress);

/// One line after a search (no newline): time, parts, candidate stages, how many were measured,
/// cached and costed from their ops, and whether it converged or its budget ended it.
std::string search_stats_text(const scheduler::SearchStats& stats, const scheduler::Schedule& schedule);

/// Agreement scores in one line (no newline): "cosine min 0.9987 mean 0.9995, top-1 agreement
/// 100.0% (5 distinct CLASSES)", `classes` naming what the distinct count counts.
std::string logit_scores_text(const quant::LogitScores& scores, const char* classes);

/// One line describing a plan: kernels, streams, events, layouts (with `note`, e.g. from
/// report_fallbacks, in parentheses when not empty), activation memory with and without reuse,
/// views, copies and workspace. Starts with "plan: ", no newline.
std::string plan_summary(const executor::ExecutionPlan& plan, const std::string& note = "");

/// The whole plan, one line per kernel: index, stage, stream, events waited/recorded, label,
/// implementation; after a first line with the plan's layout summary. Two plans list the same
/// when they run the same kernels in the same order and layouts (the CLI's run --plan-listing and
/// the Python Session.plan_listing() give this text).
std::string plan_listing(const graph::Graph& graph, const executor::ExecutionPlan& plan);

}  // namespace stagecraft::session
