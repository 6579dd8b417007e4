// Enumeration of one part's DP states and transitions (after IOS, MLSys 2021), and the DP solve.
//
// Rules (unchanged from the recursive DP this replaces): a concurrent stage runs the weakly
// connected components of its ending E as groups (pruned: at most r ops per group, at most s
// groups; unpruned: every partition of the components into groups). A merge stage is a set of
// >= 2 pairwise-mergeable convolutions among the sinks of S. Endings are enumerated by a
// depth-first walk over S in reverse topological order in which an op may join E only when all
// its successors in S already did; when pruned only ops with fewer than r descendants in S are
// candidates, and a component is abandoned as soon as it exceeds r ops.
// Complexity: O(sum over states of endings enumerated); each distinct ending (and merge set) of
// the part is interned once.
#include "scheduler/part_dag.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <unordered_map>

namespace stagecraft::scheduler {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

Mask bit(int i) { return Mask{1} << i; }

// Masks of a part: local index i is ops[i].
struct PartGraph {
  std::vector<OpId> ops;
  std::vector<Mask> succ, desc, adj, merge_ok;
  Mask mergeable = 0;

  PartGraph(const graph::Graph& graph, std::vector<OpId> part) : ops(std::move(part)) {
    const int m = static_cast<int>(ops.size());
    succ.assign(m, 0);
    desc.assign(m, 0);
    adj.assign(m, 0);
    merge_ok.assign(m, 0);
    graph::SubgraphView view(graph, ops);
    for (int i = 0; i < m; ++i) {
      for (OpId s : view.successors(ops[i])) {
        const int j = view.local_index(s);
        succ[i] |= bit(j);
        adj[i] |= bit(j);
        adj[j] |= bit(i);
      }
    }
    for (int i = m - 1; i >= 0; --i) {
      for (Mask rest = succ[i]; rest; rest &= rest - 1) {
        const int j = std::countr_zero(rest);
        desc[i] |= bit(j) | desc[j];
      }
    }
    for (int i = 0; i < m; ++i) {
      if (graph.op(ops[i]).kind != graph::OpKind::kConv2d) continue;
      for (int j = 0; j < m; ++j) {
        if (j != i && graph.op(ops[j]).kind == graph::OpKind::kConv2d &&
            merge_conflict(graph, ops[i], ops[j]).empty()) {
          merge_ok[i] |= bit(j);
        }
      }
      if (merge_ok[i]) mergeable |= bit(i);
    }
  }
};

// The weakly connected component of `seed` inside `within`.
Mask component(const std::vector<Mask>& adj, Mask seed, Mask within) {
  Mask comp = seed;
  for (;;) {
    Mask next = comp;
    for (Mask rest = comp; rest; rest &= rest - 1) next |= adj[std::countr_zero(rest)] & within;
    if (next == comp) return comp;
    comp = next;
  }
}

std::vector<Mask> components(const std::vector<Mask>& adj, Mask set) {
  std::vector<Mask> result;
  while (set) {
    const Mask comp = component(adj, set & (~set + 1), set);
    result.push_back(comp);
    set &= ~comp;
  }
  return result;
}

std::vector<OpId> ops_of(const std::vector<OpId>& ops, Mask set) {
  std::vector<OpId> result;
  for (; set; set &= set - 1) result.push_back(ops[std::countr_zero(set)]);
  return result;
}

Stage make_stage(const std::vector<OpId>& ops, const std::vector<Mask>& adj, Mask ending,
                 uint32_t partition, const std::vector<std::vector<Mask>>& partitions) {
  if (partition == kMerge) return Stage::merge(ops_of(ops, ending));
  std::vector<std::vector<OpId>> groups;
  for (Mask g : partition == kComponents ? components(adj, ending) : partitions[partition]) {
    groups.push_back(ops_of(ops, g));
  }
  return Stage::concurrent(std::move(groups));
}

}  // namespace

// Builds a PartDag by the recursion of the DP, recording transitions instead of costs.
class PartBuilder {
 public:
  PartBuilder(const graph::Graph& graph, std::vector<OpId> ops, const SearchOptions& options,
              const PartDag::Intern& intern, const std::function<void(size_t, size_t)>& tick)
      : part_(graph, std::move(ops)), options_(options), intern_(intern), tick_(tick) {}

