#include "profiler/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "executor/tensor.h"
#include "graph/weights.h"

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

std::vector<std::vector<double>> interleaved_ms(const std::vector<std::function<void()>>& runs,
                                                int warmup, int rounds,
                                                const std::function<void(int, int)>& on_round) {
  for (const auto& run : runs)
    for (int i = 0; i < warmup; ++i) run();
  const bool alone = runs.size() == 1;
  const int block = alone ? 1 : kTimedBlock;
  std::vector<std::vector<double>> ms(runs.size());
  for (int done = 0; done < rounds;) {
    const int n = std::min(block, rounds - done);
    for (size_t k = 0; k < runs.size(); ++k) {
      if (!alone) runs[k]();  // absorbs the previous plan's spinning threads
      for (int i = 0; i < n; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        runs[k]();
        ms[k].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    done += n;
    if (on_round) on_round(done, rounds);
  }
  return ms;
}

std::vector<std::vector<double>> interleaved_ms(
    const std::vector<executor::Executor*>& executors, int warmup, int rounds,
    const std::function<void(int, int)>& on_round) {
  std::vector<std::function<void()>> runs;
  for (executor::Executor* e : executors) runs.push_back([e] { e->execute(); });
  return interleaved_ms(runs, warmup, rounds, on_round);
}

std::vector<std::vector<double>> interleaved_plan_ms(executor::Backend& backend, const graph::Graph& graph,
                                                     const std::vector<PlanVariant>& variants, int warmup,
                                                     int rounds, bool executor_per_block) {
  std::vector<executor::HostTensor> inputs;
  for (graph::ValueId v : graph.inputs()) inputs.push_back(executor::random_host_tensor(graph.value(v).desc.shape, 1));
  const graph::WeightStore weights = graph::random_weights(graph, 1);
  std::vector<std::unique_ptr<executor::ExecutionPlan>> plans;
  std::vector<std::unique_ptr<executor::Executor>> runs;
  std::vector<executor::Executor*> executors;
  for (const PlanVariant& v : variants) {
    plans.push_back(std::make_unique<executor::ExecutionPlan>(graph, *v.schedule, weights, backend, v.options));
    if (executor_per_block) continue;
    runs.push_back(std::make_unique<executor::Executor>(*plans.back()));
    runs.back()->set_inputs(inputs);
    executors.push_back(runs.back().get());
  }
  if (!executor_per_block) return interleaved_ms(executors, warmup, rounds);
  std::vector<std::function<std::function<void()>()>> make;
  for (auto& plan : plans) {
    make.push_back([&inputs, p = plan.get()]() -> std::function<void()> {
      auto e = std::make_shared<executor::Executor>(*p);
      e->set_inputs(inputs);
      return [e] { e->execute(); };
    });
  }
  return interleaved_fresh_ms(make, warmup, rounds);
}

std::vector<std::vector<double>> interleaved_fresh_ms(const std::vector<std::function<std::function<void()>()>>& make,
                                                      int warmup, int rounds) {
  // A block: made, `warm` untimed runs, `timed` timed ones, gone.
  const auto block = [&](size_t k, int warm, int timed, std::vector<double>* ms) {
    std::function<void()> run = make[k]();
    for (int i = 0; i < warm; ++i) run();
    for (int i = 0; i < timed; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      ms->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  std::vector<std::vector<double>> ms(make.size());
  if (warmup > 0)
    for (size_t k = 0; k < make.size(); ++k) block(k, warmup, 0, &ms[k]);
  for (int done = 0; done < rounds;) {
    const int n = std::min(kTimedBlock, rounds - done);
    for (size_t k = 0; k < make.size(); ++k) block(k, 1, n, &ms[k]);
    done += n;
  }
  return ms;
}

}  // namespace stagecraft::profiler
