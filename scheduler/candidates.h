#pragma once
/// Internal to the DP scheduler: the distinct candidate stages of one search (by canonical stage
/// key), what the cost model knows of each, and optimistic estimates of the others from their
/// single-op latencies.
///
/// Estimates: a stage of several ops is expected to cost ratio x (sum of its ops' latencies
/// alone). The ratio is learned per class (merge or concurrent; two groups or more) and per decade
/// of that sum from the stages measured so far: a low quantile of the observed ratios, so that an
/// estimate is optimistic — a stage whose optimistic estimate cannot win need not be measured.
/// Until a class has enough samples its ratio is a prior that favours measuring.
///
/// Example:
///   CandidateTable table(graph, model);
///   const uint32_t c = table.intern(stage);      // model.known_latency_ms asked once per key
///   if (!table.known(c)) table.measure(c);       // model.stage_latency_ms
///   double guess = table.estimate(c);            // after set_single() for every op

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/stage_key.h"

namespace stagecraft::scheduler {

/// What kind of stage a candidate is, for estimates.
enum class CandidateClass : uint8_t {
  kSingle,       ///< one op
  kChain,        ///< one group of several ops: costs the sum of its ops (no overlap)
  kConcurrent2,  ///< two groups
  kConcurrent3,  ///< three groups or more
  kMerge2,       ///< two merged convolutions
  kMerge3,       ///< three or more
};

/// Ratio of a stage's latency to the sum of its ops' latencies alone, learned per class and
/// decade of that sum (see the file comment).
class RatioEstimator {
 public:
  /// Records a measured stage: its class, the sum of its single ops' latencies, its latency.
  void add(CandidateClass klass, double singles_ms, double ms);
  /// The optimistic ratio for a stage of `klass` whose ops sum to `singles_ms`.
  double ratio(CandidateClass klass, double singles_ms) const;
  /// Samples recorded.
  size_t samples() const { return samples_; }
  /// Changes whenever a sample changes what ratio() answers for some stage.
  uint64_t revision() const { return revision_; }

 private:
  static constexpr int kDecades = 8;  // sums from 1e-4 ms to 1e3 ms
  static int decade(double singles_ms);
  struct Cell {
    std::vector<double> ratios;  // sorted
  };
  static double low_quantile(const Cell& cell);
  Cell cells_[6][kDecades];
  Cell classes_[6];
  size_t samples_ = 0;
  uint64_t revision_ = 0;
};

/// The candidate stages of one search.
class CandidateTable {
 public:
  /// Candidates of stages of `graph` costed by `model` (both must outlive the table).
  CandidateTable(const graph::Graph& graph, const graph::LayoutAssignment& layouts, CostModel& model);

  /// The id of `stage`'s canonical key, adding it (and asking the model whether it knows its
  /// latency) when new. Single ops must have been set (set_single) before other stages are
  /// interned, so that their sums are known.
  uint32_t intern(const Stage& stage);
  /// Records that `op`'s single-op stage is candidate `id` (known or measured before other
  /// stages are interned).
  void set_single(OpId op, uint32_t id) { single_.at(op) = id; }

  /// Measures candidate `id` on the model (stage_latency_ms) and learns its ratio; returns ms.
  double measure(uint32_t id);

  /// Number of candidates.
  size_t size() const { return entries_.size(); }
  /// The stage first interned under this id (graph op ids).
  const Stage& stage(uint32_t id) const { return entries_[id].stage; }
  /// Whether the model knows the latency (cached or measured here).
  bool known(uint32_t id) const { return entries_[id].known; }
  /// Whether it was measured by this search.
  bool measured(uint32_t id) const { return entries_[id].measured; }
  /// The known latency (requires known()).
  double ms(uint32_t id) const { return entries_[id].ms; }
  /// Its class.
  CandidateClass klass(uint32_t id) const { return entries_[id].klass; }
  /// Sum of its ops' single-op latencies.
  double singles_ms(uint32_t id) const { return entries_[id].singles_ms; }
  /// The longest of its ops' single-op latencies.
  double max_single_ms(uint32_t id) const { return entries_[id].max_single_ms; }
  /// The optimistic estimate: singles_ms() x the learned ratio (kSingle, kChain: the sum).
  double estimate(uint32_t id) const;

  /// Changes whenever the learned ratios (and so the estimates) change.
  uint64_t ratio_revision() const { return ratios_.revision(); }
  /// Candidates the model knew on interning (its cache).
  size_t known_on_intern() const { return known_on_intern_; }
  /// Candidates measured by this search.
  size_t num_measured() const { return measured_; }
  /// Seconds spent in measurements.
  double measuring_seconds() const { return measuring_seconds_; }
  /// Interning calls (cost queries).
  size_t queries() const { return queries_; }

 private:
  struct Entry {
    Stage stage;
    CandidateClass klass = CandidateClass::kSingle;
    bool known = false;
    bool measured = false;
    double ms = 0;
    double singles_ms = 0;
    double max_single_ms = 0;
  };

  const graph::Graph& graph_;
  const graph::LayoutAssignment& layouts_;
  CostModel& model_;
  StageKeyBuilder keys_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> single_;  // by op id; UINT32_MAX until set
  RatioEstimator ratios_;
  size_t known_on_intern_ = 0;
  size_t measured_ = 0;
  size_t queries_ = 0;
  double measuring_seconds_ = 0;
};

}  // namespace stagecraft::scheduler
