#pragma once
// Helpers for scheduler tests: random DAGs, cost models with random stage costs, a search that
// validates its schedule, and a brute-force enumeration of every valid schedule (stages within
// blocks).

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "common/random.h"
#include "scheduler/cost_model.h"
#include "scheduler/search.h"

namespace stagecraft::scheduler::testing {

/// How far two costs of the same schedule may differ (the same latencies summed in another order).
inline constexpr double kTolerance = 1e-9;

/// A small deterministic generator for test data (the networks' SplitMix64).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  /// Uniform integer in [0, n).
  int below(int n) { return static_cast<int>(gen_.uniform_index(static_cast<uint64_t>(n))); }

 private:
  SplitMix64 gen_;
};

/// A random DAG of `num_ops` ops on 1x8x8x8 tensors: 1x1 and 3x3 convolutions (often reading a
/// shared value, so merges are possible), ReLUs, two-input adds; `window` limits how far back an
/// op reads (small windows give narrow graphs).
graph::Graph random_dag(Rng& rng, int num_ops, int window);

/// The base of the random cost models below: their name, the test device, and the salt that
/// picks one set of random costs.
class SaltedCostModel : public CostModel {
 public:
  SaltedCostModel(std::string name, uint64_t salt) : name_(std::move(name)), salt_(salt) {}
  std::string name() const override { return name_; }
  std::string device_fingerprint() const override { return "test"; }

 protected:
  /// A hash of the salt and `key`: the source of every random cost.
  uint64_t salted_hash(const std::string& key) const;

 private:
  std::string name_;
  uint64_t salt_;
};

/// Stage latency = a pseudo-random number in [0.05, 1) derived from the stage's canonical key
/// and a salt: arbitrary but consistent costs, so only an exact search finds the optimum.
class RandomKeyCostModel : public SaltedCostModel {
 public:
  explicit RandomKeyCostModel(uint64_t salt) : SaltedCostModel("random-key", salt) {}
  double stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                          const Stage& stage) override;
};

/// Per-op random times (by what the op computes, not its name); a concurrent stage costs max(longest group, total / 2) + 0.1 per extra
/// group; a merge stage costs 0.6 × the sum of its convolutions' times.
class RandomOpCostModel : public SaltedCostModel {
 public:
  explicit RandomOpCostModel(uint64_t salt) : SaltedCostModel("random-op", salt) {}
  double stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                          const Stage& stage) override;

 private:
  double op_ms(const graph::Graph& graph, graph::OpId id) const;
};

/// Both random cost models with one salt: checks that must hold for any costs run under each.
struct RandomCostModels {
  explicit RandomCostModels(uint64_t salt) : key(salt), op(salt) {}
  /// The two models, stage costs by key first.
  std::array<CostModel*, 2> both() { return {&key, &op}; }

  RandomKeyCostModel key;
  RandomOpCostModel op;
};

/// The schedule a search with `options` finds, validated (throws on any broken rule: every
/// schedule a search returns must be valid, whatever its options and budget).
Schedule search(const graph::Graph& g, CostModel& model, const SearchOptions& options,
                SearchStats* stats = nullptr);

/// The cheapest valid schedule's cost found by enumerating every schedule whose stages stay
/// inside one block: each stage is either concurrent (a set of ready ops, its connected components
/// partitioned into groups in every possible way) or a merge of >= 2 ready mergeable
/// convolutions, as `mode` allows. Forward enumeration, independent of the DP's ending recursion;
/// `memoise` remembers the best cost per set of remaining ops (for larger graphs).
double brute_force_best(const graph::Graph& graph, CostModel& model, DpMode mode, bool memoise,
                        size_t* schedules_seen = nullptr);

}  // namespace stagecraft::scheduler::testing
