// Schedule search by dynamic programming over ending subsets (after IOS, MLSys 2021).
//
// Inputs: a graph, a cost model, SearchOptions. Output: a schedule minimising the sum of stage
// latencies within the search space. For each block (graph/blocks.h), split into parts when wide,
// the DP computes cost[S] = min over endings E of S (E non-empty, no edge from E to S - E) of
// cost[S - E] + latency(stage of E), memoised on S as a 64-bit set; S ranges over the down-sets
// of the part. A concurrent stage runs the weakly connected components of E as groups (pruned:
// at most r ops per group, at most s groups; unpruned: every partition of the components into
// groups). A merge stage is a set of >= 2 mergeable convolutions among the sinks of S.
// Endings are enumerated by a depth-first walk over S in reverse topological order in which an op
// may join E only when all its successors in S already did; when pruned only ops with fewer than r
// descendants in S are candidates, and a component is abandoned as soon as it exceeds r ops.
// Complexity: O(sum over states of endings enumerated) stage lookups; latencies are cached per
// ending set and per canonical stage key, so the cost model sees each distinct stage once.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <unordered_map>

#include "common/strings.h"
#include "graph/blocks.h"
#include "graph/poset.h"
#include "scheduler/dp.h"
#include "scheduler/stage_coster.h"

namespace stagecraft::scheduler {

namespace {

using Mask = uint64_t;
using Clock = std::chrono::steady_clock;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kMaxMaskOps = 64;
constexpr double kProgressInterval = 0.2;  // seconds between progress reports

Mask bit(int i) { return Mask{1} << i; }

// Reports progress at most every kProgressInterval seconds.
class Ticker {
 public:
  Ticker(const SearchOptions& options, SearchStats& stats, size_t num_blocks)
      : options_(options), stats_(stats), start_(Clock::now()), num_blocks_(num_blocks) {}

  void tick(bool force = false) {
    if (!options_.on_progress) return;
    // The clock is read every 16 calls: with a measured cost model a call may take milliseconds,
    // and the callback is also where a caller notices an interrupt.
    if (!force && (++calls_ & 15) != 0) return;
    const double now = std::chrono::duration<double>(Clock::now() - start_).count();
    if (!force && now - last_ < kProgressInterval) return;
    last_ = now;
    options_.on_progress(SearchProgress{block_, num_blocks_, stats_.states, stats_.transitions, now});
  }
  void block_done() {
    ++block_;
    tick(true);
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  const SearchOptions& options_;
  SearchStats& stats_;
  Clock::time_point start_;
  size_t num_blocks_;
  size_t block_ = 0;
  size_t calls_ = 0;
  double last_ = -1;
};

// Masks of a part: local index i is ops[i]; ops ascending, so local order is topological.
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

  // The weakly connected component of `seed` inside `within`.
  Mask component(Mask seed, Mask within) const {
    Mask comp = seed;
    for (;;) {
      Mask next = comp;
      for (Mask rest = comp; rest; rest &= rest - 1) next |= adj[std::countr_zero(rest)] & within;
      if (next == comp) return comp;
      comp = next;
    }
  }

  std::vector<Mask> components(Mask set) const {
    std::vector<Mask> result;
    while (set) {
      const Mask comp = component(set & (~set + 1), set);
      result.push_back(comp);
      set &= ~comp;
    }
    return result;
  }

  std::vector<OpId> ops_of(Mask set) const {
    std::vector<OpId> result;
    for (; set; set &= set - 1) result.push_back(ops[std::countr_zero(set)]);
    return result;
  }
};

// The DP over one part.
class PartSearch {
 public:
  PartSearch(const graph::Graph& graph, std::vector<OpId> ops, const SearchOptions& options,
             StageCoster& coster, SearchStats& stats, Ticker& ticker)
      : part_(graph, std::move(ops)), options_(options), coster_(coster), stats_(stats),
        ticker_(ticker) {}