  PartDag build() {
    const int m = static_cast<int>(part_.ops.size());
    dag_.ops_ = part_.ops;
    dag_.adj_ = part_.adj;
    dag_.states_.push_back(0);  // the empty set: index 0, no transitions
    dag_.first_.push_back(0);
    index_.emplace(0, 0);
    state(m == kMaxPartOps ? ~Mask{0} : bit(m) - 1);
    dag_.first_.push_back(static_cast<uint32_t>(dag_.transitions_.size()));
    return std::move(dag_);
  }

 private:
  struct Choice {
    uint32_t stage;
    uint32_t partition;
  };

  bool pruned() const { return options_.pruned; }
  bool allow_concurrent() const { return options_.mode != DpMode::kMerge; }
  bool allow_merge() const { return options_.mode != DpMode::kConcurrent; }

  uint32_t intern(Mask ending, uint32_t partition) {
    return intern_(make_stage(part_.ops, part_.adj, ending, partition, dag_.partitions_));
  }

  // The concurrent stages of an ending, each interned once per part: pruned, one (none when it
  // has more than s components); unpruned, one per partition of its components into groups.
  const std::vector<Choice>& concurrent_choices(Mask ending) {
    auto it = concurrent_.find(ending);
    if (it != concurrent_.end()) return it->second;
    std::vector<Choice> choices;
    const std::vector<Mask> comps = components(part_.adj, ending);
    if (pruned()) {
      if (static_cast<int>(comps.size()) <= options_.max_num_groups) {
        choices.push_back({intern(ending, kComponents), kComponents});
      }
    } else {
      std::vector<Mask> groups;
      for_each_partition(comps, groups, 0, [&](const std::vector<Mask>& partition) {
        const auto index = static_cast<uint32_t>(dag_.partitions_.size());
        dag_.partitions_.push_back(partition);
        choices.push_back({intern(ending, index), index});
      });
    }
    return concurrent_.emplace(ending, std::move(choices)).first->second;
  }

  // Every partition of `comps` into groups (restricted growth strings).
  void for_each_partition(const std::vector<Mask>& comps, std::vector<Mask>& groups, size_t i,
                          const std::function<void(const std::vector<Mask>&)>& visit) {
    if (i == comps.size()) {
      visit(groups);
      return;
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      groups[g] |= comps[i];
      for_each_partition(comps, groups, i + 1, visit);
      groups[g] &= ~comps[i];
    }
    groups.push_back(comps[i]);
    for_each_partition(comps, groups, i + 1, visit);
    groups.pop_back();
  }

  void add(std::vector<Transition>& out, Mask s, Mask ending, uint32_t stage, uint32_t partition) {
    const uint32_t to = state(s & ~ending);
    out.push_back(Transition{ending, to, stage, partition});
    if ((++found_ & 1023) == 0 && tick_) tick_(dag_.states_.size(), found_);
  }

  void visit_ending(std::vector<Transition>& out, Mask s, Mask ending) {
    // A copy: adding a transition recurses, which may grow the cache and move its entries.
    const std::vector<Choice> choices = concurrent_choices(ending);
    for (const Choice& c : choices) add(out, s, ending, c.stage, c.partition);
  }

  // Depth-first enumeration of the endings of `s` (see the file comment).
  void endings(std::vector<Transition>& out, Mask s, const int* candidates, int count, int k,
               Mask ending) {
    if (k == count) {
      if (ending) visit_ending(out, s, ending);
      return;
    }
    const int u = candidates[k];
    endings(out, s, candidates, count, k + 1, ending);
    if ((part_.succ[u] & s & ~ending) != 0) return;  // a successor in s stays: u cannot end
    const Mask with = ending | bit(u);
    if (pruned() && std::popcount(component(part_.adj, bit(u), with)) > options_.max_group_size) {
      return;
    }
    endings(out, s, candidates, count, k + 1, with);
  }

  void merges(std::vector<Transition>& out, Mask s, Mask sinks) {
    const Mask pool = sinks & part_.mergeable;
    if (std::popcount(pool) < 2) return;
    // Cliques of pairwise-mergeable sinks, each set once (ascending choice).
    std::function<void(Mask, Mask)> grow = [&](Mask chosen, Mask allowed) {
      if (std::popcount(chosen) >= 2) {
        auto it = merge_.find(chosen);
        if (it == merge_.end()) it = merge_.emplace(chosen, intern(chosen, kMerge)).first;
        add(out, s, chosen, it->second, kMerge);
      }
      for (Mask rest = allowed; rest; rest &= rest - 1) {
        const int u = std::countr_zero(rest);
        const Mask higher = rest & ~bit(u) & ~(bit(u) - 1);
        grow(chosen | bit(u), higher & part_.merge_ok[u]);
      }
    };
    grow(0, pool);
  }

