#pragma once
/// Internal to the scheduler: asks the cost model once per distinct canonical stage key.

#include <string>
#include <unordered_map>

#include "scheduler/cost_model.h"
#include "scheduler/stage_key.h"

namespace stagecraft::scheduler {

/// Caches stage latencies by canonical key for one search.
class StageCoster {
 public:
  StageCoster(const graph::Graph& graph, CostModel& model)
      : graph_(graph), model_(model), keys_(graph) {}

  /// Latency of `stage` in ms; the cost model is asked only for keys not seen before.
  double latency(const Stage& stage) {
    ++queries_;
    std::string key = keys_.key(stage);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const double ms = model_.stage_latency_ms(graph_, stage);
    cache_.emplace(std::move(key), ms);
    return ms;
  }

  /// Distinct keys costed so far.
  size_t distinct_keys() const { return cache_.size(); }
  /// Latencies asked for (cached or not).
  size_t queries() const { return queries_; }

 private:
  const graph::Graph& graph_;
  CostModel& model_;
  StageKeyBuilder keys_;
  std::unordered_map<std::string, double> cache_;
  size_t queries_ = 0;
};

}  // namespace stagecraft::scheduler