  std::vector<Stage> run() {
    const int m = static_cast<int>(part_.ops.size());
    const Mask full = m == kMaxMaskOps ? ~Mask{0} : bit(m) - 1;
    solve(full);
    std::vector<Stage> stages;
    for (Mask s = full; s;) {
      const Entry& e = memo_.at(s);
      stages.push_back(stage_of(e));
      s &= ~e.ending;
    }
    std::reverse(stages.begin(), stages.end());
    return stages;
  }

 private:
  struct Entry {
    double cost = kInfinity;
    double stage_ms = 0;
    Mask ending = 0;
    bool merge = false;
    std::vector<Mask> groups;  // concurrent: group masks (empty: one group per component)
  };

  bool pruned() const { return options_.pruned; }
  bool allow_concurrent() const { return options_.mode != DpMode::kMerge; }
  bool allow_merge() const { return options_.mode != DpMode::kConcurrent; }

  Stage stage_of(const Entry& e) const {
    Stage stage;
    if (e.merge) {
      stage = Stage::merge(part_.ops_of(e.ending));
    } else {
      std::vector<std::vector<OpId>> groups;
      for (Mask g : e.groups.empty() ? part_.components(e.ending) : e.groups) {
        groups.push_back(part_.ops_of(g));
      }
      stage = Stage::concurrent(std::move(groups));
    }
    stage.predicted_ms = e.stage_ms;
    return stage;
  }

  static Entry probe(Mask ending, bool merge, std::vector<Mask> groups) {
    Entry e;
    e.ending = ending;
    e.merge = merge;
    e.groups = std::move(groups);
    return e;
  }

  double merge_cost(Mask convs) {
    auto it = merge_cost_.find(convs);
    if (it != merge_cost_.end()) return it->second;
    const double ms = coster_.latency(stage_of(probe(convs, true, {})));
    merge_cost_.emplace(convs, ms);
    return ms;
  }

