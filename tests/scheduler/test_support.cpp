#include "test_support.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>

#include "common/hash.h"
#include "common/strings.h"
#include "graph/blocks.h"
#include "networks/builder.h"
#include "scheduler/stage_key.h"

namespace stagecraft::scheduler::testing {

Schedule search(const graph::Graph& g, CostModel& model, const SearchOptions& options,
                SearchStats* stats) {
  Schedule s = make_scheduler(options)->schedule(g, model, stats);
  validate(g, s);
  return s;
}

graph::Graph random_dag(Rng& rng, int num_ops, int window) {
  constexpr int64_t kChannels = 8;
  networks::NetBuilder b("random", 1, kChannels, 8, 8);
  std::vector<graph::ValueId> values{b.input()};
  std::vector<int> readers(1, 0);
  for (int i = 0; i < num_ops; ++i) {
    const int lo = std::max(0, static_cast<int>(values.size()) - window);
    auto pick = [&] { return lo + rng.below(static_cast<int>(values.size()) - lo); };
    const int kind = rng.below(10);
    graph::ValueId out;
    int a = pick();
    if (kind < 6) {
      const int64_t k = rng.below(2) == 0 ? 1 : 3;
      out = b.conv(values[a], networks::square_conv(kChannels, k, 1, k / 2), stagecraft::cat("c", i));
    } else if (kind < 8 || values.size() < 3) {
      out = b.relu(values[a], stagecraft::cat("r", i));
    } else {
      int c = pick();
      if (c == a) c = (a + 1 - lo) % (static_cast<int>(values.size()) - lo) + lo;
      out = b.add({values[a], values[c]}, stagecraft::cat("a", i));
      ++readers[c];
    }
    ++readers[a];
    values.push_back(out);
    readers.push_back(0);
  }
  std::vector<graph::ValueId> outputs;
  for (size_t v = 1; v < values.size(); ++v)
    if (readers[v] == 0) outputs.push_back(values[v]);
  return std::move(b).finish(outputs);
}

uint64_t SaltedCostModel::salted_hash(const std::string& key) const {
  Fnv1a hasher;
  hasher.add_int(salt_);
  hasher.add_string(key);
  return hasher.digest();
}

double RandomKeyCostModel::stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& /*layouts*/,
                                            const Stage& stage) {
  return 0.05 + 0.95 * static_cast<double>(salted_hash(stage_key(graph, stage)) >> 11) * 0x1.0p-53;
}

double RandomOpCostModel::op_ms(const graph::Graph& graph, graph::OpId id) const {
  // Ops that compute the same thing get the same time, as the canonical stage keys assume.
  const uint64_t hash = salted_hash(stage_key(graph, Stage::concurrent({{id}})));
  return 0.1 + static_cast<double>(hash % 1000) / 1000.0;
}

double RandomOpCostModel::stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& /*layouts*/,
                                           const Stage& stage) {
  if (stage.kind == StageKind::kMerge) {
    double total = 0;
    for (graph::OpId id : stage.ops()) total += op_ms(graph, id);
    return 0.6 * total;
  }
  double longest = 0, total = 0;
  for (const auto& group : stage.groups) {
    double t = 0;
    for (graph::OpId id : group) t += op_ms(graph, id);
    longest = std::max(longest, t);
    total += t;
  }
  return std::max(longest, total / 2) + 0.1 * static_cast<double>(stage.groups.size() - 1);
}

namespace {

using Mask = uint32_t;

struct Enumerator {
  const graph::Graph& graph;
  CostModel& model;
  DpMode mode;
  bool memoise;
  std::vector<Mask> preds;     // direct predecessors of each op
  std::vector<Mask> neighbours;
  std::vector<int> block_of;
  std::map<Mask, double> memo;
  size_t schedules = 0;

  std::vector<graph::OpId> ops_of(Mask m) const {
    std::vector<graph::OpId> ids;
    for (int i = 0; i < 32; ++i)
      if (m >> i & 1) ids.push_back(i);
    return ids;
  }

