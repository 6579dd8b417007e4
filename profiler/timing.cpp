#include "profiler/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace stagecraft::profiler {

namespace {
constexpr double kP10 = 0.10;
constexpr double kP90 = 0.90;
}  // namespace

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

LatencySummary summarise(const std::vector<double>& samples_ms) {
  return {percentile(samples_ms, 0.5), percentile(samples_ms, kP10), percentile(samples_ms, kP90),
          samples_ms.size()};
}

std::vector<std::vector<double>> interleaved_ms(
    const std::vector<executor::Executor*>& executors, int warmup, int rounds,
    const std::function<void(int, int)>& on_round) {
  for (executor::Executor* e : executors)
    for (int i = 0; i < warmup; ++i) e->execute();
  std::vector<std::vector<double>> ms(executors.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < executors.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      executors[k]->execute();
      ms[k].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    if (on_round) on_round(round + 1, rounds);
  }
  return ms;
}

}  // namespace stagecraft::profiler
