#pragma once
/// The timing protocol of whole runs (after TVM's time evaluator): warm-up runs, then timed runs;
/// several plans are timed in alternating blocks, so that a noisy machine slows all of them alike
/// and none pays for another's idle threads; summaries are medians and percentiles, never means.
///
/// Example:
///   std::vector<std::vector<double>> ms = interleaved_ms({&a, &b}, /*warmup=*/3, /*rounds=*/20);
///   LatencySummary s = summarise(ms[0]);  // s.median, s.p10, s.p90

#include <functional>
#include <vector>

#include "executor/backend.h"
#include "executor/executor.h"
#include "executor/plan.h"
#include "graph/graph.h"
#include "scheduler/schedule.h"

namespace stagecraft::profiler {

/// The q-quantile (0..1) of `samples`, linearly interpolated.
double percentile(std::vector<double> samples, double q);

/// Median, 10th and 90th percentile of latency samples (ms).
struct LatencySummary {
  double median = 0, p10 = 0, p90 = 0;
  size_t runs = 0;
};
LatencySummary summarise(const std::vector<double>& samples_ms);

/// Runs every executor `warmup` times, then takes `rounds` timed runs of each (wall time, ms, per
/// executor). Several executors are timed in blocks that alternate: one untimed run, then up to
/// kTimedBlock timed runs of one executor, then the next. Blocks, not single runs: a plan's idle
/// stream workers and OpenMP teams spin for a while after its run, and the plan timed right after
/// it would pay for that spinning (15-25% on `bench`); the untimed run absorbs it. `on_round`,
/// when given, is called with (timed runs done per executor, rounds) and may throw to stop.
std::vector<std::vector<double>> interleaved_ms(
    const std::vector<executor::Executor*>& executors, int warmup, int rounds,
    const std::function<void(int, int)>& on_round = nullptr);

/// The same protocol over any runs (one function per thing timed).
std::vector<std::vector<double>> interleaved_ms(const std::vector<std::function<void()>>& runs,
                                                int warmup, int rounds,
                                                const std::function<void(int, int)>& on_round = nullptr);

/// One way to plan a graph, for interleaved_plan_ms.
struct PlanVariant {
  const scheduler::Schedule* schedule = nullptr;
  executor::PlanOptions options;
};

/// Plans `graph` once per variant on `backend`, all on the same random weights and random inputs
/// (seed 1), and times them with interleaved_ms: the samples (ms) of each variant. How a layout
/// search's candidates and a dp schedule against sequential are compared end to end.
/// `executor_per_block`: each block gets an executor of its own, gone (its stream workers and
/// their OpenMP teams with it) before the next block. GNU OpenMP stops every team's spinning
/// while the process holds more OpenMP workers than cores, so a concurrent plan's worker teams
/// slow every other plan of the process for as long as they live (8-30 us more per kernel);
/// per block, each plan is timed with its own teams only.
std::vector<std::vector<double>> interleaved_plan_ms(executor::Backend& backend, const graph::Graph& graph,
                                                     const std::vector<PlanVariant>& variants, int warmup,
                                                     int rounds, bool executor_per_block = false);

/// The same protocol with a runner made afresh for each block and destroyed at its end:
/// `make[k]()` returns what runs variant k once (and owns what it needs). `warmup` runs of each
/// in a block of their own first; then per block one untimed run and up to kTimedBlock timed.
std::vector<std::vector<double>> interleaved_fresh_ms(const std::vector<std::function<std::function<void()>()>>& make,
                                                      int warmup, int rounds);

/// Timed runs of one executor in a row (after one untimed run) when several are interleaved.
inline constexpr int kTimedBlock = 5;

}  // namespace stagecraft::profiler