  void consider(Entry& best, Mask s, Mask ending, bool merge, double stage_ms,
                std::vector<Mask> groups = {}) {
    ++stats_.transitions;
    ticker_.tick();
    const double total = solve(s & ~ending) + stage_ms;
    if (total < best.cost) {
      best.cost = total;
      best.stage_ms = stage_ms;
      best.ending = ending;
      best.merge = merge;
      best.groups = std::move(groups);
    }
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

  void visit_ending(Entry& best, Mask s, Mask ending) {
    if (pruned()) {
      // Cached per ending: its latency, or infinity when it has more than s components.
      auto it = concurrent_cost_.find(ending);
      double ms;
      if (it != concurrent_cost_.end()) {
        ms = it->second;
      } else {
        const bool too_many =
            static_cast<int>(part_.components(ending).size()) > options_.max_num_groups;
        ms = too_many ? kInfinity : coster_.latency(stage_of(probe(ending, false, {})));
        concurrent_cost_.emplace(ending, ms);
      }
      if (ms < kInfinity) consider(best, s, ending, false, ms);
      return;
    }
    std::vector<Mask> groups;
    for_each_partition(part_.components(ending), groups, 0,
                       [&](const std::vector<Mask>& partition) {
                         const double ms = coster_.latency(stage_of(probe(ending, false, partition)));
                         consider(best, s, ending, false, ms, partition);
                       });
  }

  // Depth-first enumeration of the endings of `s` (see the file comment).
  void endings(Entry& best, Mask s, const int* candidates, int count, int k, Mask ending) {
    if (k == count) {
      if (ending) visit_ending(best, s, ending);
      return;
    }
    const int u = candidates[k];
    endings(best, s, candidates, count, k + 1, ending);
    if ((part_.succ[u] & s & ~ending) != 0) return;  // a successor in s stays: u cannot end
    const Mask with = ending | bit(u);
    if (pruned() &&
        std::popcount(part_.component(bit(u), with)) > options_.max_group_size) {
      return;
    }
    endings(best, s, candidates, count, k + 1, with);
  }

  void merges(Entry& best, Mask s, Mask sinks) {
    const Mask pool = sinks & part_.mergeable;
    if (std::popcount(pool) < 2) return;
    // Cliques of pairwise-mergeable sinks, each set once (ascending choice).
    std::function<void(Mask, Mask)> grow = [&](Mask chosen, Mask allowed) {
      if (std::popcount(chosen) >= 2) consider(best, s, chosen, true, merge_cost(chosen));
      for (Mask rest = allowed; rest; rest &= rest - 1) {
        const int u = std::countr_zero(rest);
        const Mask higher = rest & ~bit(u) & ~(bit(u) - 1);
        grow(chosen | bit(u), higher & part_.merge_ok[u]);
      }
    };
    grow(0, pool);
  }

  double solve(Mask s) {
    if (s == 0) return 0;
    auto found = memo_.find(s);
    if (found != memo_.end()) return found->second.cost;
    ++stats_.states;
    Entry best;
    Mask sinks = 0;
    int candidates[kMaxMaskOps];
    int count = 0;
    for (Mask rest = s; rest;) {
      const int u = kMaxMaskOps - 1 - std::countl_zero(rest);  // descending: reverse topological
      rest &= ~bit(u);
      if ((part_.succ[u] & s) == 0) sinks |= bit(u);
      if (!pruned() || std::popcount(part_.desc[u] & s) < options_.max_group_size) {
        candidates[count++] = u;
      }
    }
    if (allow_concurrent()) {
      endings(best, s, candidates, count, 0, 0);
    } else {
      for (Mask rest = sinks; rest; rest &= rest - 1) {
        const Mask one = rest & (~rest + 1);
        visit_ending(best, s, one);
      }
    }
    if (allow_merge()) merges(best, s, sinks);
    const double cost = best.cost;
    memo_.emplace(s, std::move(best));
    return cost;
  }

  PartGraph part_;
  const SearchOptions& options_;
  StageCoster& coster_;
  SearchStats& stats_;
  Ticker& ticker_;
  std::unordered_map<Mask, Entry> memo_;
  std::unordered_map<Mask, double> concurrent_cost_;
  std::unordered_map<Mask, double> merge_cost_;
};

class DpScheduler : public Scheduler {
 public:
  explicit DpScheduler(SearchOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "dp"; }

  Schedule schedule(const graph::Graph& graph, CostModel& model, SearchStats* stats_out) override {
    SearchStats stats;
    const auto blocks = graph::partition_blocks(graph);
    stats.blocks = blocks.size();
    Ticker ticker(options_, stats, blocks.size());
    StageCoster coster(graph, model);
    Schedule schedule;
    for (size_t b = 0; b < blocks.size(); ++b) {
      std::string note;
      const auto parts = split_block(graph, blocks[b].ops, options_, &note);
      if (!note.empty()) stats.splits.push_back(cat("block ", b, " ", note));
      for (const auto& part : parts) {
        ++stats.parts;
        PartSearch search(graph, part, options_, coster, stats, ticker);
        for (Stage& stage : search.run()) schedule.stages.push_back(std::move(stage));
      }
      ticker.block_done();
    }
    fill_meta(graph, model, options_, schedule);
    stats.stage_keys = coster.distinct_keys();
    stats.cost_queries = coster.queries();
    stats.seconds = ticker.elapsed();
    schedule.meta.search_seconds = stats.seconds;
    if (stats_out) *stats_out = stats;
    return schedule;
  }

