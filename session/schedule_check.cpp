#include "session/schedule_check.h"

#include <algorithm>
#include <vector>

#include "common/strings.h"
#include "profiler/timing.h"

namespace stagecraft::session {

namespace {

constexpr int kWarmupRuns = 1;
constexpr int kTimedRuns = 6;  // each, in interleaved blocks

bool one_op_per_stage(const scheduler::Schedule& s) {
  return std::all_of(s.stages.begin(), s.stages.end(), [](const scheduler::Stage& st) {
    return st.kind == scheduler::StageKind::kConcurrent && st.num_ops() == 1;
  });
}

}  // namespace

ScheduleCheck check_against_sequential(executor::Backend& backend, const executor::PlanOptions& plan_options,
                                       const graph::Graph& graph, scheduler::Schedule searched, double margin) {
  ScheduleCheck result;
  if (one_op_per_stage(searched)) {
    result.kept = std::move(searched);
    return result;
  }
  scheduler::Schedule sequential = scheduler::sequential_schedule(graph);
  sequential.meta = searched.meta;
  sequential.layouts = searched.layouts;
  const auto samples = profiler::interleaved_plan_ms(
      backend, graph, {{&searched, plan_options}, {&sequential, plan_options}}, kWarmupRuns, kTimedRuns,
      /*executor_per_block=*/true);
  const double dp_ms = profiler::summarise(samples[0]).median, seq_ms = profiler::summarise(samples[1]).median;
  const bool sequential_wins = seq_ms < (1 - margin) * dp_ms;
  result.verdict = cat("end to end: searched ", fixed(dp_ms, 2), " ms, sequential ", fixed(seq_ms, 2), " ms (medians of ",
                       kTimedRuns, ", interleaved): ", sequential_wins ? "the sequential schedule kept" : "the searched schedule kept");
  if (sequential_wins) {
    sequential.meta.predicted_ms = seq_ms;
    result.kept = std::move(sequential);
  } else {
    result.kept = std::move(searched);
  }
  return result;
}

}  // namespace stagecraft::session
