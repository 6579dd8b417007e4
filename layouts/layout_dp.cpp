#include "layouts/layout_dp.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "common/error.h"
#include "common/strings.h"

namespace stagecraft::layouts {

namespace {

using graph::Layout;
using graph::OpId;
using graph::ValueId;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The layout of a value the search does not choose.
Layout pinned_layout(const graph::Graph& g, ValueId v) {
  const graph::TensorDesc& desc = g.value(v).desc;
  return graph::takes_layouts(desc) || desc.shape.rank() != 2 ? desc.layout : Layout::kNC;
}

// Input slots of `op` reading values the search chooses.
std::vector<size_t> chosen_slots(const graph::Graph& g, const graph::Op& op) {
  std::vector<size_t> slots;
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (chooses_layout(g, op.inputs[i])) slots.push_back(i);
  return slots;
}

// Conversions are priced per shape and element type.
std::pair<std::vector<int64_t>, graph::DataType> desc_key(const graph::TensorDesc& desc) {
  return {desc.shape.dims(), desc.dtype};
}

std::string layouts_text(const std::vector<Layout>& layouts) {
  std::string text;
  for (Layout l : layouts) text += cat(text.empty() ? "" : ",", graph::to_string(l));
  return text;
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

bool chooses_layout(const graph::Graph& graph, ValueId v) {
  return graph.value(v).producer != graph::kNoOp && graph::takes_layouts(graph.value(v).desc);
}

std::vector<Layout> uniform_layouts(const graph::Graph& graph, std::vector<Layout> base, Layout layout) {
  for (size_t v = 0; v < graph.num_values(); ++v)
    if (chooses_layout(graph, static_cast<ValueId>(v))) base[v] = layout;
  return base;
}

std::vector<LayoutQuery> LayoutCostTable::queries(const graph::Graph& graph) const {
  std::vector<LayoutQuery> result;
  for (OpId id : graph.topological_order()) {
    const graph::Op& op = graph.op(id);
    const ValueId out = op.outputs[0];
    const std::vector<Layout> outputs =
        chooses_layout(graph, out) ? candidates_ : std::vector<Layout>{pinned_layout(graph, out)};
    std::vector<Layout> inputs;
    for (ValueId v : op.inputs) inputs.push_back(pinned_layout(graph, v));
    const std::vector<size_t> slots = chosen_slots(graph, op);
    for (Layout o : outputs) {
      if (slots.size() >= 2) {
        // Mixed inputs are priced with conversions: only the uniform combinations are measured,
        // in each candidate (the targets of an output the search does not choose).
        for (Layout t : chooses_layout(graph, out) ? std::vector<Layout>{o} : candidates_) {
          for (size_t i : slots) inputs[i] = t;
          result.push_back({id, inputs, o});
        }
        continue;
      }
      if (slots.empty()) {
        result.push_back({id, inputs, o});
        continue;
      }
      for (Layout in : candidates_) {
        inputs[slots[0]] = in;
        result.push_back({id, inputs, o});
      }
    }
  }
  return result;
}

std::vector<ConversionQuery> LayoutCostTable::conversions(const graph::Graph& graph) const {
  std::vector<ConversionQuery> result;
  std::set<std::pair<std::vector<int64_t>, graph::DataType>> seen;
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const auto id = static_cast<ValueId>(v);
    if (!chooses_layout(graph, id) || graph.consumers(id).empty()) continue;
    const graph::TensorDesc& desc = graph.value(id).desc;
    if (!seen.insert(desc_key(desc)).second) continue;
    for (Layout from : candidates_)
      for (Layout to : candidates_)
        if (from != to) result.push_back({desc, from, to});
  }
  return result;
}

void LayoutCostTable::set(const LayoutQuery& query, double ms) {
  ops_[std::make_tuple(query.op, query.inputs, query.output)] = ms;
}

void LayoutCostTable::set(const ConversionQuery& query, double ms) {
  conversions_[std::make_tuple(desc_key(query.desc), query.from, query.to)] = ms;
}

double LayoutCostTable::entry(const graph::Graph& graph, OpId id, const std::vector<Layout>& inputs,
                              Layout output) const {
  const auto it = ops_.find(std::make_tuple(id, inputs, output));
  if (it == ops_.end()) {
    throw Error(cat("the layout cost table has no time for op '", graph.op(id).name, "' reading ",
                    layouts_text(inputs), " and writing ", graph::to_string(output),
                    " (it was filled for other candidates)"));
  }
  return it->second;
}

double LayoutCostTable::op_ms(const graph::Graph& graph, OpId id, const std::vector<Layout>& inputs,
                              Layout output) {
  const graph::Op& op = graph.op(id);
  const std::vector<size_t> slots = chosen_slots(graph, op);
  if (slots.size() < 2) return entry(graph, id, inputs, output);
  const bool chosen_output = chooses_layout(graph, op.outputs[0]);
  double best = kInfinity;
  for (Layout t : chosen_output ? std::vector<Layout>{output} : candidates_) {
    std::vector<Layout> uniform = inputs;
    double total = 0;
    for (size_t i : slots) {
      uniform[i] = t;
      total += conversion_ms(graph.value(op.inputs[i]).desc, inputs[i], t);
    }
    best = std::min(best, total + entry(graph, id, uniform, output));
  }
  return best;
}

double LayoutCostTable::conversion_ms(const graph::TensorDesc& desc, Layout from, Layout to) {
  if (from == to) return 0;
  const auto it = conversions_.find(std::make_tuple(desc_key(desc), from, to));
  return it == conversions_.end() ? kInfinity : it->second;
}

double layout_plan_cost(const graph::Graph& graph, LayoutCostModel& model,
                        const std::vector<graph::Layout>& value_layouts) {
  double total = 0;
  for (const auto& op : graph.ops()) {
    total += model.op_ms(graph, op.id, input_layouts(graph, op.id, value_layouts),
                         value_layouts[op.outputs[0]]);
  }
  return total;
}

namespace {

// Drops the states of `kept` (sorted by cost) that a cheaper state kept before them dominates:
// its cost plus converting each live value where they differ, once per remaining reader, is at
// most theirs (each compared with at most `checks` cheaper ones). Returns how many were dropped.
template <class Conversion>
size_t drop_dominated(std::vector<State>& kept, const std::vector<ValueId>& live,
                      const std::vector<double>& remaining, size_t checks, Conversion&& conversion) {
  std::vector<State> undominated;
  size_t dropped = 0;
  for (State& b : kept) {
    bool dominated = false;
    const size_t compared = std::min(undominated.size(), checks);
    for (size_t ai = 0; ai < compared && !dominated; ++ai) {
      const State& a = undominated[ai];
      double bound = a.cost;
      for (size_t k = 0; k < live.size() && bound <= b.cost; ++k) {
        if (a.layouts[k] != b.layouts[k]) bound += remaining[k] * conversion(live[k], a.layouts[k], b.layouts[k]);
      }
      dominated = bound <= b.cost;
    }
    if (dominated) {
      ++dropped;
    } else {
      undominated.push_back(std::move(b));
    }
  }
  kept = std::move(undominated);
  return dropped;
}

// The layouts of the cheapest final state, read back through the parent links (`pinned` where
// the search chooses none); its cost goes to `cost`.
std::vector<Layout> read_back(const graph::Graph& graph, const std::vector<std::vector<State>>& cuts,
                              const std::vector<Layout>& pinned, double* cost) {
  const size_t n = graph.num_ops();
  const auto& last = cuts[n];
  size_t best_index = 0;
  for (size_t i = 1; i < last.size(); ++i)
    if (last[i].cost < last[best_index].cost) best_index = i;
  *cost = last.empty() ? 0 : last[best_index].cost;
  std::vector<Layout> layouts = pinned;
  int index = static_cast<int>(best_index);
  for (size_t id = n; id-- > 0;) {
    const State& s = cuts[id + 1][static_cast<size_t>(index)];
    for (ValueId v : graph.op(static_cast<OpId>(id)).outputs)
      if (chooses_layout(graph, v)) layouts[v] = s.chosen;
    index = s.parent;
  }
  return layouts;
}

}  // namespace

LayoutPlan optimize_layouts(const graph::Graph& graph, LayoutCostModel& model,
                            const LayoutDpOptions& options) {
  if (options.candidates.empty()) throw UsageError("the layout search needs candidate layouts");
  const size_t n = graph.num_ops();
  // Last reader of every value (graph outputs live to the end).
  std::vector<int> last_use(graph.num_values(), -1);
  for (const auto& op : graph.ops())
    for (ValueId v : op.inputs) last_use[v] = std::max(last_use[v], static_cast<int>(op.id));
  for (ValueId v : graph.outputs()) last_use[v] = static_cast<int>(n);

  // Layouts not chosen: graph inputs keep theirs, values of other ranks are NC.
  std::vector<Layout> pinned(graph.num_values(), Layout::kNCHW);
  for (size_t v = 0; v < graph.num_values(); ++v) pinned[v] = pinned_layout(graph, static_cast<ValueId>(v));

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
  std::vector<Layout> scratch = pinned;
  for (OpId id : graph.topological_order()) {
    const graph::Op& op = graph.op(id);
    const ValueId out = op.outputs[0];
    const bool free_output = chooses_layout(graph, out);
    const std::vector<Layout> outputs = free_output ? options.candidates : std::vector<Layout>{pinned[out]};
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
        plan.dominated += drop_dominated(kept, next_live, remaining, options.dominance_checks, conversion);
      }
      const double limit = kept.front().cost * options.prune_factor;
      size_t keep = 1;
      while (keep < kept.size() && keep < options.max_states && kept[keep].cost <= limit) ++keep;
      kept.resize(keep);
    }
    cuts[id + 1] = std::move(kept);
    live = std::move(next_live);
  }

  plan.value_layouts = read_back(graph, cuts, pinned, &plan.predicted_ms);
  return plan;
}

}  // namespace stagecraft::layouts
