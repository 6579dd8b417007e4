#include "scheduler/candidates.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>

namespace stagecraft::scheduler {

namespace {

// Below this many samples a cell (class and decade) defers to its class, and a class to the prior.
constexpr size_t kMinSamples = 3;
// The quantile of the observed ratios an estimate uses: low, so that estimates are optimistic.
constexpr double kQuantile = 0.1;
// The ratio of a class nothing is known of: optimistic enough that its first candidates on the
// estimated best schedule get measured (and teach the class its ratio).
constexpr double kPriorRatio = 0.5;

CandidateClass class_of(const Stage& stage) {
  const size_t n = stage.groups.size();
  if (stage.kind == StageKind::kMerge) return n >= 3 ? CandidateClass::kMerge3 : CandidateClass::kMerge2;
  if (n == 1) return stage.groups[0].size() == 1 ? CandidateClass::kSingle : CandidateClass::kChain;
  return n >= 3 ? CandidateClass::kConcurrent3 : CandidateClass::kConcurrent2;
}

}  // namespace

int RatioEstimator::decade(double singles_ms) {
  if (!(singles_ms > 0)) return 0;
  return std::clamp(static_cast<int>(std::floor(std::log10(singles_ms))) + 4, 0, kDecades - 1);
}

double RatioEstimator::low_quantile(const Cell& cell) {
  const size_t i = static_cast<size_t>(kQuantile * static_cast<double>(cell.ratios.size()));
  return cell.ratios[std::min(i, cell.ratios.size() - 1)];
}

void RatioEstimator::add(CandidateClass klass, double singles_ms, double ms) {
  if (!(singles_ms > 0) || !std::isfinite(ms)) return;
  const double ratio = ms / singles_ms;
  const auto k = static_cast<size_t>(klass);
  // What ratio() answers depends on the cell (once it has enough samples) and on the class (for
  // every cell that has not): either changing changes estimates.
  const auto answer = [](const Cell& cell) {
    return cell.ratios.size() >= kMinSamples ? low_quantile(cell) : -1.0;
  };
  bool changed = false;
  for (Cell* cell : {&cells_[k][decade(singles_ms)], &classes_[k]}) {
    const double before = answer(*cell);
    cell->ratios.insert(std::upper_bound(cell->ratios.begin(), cell->ratios.end(), ratio), ratio);
    changed = changed || answer(*cell) != before;
  }
  if (changed) ++revision_;
  ++samples_;
}

double RatioEstimator::ratio(CandidateClass klass, double singles_ms) const {
  const auto k = static_cast<size_t>(klass);
  const Cell& cell = cells_[k][decade(singles_ms)];
  if (cell.ratios.size() >= kMinSamples) return low_quantile(cell);
  if (classes_[k].ratios.size() >= kMinSamples) return low_quantile(classes_[k]);
  return kPriorRatio;
}

CandidateTable::CandidateTable(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                               CostModel& model)
    : graph_(graph), layouts_(layouts), model_(model), keys_(graph), single_(graph.num_ops(), UINT32_MAX) {}

uint32_t CandidateTable::intern(const Stage& stage) {
  ++queries_;
  std::string key = keys_.key(stage);
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(entries_.size());
  ids_.emplace(std::move(key), id);
  Entry e;
  e.stage = stage;
  e.klass = class_of(stage);
  if (e.klass != CandidateClass::kSingle) {
    for (OpId op : stage.ops()) {
      const uint32_t s = single_[op];
      assert(s != UINT32_MAX && entries_[s].known && "single ops are costed before other stages");
      e.singles_ms += entries_[s].ms;
      e.max_single_ms = std::max(e.max_single_ms, entries_[s].ms);
    }
  }
  if (const auto ms = model_.known_latency_ms(graph_, layouts_, stage)) {
    e.known = true;
    e.ms = *ms;
    ++known_on_intern_;
    if (e.klass == CandidateClass::kSingle) {
      e.singles_ms = e.max_single_ms = *ms;
    } else if (e.klass != CandidateClass::kChain) {
      ratios_.add(e.klass, e.singles_ms, *ms);  // a cached measurement teaches as much
    }
  }
  entries_.push_back(std::move(e));
  return id;
}

double CandidateTable::measure(uint32_t id) {
  Entry& e = entries_[id];
  const auto start = std::chrono::steady_clock::now();
  e.ms = model_.stage_latency_ms(graph_, layouts_, e.stage);
  measuring_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  e.known = true;
  e.measured = true;
  ++measured_;
  if (e.klass == CandidateClass::kSingle) {
    e.singles_ms = e.max_single_ms = e.ms;
  } else if (e.klass != CandidateClass::kChain) {
    ratios_.add(e.klass, e.singles_ms, e.ms);
  }
  return e.ms;
}

double CandidateTable::estimate(uint32_t id) const {
  const Entry& e = entries_[id];
  if (e.klass == CandidateClass::kSingle || e.klass == CandidateClass::kChain) return e.singles_ms;
  return e.singles_ms * ratios_.ratio(e.klass, e.singles_ms);
}

}  // namespace stagecraft::scheduler
