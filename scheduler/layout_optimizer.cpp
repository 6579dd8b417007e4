#include "scheduler/layout_optimizer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "common/error.h"
#include "common/strings.h"

namespace stagecraft::scheduler {

namespace {

using graph::Layout;
using graph::OpId;
using graph::ValueId;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

bool chooses_layout(const graph::Graph& g, ValueId v) {
  return g.value(v).producer != graph::kNoOp && g.value(v).desc.shape.rank() == 4;
}

std::vector<Layout> input_layouts(const graph::Graph& g, OpId id,
                                  const std::vector<Layout>& value_layouts) {
  std::vector<Layout> result;
  for (ValueId v : g.op(id).inputs) result.push_back(value_layouts[v]);
  return result;
}

// A state: layouts of the live values of a cut (in `live` order), its cost and how it was reached.
struct State {
  std::vector<Layout> layouts;
  double cost = 0;
  int parent = -1;       // index in the previous cut's states
  Layout chosen = Layout::kNCHW;  // output layout chosen by the op that led here
};

}  // namespace

double layout_plan_cost(const graph::Graph& graph, LayoutCostModel& model,
                        const std::vector<graph::Layout>& value_layouts) {
  double total = 0;
  for (const auto& op : graph.ops()) {
    total += model.op_ms(graph, op.id, input_layouts(graph, op.id, value_layouts),
                         value_layouts[op.outputs[0]]);
  }
  return total;
}

LayoutPlan optimize_layouts(const graph::Graph& graph, LayoutCostModel& model,
                            const LayoutOptions& options) {
  if (options.candidates.empty()) throw UsageError("the layout search needs candidate layouts");
  const size_t n = graph.num_ops();
  // Last reader of every value (graph outputs live to the end).
  std::vector<int> last_use(graph.num_values(), -1);
  for (const auto& op : graph.ops())
    for (ValueId v : op.inputs) last_use[v] = std::max(last_use[v], static_cast<int>(op.id));
  for (ValueId v : graph.outputs()) last_use[v] = static_cast<int>(n);

  // Fixed layouts: graph inputs keep theirs, rank-2 values are NC.
  std::vector<Layout> fixed(graph.num_values(), Layout::kNCHW);
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const auto& desc = graph.value(static_cast<ValueId>(v)).desc;
    fixed[v] = desc.shape.rank() == 4 ? desc.layout : Layout::kNC;
  }

  // Reads of every value (one per input slot: each converts on its own), for the dominance
  // test's "remaining readers".
  std::vector<std::vector<OpId>> readers(graph.num_values());
  for (const auto& op : graph.ops())
    for (ValueId v : op.inputs) readers[v].push_back(op.id);
  std::map<std::tuple<ValueId, Layout, Layout>, double> conversions;  // memo of the model's
  const auto conversion = [&](ValueId v, Layout from, Layout to) {
    if (from == to) return 0.0;
    const auto key = std::make_tuple(v, from, to);
    auto it = conversions.find(key);
    if (it == conversions.end()) {
      it = conversions.emplace(key, model.conversion_ms(graph.value(v).desc, from, to)).first;
    }
    return it->second;
  };

