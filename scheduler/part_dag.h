#pragma once
/// Internal to the DP scheduler: the search space of one part as an explicit graph of states, so
/// that the DP can be solved again and again as stage latencies become known.
///
/// A state is a down-set S of the part's ops (the ops still to schedule, as a 64-bit set); a
/// transition from S takes an ending E of S (no edge from E to S - E) as one stage and leads to
/// S - E. PartDag::build enumerates every state reachable from the whole part and its transitions
/// exactly as IOS's recursion does (see dp.cpp for the rules and pruning), interning each stage
/// through a callback that returns its candidate id. solve() is then a single pass over the
/// transitions: O(states + transitions) per solve, whatever the costs.

#include <cstdint>
#include <functional>
#include <vector>

#include "scheduler/search.h"

namespace stagecraft::scheduler {

/// A set of a part's ops by local index (ops ascending, so local order is topological).
using Mask = uint64_t;

/// Most ops in one part (the state is a 64-bit set).
constexpr int kMaxPartOps = 64;

/// One stage choice: from its state to `to`, running candidate stage `stage`.
struct Transition {
  Mask ending = 0;          ///< the ops of the stage
  uint32_t to = 0;          ///< state index after the stage
  uint32_t stage = 0;       ///< candidate id (the caller's interning)
  uint32_t partition = 0;   ///< concurrent: kComponents or an index of a group partition; kMerge
};

/// Transition::partition of a concurrent stage whose groups are its ending's weakly connected
/// components (always, when pruned).
constexpr uint32_t kComponents = UINT32_MAX;
/// Transition::partition of a merge stage.
constexpr uint32_t kMerge = UINT32_MAX - 1;

/// The result of one solve.
struct PartSolution {
  double cost = 0;                    ///< the cheapest path's total (infinity: none finite)
  std::vector<uint32_t> transitions;  ///< the path, first stage first (indices into transitions)
};

/// The states and transitions of one part.
class PartDag {
 public:
  /// How a stage is turned into a candidate id: (stage with the graph's op ids) -> id.
  using Intern = std::function<uint32_t(const Stage&)>;

  /// Enumerates the part `ops` (ascending graph op ids, at most kMaxPartOps) under `options`
  /// (mode, r, s, pruned), calling `intern` once per distinct stage of the part and `tick`
  /// now and then (progress; it may throw to stop).
  static PartDag build(const graph::Graph& graph, std::vector<OpId> ops, const SearchOptions& options,
                       const Intern& intern, const std::function<void(size_t, size_t)>& tick);

  /// The cheapest path from the whole part to the empty set when candidate `c` costs cost[c]
  /// (infinity: not allowed). Ties go to the transition enumerated first.
  PartSolution solve(const std::vector<double>& cost) const;

  /// For every state, the cheapest cost from it to the empty set (index 0) under `cost`.
  std::vector<double> to_end(const std::vector<double>& cost) const;
  /// For every state, the cheapest cost from the whole part to it under `cost`.
  std::vector<double> from_start(const std::vector<double>& cost) const;
  /// Calls visit(transition index, from-state index) for every transition.
  template <class Visit>
  void for_each_transition(Visit&& visit) const {
    for (uint32_t i = 1; i + 1 < first_.size(); ++i)
      for (uint32_t t = first_[i]; t < first_[i + 1]; ++t) visit(t, i);
  }

  /// The stage a transition runs, with the graph's op ids.
  Stage stage_of(const Transition& t) const;

  /// The part's ops (graph ids, ascending).
  const std::vector<OpId>& ops() const { return ops_; }
  /// Every transition; those of state i are [first[i], first[i + 1]).
  const std::vector<Transition>& transitions() const { return transitions_; }
  /// Number of states (the empty set included).
  size_t num_states() const { return states_.size(); }

 private:
  std::vector<OpId> ops_;
  std::vector<Mask> adj_;                // by local index: ops sharing an edge
  std::vector<Mask> states_;             // by index; post-order: transitions lead to lower indices
  std::vector<uint32_t> first_;          // CSR offsets into transitions_, size num_states + 1
  std::vector<Transition> transitions_;
  std::vector<std::vector<Mask>> partitions_;  // unpruned: the group masks of a transition

  friend class PartBuilder;
};

}  // namespace stagecraft::scheduler