 private:
  SearchOptions options_;
};

// Number of (kept, ending) choices on one chain of length len: the kept prefix b and ending
// suffix e with e <= r when pruned.
double chain_choices(int len, int r, bool pruned) {
  double total = 0;
  for (int b = 0; b <= len; ++b) total += (pruned ? std::min(b, r) : b) + 1;
  return total;
}

}  // namespace

double estimate_transitions(const graph::Graph& graph, const std::vector<OpId>& ops,
                            const SearchOptions& options) {
  graph::SubgraphView view(graph, ops);
  graph::Adjacency succ(view.size());
  for (size_t i = 0; i < view.size(); ++i)
    for (OpId s : view.successors(view.ops()[i])) succ[i].push_back(view.local_index(s));
  double estimate = 1;
  for (const auto& chain : graph::min_chain_cover(succ, /*transitive=*/true)) {
    estimate *= chain_choices(static_cast<int>(chain.size()), options.max_group_size,
                              options.pruned);
  }
  return estimate;
}

std::vector<OpId> level_order(const graph::Graph& graph, const std::vector<OpId>& block) {
  // Level = longest path from the block's entry; ops of one level are mutually independent.
  graph::SubgraphView view(graph, block);
  std::vector<int> level(block.size(), 0);
  for (size_t i = 0; i < block.size(); ++i) {
    for (OpId p : view.predecessors(block[i])) {
      level[i] = std::max(level[i], level[view.local_index(p)] + 1);
    }
  }
  std::vector<OpId> order = block;
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) {
    return level[view.local_index(a)] < level[view.local_index(b)];
  });
  return order;
}

std::vector<std::vector<OpId>> split_block(const graph::Graph& graph,
                                           const std::vector<OpId>& block,
                                           const SearchOptions& options, std::string* note) {
  const int max_ops = std::clamp(options.max_part_ops, 1, kMaxMaskOps);
  // Parts are consecutive runs of a topological order that keeps independent ops together (by
  // level), so that a part spans the parallel branches and the DP can run them concurrently.
  const std::vector<OpId> order = level_order(graph, block);
  auto segment = [&](size_t begin, size_t end) {
    return std::vector<OpId>(order.begin() + static_cast<long>(begin),
                             order.begin() + static_cast<long>(end));
  };
  auto fits = [&](size_t begin, size_t end) {
    if (static_cast<int>(end - begin) > max_ops) return false;
    return end - begin <= 1 ||
           estimate_transitions(graph, segment(begin, end), options) <= options.max_part_transitions;
  };
  if (fits(0, order.size())) return {block};

  // Tensors alive across a cut before position c: produced before c, read at or after c.
  std::vector<int> position(graph.num_ops(), -1);
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  auto crossing = [&](size_t c) {
    int live = 0;
    for (size_t i = 0; i < c; ++i) {
      for (graph::ValueId v : graph.op(order[i]).outputs) {
        for (OpId reader : graph.consumers(v)) {
          if (position[reader] >= static_cast<int>(c)) {
            ++live;
            break;
          }
        }
      }
    }
    return live;
  };

  std::vector<std::vector<OpId>> parts;
  std::vector<std::string> sizes, cuts;
  size_t start = 0;
  while (start < order.size()) {
    size_t end = start + 1;
    while (end < order.size() && fits(start, end + 1)) ++end;
    size_t cut = end;
    if (end < order.size()) {
      // Among the later half of the admissible cuts, take the one fewest tensors cross.
      int best = std::numeric_limits<int>::max();
      for (size_t c = end; c >= start + std::max<size_t>(1, (end - start + 1) / 2); --c) {
        const int live = crossing(c);
        if (live < best) {
          best = live;
          cut = c;
        }
        if (c == start + 1) break;
      }
      cuts.push_back(cat(best));
    }
    std::vector<OpId> part = segment(start, cut);
    std::sort(part.begin(), part.end());
    parts.push_back(std::move(part));
    sizes.push_back(cat(cut - start));
    start = cut;
  }
  if (note) {
    *note = cat("(", block.size(), " ops) split into ", parts.size(), " parts of ",
                join(sizes, "/"), " ops; the cuts cross ", join(cuts, "/"),
                " live tensors, and no stage spans two parts");
  }
  return parts;
}

std::unique_ptr<Scheduler> make_dp_scheduler(const SearchOptions& options) {
  return std::make_unique<DpScheduler>(options);
}

}  // namespace stagecraft::scheduler