  std::vector<ValueId> live;                  // values with a chosen layout crossing the cut
  std::vector<std::vector<State>> cuts(n + 1);
  std::vector<std::vector<ValueId>> live_at(n + 1);
  cuts[0] = {State{}};
  LayoutPlan plan;
  std::vector<Layout> scratch = fixed;
  for (OpId id : graph.topological_order()) {
    const graph::Op& op = graph.op(id);
    const ValueId out = op.outputs[0];
    const bool free_output = chooses_layout(graph, out);
    const std::vector<Layout> outputs = free_output ? options.candidates : std::vector<Layout>{fixed[out]};
    // Next live set: drop values whose last reader is this op, add the output if read later.
    std::vector<ValueId> next_live;
    for (ValueId v : live)
      if (last_use[v] > static_cast<int>(id)) next_live.push_back(v);
    // Every output of the op takes the chosen layout (a split's parts share it).
    std::vector<ValueId> new_live;
    for (ValueId v : op.outputs)
      if (chooses_layout(graph, v) && last_use[v] > static_cast<int>(id)) new_live.push_back(v);
    next_live.insert(next_live.end(), new_live.begin(), new_live.end());

    std::map<std::vector<Layout>, State> best;  // dedupe equal next states
    const auto& states = cuts[id];
    for (size_t si = 0; si < states.size(); ++si) {
      const State& s = states[si];
      for (size_t k = 0; k < live.size(); ++k) scratch[live[k]] = s.layouts[k];
      const std::vector<Layout> ins = input_layouts(graph, id, scratch);
      for (Layout o : outputs) {
        const double c = model.op_ms(graph, id, ins, o);
        if (!(c < kInfinity)) continue;
        State next;
        next.cost = s.cost + c;
        next.parent = static_cast<int>(si);
        next.chosen = o;
        for (ValueId v : next_live) {
          const bool produced_here = graph.value(v).producer == id;
          next.layouts.push_back(produced_here ? o : scratch[v]);
        }
        auto [it, inserted] = best.emplace(next.layouts, next);
        if (!inserted && next.cost < it->second.cost) it->second = next;
      }
    }
    std::vector<State> kept;
    for (auto& [key, state] : best) kept.push_back(std::move(state));
    if (kept.empty()) {
      throw Error(cat("no layout assignment can run op '", op.name, "' (",
                      graph::to_string(op.kind), ") on this backend"));
    }
    plan.states += kept.size();
    if (!options.exhaustive) {
      std::sort(kept.begin(), kept.end(), [](const State& a, const State& b) { return a.cost < b.cost; });
      if (options.dominance) {
        // How many readers each live value has after this op.
        std::vector<double> remaining(next_live.size(), 0);
        for (size_t k = 0; k < next_live.size(); ++k) {
          for (OpId r : readers[next_live[k]]) remaining[k] += r > id ? 1 : 0;
        }
        std::vector<State> undominated;
        for (State& b : kept) {
          bool dominated = false;
          const size_t checks = std::min(undominated.size(), options.dominance_checks);
          for (size_t ai = 0; ai < checks && !dominated; ++ai) {
            const State& a = undominated[ai];
            double bound = a.cost;
            for (size_t k = 0; k < next_live.size() && bound <= b.cost; ++k) {
              if (a.layouts[k] != b.layouts[k]) {
                bound += remaining[k] * conversion(next_live[k], a.layouts[k], b.layouts[k]);
              }
            }
            dominated = bound <= b.cost;
          }
          if (dominated) {
            ++plan.dominated;
          } else {
            undominated.push_back(std::move(b));
          }
        }
        kept = std::move(undominated);
      }
      const double limit = kept.front().cost * options.prune_factor;
      size_t keep = 1;
      while (keep < kept.size() && keep < options.max_states && kept[keep].cost <= limit) ++keep;
      kept.resize(keep);
    }
    cuts[id + 1] = std::move(kept);
    live = std::move(next_live);
  }

  // Read back the cheapest final state.
  const auto& last = cuts[n];
  size_t best_index = 0;
  for (size_t i = 1; i < last.size(); ++i)
    if (last[i].cost < last[best_index].cost) best_index = i;
  plan.predicted_ms = last.empty() ? 0 : last[best_index].cost;
  plan.value_layouts = fixed;
  int index = static_cast<int>(best_index);
  for (size_t id = n; id-- > 0;) {
    const State& s = cuts[id + 1][static_cast<size_t>(index)];
    for (ValueId v : graph.op(static_cast<OpId>(id)).outputs)
      if (chooses_layout(graph, v)) plan.value_layouts[v] = s.chosen;
    index = s.parent;
  }
  return plan;
}

}  // namespace stagecraft::scheduler
