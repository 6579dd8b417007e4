#pragma once
/// The timing protocol of whole runs (after TVM's time evaluator): warm-up runs, then timed runs;
/// several plans are timed round by round, interleaved, so that a noisy machine slows all of them
/// alike; summaries are medians and percentiles, never means.
///
/// Example:
///   std::vector<std::vector<double>> ms = interleaved_ms({&a, &b}, /*warmup=*/3, /*rounds=*/20);
///   LatencySummary s = summarise(ms[0]);  // s.median, s.p10, s.p90

#include <functional>
#include <vector>

#include "executor/executor.h"

namespace stagecraft::profiler {

/// The q-quantile (0..1) of `samples`, linearly interpolated.
double percentile(std::vector<double> samples, double q);

/// Median, 10th and 90th percentile of latency samples (ms).
struct LatencySummary {
  double median = 0, p10 = 0, p90 = 0;
  size_t runs = 0;
};
LatencySummary summarise(const std::vector<double>& samples_ms);

/// Runs every executor `warmup` times, then `rounds` rounds in each of which every executor runs
/// once (in order); returns the wall time of each run (ms) per executor. `on_round`, when given,
/// is called after each round with (rounds done, rounds) and may throw to stop.
std::vector<std::vector<double>> interleaved_ms(
    const std::vector<executor::Executor*>& executors, int warmup, int rounds,
    const std::function<void(int, int)>& on_round = nullptr);

}  // namespace stagecraft::profiler