  std::vector<Mask> components(Mask set) const {
    std::vector<Mask> result;
    while (set) {
      Mask comp = set & (~set + 1);
      for (Mask prev = 0; prev != comp;) {
        prev = comp;
        for (int i = 0; i < 32; ++i)
          if (comp >> i & 1) comp |= neighbours[i] & set;
      }
      result.push_back(comp);
      set &= ~comp;
    }
    return result;
  }

  double stage_cost(const Stage& stage) { return model.stage_latency_ms(graph, {}, stage); }

  // Every partition of `comps` into groups.
  void partitions(const std::vector<Mask>& comps, size_t i, std::vector<Mask>& groups,
                  const std::function<void()>& visit) {
    if (i == comps.size()) {
      visit();
      return;
    }
    for (size_t g = 0; g < groups.size(); ++g) {  // indices: recursion may reallocate
      groups[g] |= comps[i];
      partitions(comps, i + 1, groups, visit);
      groups[g] &= ~comps[i];
    }
    groups.push_back(comps[i]);
    partitions(comps, i + 1, groups, visit);
    groups.pop_back();
  }

  // Best cost of scheduling `remaining` after `done`; stages are chosen from the front.
  double best(Mask done, Mask remaining) {
    if (remaining == 0) {
      ++schedules;
      return 0;
    }
    if (memoise) {
      auto it = memo.find(remaining);
      if (it != memo.end()) return it->second;
    }
    // The current block is the lowest block index with ops remaining; stages stay inside it.
    int block = std::numeric_limits<int>::max();
    for (graph::OpId id : ops_of(remaining)) block = std::min(block, block_of[id]);
    Mask candidates = 0;
    for (graph::OpId id : ops_of(remaining))
      if (block_of[id] == block) candidates |= Mask{1} << id;
    double result = std::numeric_limits<double>::infinity();
    // Every non-empty subset of the block's remaining ops that is closed under predecessors.
    for (Mask b = candidates; b; b = (b - 1) & candidates) {
      bool ready = true;
      for (graph::OpId id : ops_of(b)) ready = ready && (preds[id] & ~(done | b)) == 0;
      if (!ready) continue;
      if (mode != DpMode::kMerge) {
        std::vector<Mask> groups;
        partitions(components(b), 0, groups, [&] {
          std::vector<std::vector<graph::OpId>> ids;
          for (Mask g : groups) ids.push_back(ops_of(g));
          const double cost = stage_cost(Stage::concurrent(ids)) + best(done | b, remaining & ~b);
          result = std::min(result, cost);
        });
      } else if (std::popcount(b) == 1) {
        result = std::min(result, stage_cost(Stage::concurrent({ops_of(b)})) +
                                      best(done | b, remaining & ~b));
      }
      if (mode != DpMode::kConcurrent && std::popcount(b) >= 2 && can_merge(graph, ops_of(b))) {
        // Merged convolutions all read one value, so none waits for another.
        result = std::min(result, stage_cost(Stage::merge(ops_of(b))) +
                                      best(done | b, remaining & ~b));
      }
    }
    if (memoise) memo[remaining] = result;
    return result;
  }
};

}  // namespace

double brute_force_best(const graph::Graph& graph, CostModel& model, DpMode mode, bool memoise,
                        size_t* schedules_seen) {
  const int n = static_cast<int>(graph.num_ops());
  Enumerator e{graph, model, mode, memoise, {}, {}, {}, {}, 0};
  e.preds.assign(n, 0);
  e.neighbours.assign(n, 0);
  e.block_of.assign(n, 0);
  for (graph::OpId id = 0; id < n; ++id) {
    for (graph::OpId p : graph.predecessors(id)) {
      e.preds[id] |= Mask{1} << p;
      e.neighbours[id] |= Mask{1} << p;
      e.neighbours[p] |= Mask{1} << id;
    }
  }
  const auto blocks = graph::partition_blocks(graph);
  for (size_t b = 0; b < blocks.size(); ++b)
    for (graph::OpId id : blocks[b].ops) e.block_of[id] = static_cast<int>(b);
  const double result = e.best(0, n == 32 ? ~Mask{0} : (Mask{1} << n) - 1);
  if (schedules_seen) *schedules_seen = e.schedules;
  return result;
}

}  // namespace stagecraft::scheduler::testing
