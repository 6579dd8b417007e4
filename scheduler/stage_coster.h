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
  StageCoster(const graph::Graph& graph, const graph::LayoutAssignment& layouts, CostModel& model)
      : graph_(graph), layouts_(layouts), model_(model), keys_(graph) {}

  /// Latency of `stage` in ms; the cost model is asked only for keys not seen before.
  double latency(const Stage& stage) {
    ++queries_;
    std::string key = keys_.key(stage);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    double ms = 0;
    if (const auto known = model_.known_latency_ms(graph_, layouts_, stage)) {
      ms = *known;
      ++known_;
    } else {
      ms = model_.stage_latency_ms(graph_, layouts_, stage);
      ++measured_;
    }
    cache_.emplace(std::move(key), ms);
    return ms;
  }

  /// Distinct keys costed so far.
  size_t distinct_keys() const { return cache_.size(); }
  /// Latencies asked for (cached or not).
  size_t queries() const { return queries_; }
  /// Distinct keys the model knew without measuring (its cache; every key of a cheap model).
  size_t known() const { return known_; }
  /// Distinct keys the model had to measure.
  size_t measured() const { return measured_; }

 private:
  const graph::Graph& graph_;
  const graph::LayoutAssignment& layouts_;
  CostModel& model_;
  StageKeyBuilder keys_;
  std::unordered_map<std::string, double> cache_;
  size_t queries_ = 0;
  size_t known_ = 0;
  size_t measured_ = 0;
};

}  // namespace stagecraft::scheduler