  uint32_t state(Mask s) {
    auto found = index_.find(s);
    if (found != index_.end()) return found->second;
    std::vector<Transition> out;
    Mask sinks = 0;
    int candidates[kMaxPartOps];
    int count = 0;
    for (Mask rest = s; rest;) {
      const int u = kMaxPartOps - 1 - std::countl_zero(rest);  // descending: reverse topological
      rest &= ~bit(u);
      if ((part_.succ[u] & s) == 0) sinks |= bit(u);
      if (!pruned() || std::popcount(part_.desc[u] & s) < options_.max_group_size) {
        candidates[count++] = u;
      }
    }
    if (allow_concurrent()) {
      endings(out, s, candidates, count, 0, 0);
    } else {
      for (Mask rest = sinks; rest; rest &= rest - 1) visit_ending(out, s, rest & (~rest + 1));
    }
    if (allow_merge()) merges(out, s, sinks);
    // Post-order: every state this one leads to already has its index.
    const auto index = static_cast<uint32_t>(dag_.states_.size());
    dag_.states_.push_back(s);
    if (index > 0) dag_.first_.push_back(static_cast<uint32_t>(dag_.transitions_.size()));
    dag_.transitions_.insert(dag_.transitions_.end(), out.begin(), out.end());
    index_.emplace(s, index);
    return index;
  }

  PartGraph part_;
  const SearchOptions& options_;
  const PartDag::Intern& intern_;
  const std::function<void(size_t, size_t)>& tick_;
  PartDag dag_;
  std::unordered_map<Mask, uint32_t> index_;
  std::unordered_map<Mask, std::vector<Choice>> concurrent_;
  std::unordered_map<Mask, uint32_t> merge_;
  size_t found_ = 0;  // transitions found so far
};

PartDag PartDag::build(const graph::Graph& graph, std::vector<OpId> ops, const SearchOptions& options,
                       const Intern& intern, const std::function<void(size_t, size_t)>& tick) {
  return PartBuilder(graph, std::move(ops), options, intern, tick).build();
}

PartSolution PartDag::solve(const std::vector<double>& cost) const {
  const size_t n = states_.size();
  std::vector<double> best(n, kInfinity);
  std::vector<uint32_t> choice(n, UINT32_MAX);
  best[0] = 0;
  for (size_t i = 1; i < n; ++i) {
    for (uint32_t t = first_[i]; t < first_[i + 1]; ++t) {
      const Transition& tr = transitions_[t];
      const double total = best[tr.to] + cost[tr.stage];
      if (total < best[i]) {
        best[i] = total;
        choice[i] = t;
      }
    }
  }
  PartSolution solution;
  solution.cost = best[n - 1];
  if (solution.cost == kInfinity) return solution;
  // From the whole part back: the first ending taken off is the last stage to run.
  for (size_t i = n - 1; i != 0; i = transitions_[choice[i]].to) solution.transitions.push_back(choice[i]);
  std::reverse(solution.transitions.begin(), solution.transitions.end());
  return solution;
}

std::vector<double> PartDag::to_end(const std::vector<double>& cost) const {
  std::vector<double> best(states_.size(), kInfinity);
  best[0] = 0;
  for (size_t i = 1; i < states_.size(); ++i) {
    for (uint32_t t = first_[i]; t < first_[i + 1]; ++t) {
      best[i] = std::min(best[i], best[transitions_[t].to] + cost[transitions_[t].stage]);
    }
  }
  return best;
}

std::vector<double> PartDag::from_start(const std::vector<double>& cost) const {
  // Transitions lead to lower indices: from the whole part (the last index) downwards.
  std::vector<double> best(states_.size(), kInfinity);
  best.back() = 0;
  for (size_t i = states_.size(); i-- > 1;) {
    if (best[i] == kInfinity) continue;
    for (uint32_t t = first_[i]; t < first_[i + 1]; ++t) {
      double& to = best[transitions_[t].to];
      to = std::min(to, best[i] + cost[transitions_[t].stage]);
    }
  }
  return best;
}

Stage PartDag::stage_of(const Transition& t) const {
  return make_stage(ops_, adj_, t.ending, t.partition, partitions_);
}

}  // namespace stagecraft::scheduler
