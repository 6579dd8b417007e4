#pragma once
/// Per-tensor layout selection by dynamic programming over topological cuts.
///
/// Inputs: a graph, candidate layouts for rank-4 op outputs, a LayoutCostModel. Output: a layout
/// per value minimising the sum of op costs, where an op's cost depends on the layouts of its
/// inputs and of its output (the cost model prices any conversion the kernel needs). Ops are
/// visited in topological order; the cut after op i is crossed by the values still read later;
/// a state is the tuple of their layouts. Transition: choose op i+1's output layout and pay its
/// cost given the state's input layouts. Pruning: drop a state dominated by a cheaper one (state A
/// dominates B when A's cost plus converting each value where they differ, once for each of its
/// remaining readers, is at most B's cost: every continuation of B is then open to A for no more,
/// exact when converting and then reading costs at least reading directly), drop states costlier
/// than `prune_factor` × the best state of the cut, and keep at most `max_states` (the cheapest);
/// `exhaustive` keeps every state (the optimum). The result is read back through predecessor links.
/// Complexity: O(ops × states × candidates) cost queries (cached by the model).
///
/// Example:
///   LayoutDpOptions options;
///   options.candidates = {Layout::kNCHW, Layout::kNHWC, Layout::kNChw16c};
///   LayoutPlan plan = optimize_layouts(graph, model, options);
///   plan_options.value_layouts = plan.value_layouts;

#include <limits>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace stagecraft::layouts {

/// Costs the layout DP consumes (LayoutCostTable below, filled by layout_costs.h).
class LayoutCostModel {
 public:
  virtual ~LayoutCostModel() = default;
  /// Time of op `id` with its inputs in `inputs` layouts and its output in `output` (ms),
  /// conversions the kernel needs included; infinity when it cannot run.
  virtual double op_ms(const graph::Graph& graph, graph::OpId id,
                       const std::vector<graph::Layout>& inputs, graph::Layout output) = 0;
  /// Time of converting a tensor of `desc` from layout `from` to `to` (ms), for dominance
  /// pruning; infinity (the default) when unknown, which disables it.
  virtual double conversion_ms(const graph::TensorDesc& desc, graph::Layout from, graph::Layout to) {
    (void)desc;
    return from == to ? 0.0 : std::numeric_limits<double>::infinity();
  }
};

/// One op/layout combination the DP prices: op `op` reading its inputs in `inputs` (one per
/// input slot) and writing its outputs in `output`.
struct LayoutQuery {
  graph::OpId op = 0;
  std::vector<graph::Layout> inputs;
  graph::Layout output = graph::Layout::kNCHW;
};

/// A conversion of tensors shaped like `desc` from layout `from` to `to`.
struct ConversionQuery {
  graph::TensorDesc desc;
  graph::Layout from = graph::Layout::kNCHW;
  graph::Layout to = graph::Layout::kNCHW;
};

/// Whether the layout search chooses value v's layout: rank-4 op outputs (graph inputs keep
/// theirs, values of other ranks are kNC).
bool chooses_layout(const graph::Graph& graph, graph::ValueId v);

/// `base` with every value the search chooses set to `layout` (a uniform assignment).
std::vector<graph::Layout> uniform_layouts(const graph::Graph& graph, std::vector<graph::Layout> base,
                                           graph::Layout layout);

/// Op and conversion latencies measured ahead of the DP (layouts/layout_costs.h fills it from
/// the queries below), priced by one rule: an op whose output the search chooses and that reads
/// two or more values the search chooses costs its time with all of those in the output's layout
/// plus one conversion per input that is not (converting, then running in one layout, is what
/// the plan does for mixed inputs); any other op costs its measured time for exactly those
/// layouts. Conversions also serve dominance pruning. A combination that was not measured is an
/// internal error; one measured as not runnable is infinity.
class LayoutCostTable : public LayoutCostModel {
 public:
  /// An empty table for a search over `candidates` (LayoutDpOptions::candidates).
  explicit LayoutCostTable(std::vector<graph::Layout> candidates) : candidates_(std::move(candidates)) {}

  /// The op/layout combinations op_ms() reads for `graph`, op by op in topological order; each
  /// op's combinations with the first candidate output first.
  std::vector<LayoutQuery> queries(const graph::Graph& graph) const;
  /// The conversions conversion_ms() is asked for: every ordered pair of candidates for each
  /// distinct shape and type of a chosen value that is read.
  std::vector<ConversionQuery> conversions(const graph::Graph& graph) const;

  /// Records a measured time (ms; infinity: cannot run).
  void set(const LayoutQuery& query, double ms);
  void set(const ConversionQuery& query, double ms);

  double op_ms(const graph::Graph& graph, graph::OpId id, const std::vector<graph::Layout>& inputs,
               graph::Layout output) override;
  double conversion_ms(const graph::TensorDesc& desc, graph::Layout from, graph::Layout to) override;

 private:
  double entry(const graph::Graph& graph, graph::OpId id, const std::vector<graph::Layout>& inputs,
               graph::Layout output) const;

  std::vector<graph::Layout> candidates_;
  std::map<std::tuple<graph::OpId, std::vector<graph::Layout>, graph::Layout>, double> ops_;
  std::map<std::tuple<std::pair<std::vector<int64_t>, graph::DataType>, graph::Layout, graph::Layout>, double>
      conversions_;
};

/// Settings of the layout DP (the candidates and the pruning); the settings of the whole
/// `--layout auto` search, which runs it, are layouts::LayoutSearchOptions.
struct LayoutDpOptions {
  std::vector<graph::Layout> candidates;  ///< layouts a rank-4 op output may take
  double prune_factor = 1.25;             ///< drop states costlier than this × the best
  size_t max_states = 1024;               ///< keep at most this many states per cut
  bool dominance = true;                  ///< drop dominated states (see the file comment)
  size_t dominance_checks = 64;           ///< compare each state with at most this many cheaper ones
  bool exhaustive = false;                ///< keep every state (small graphs)
};

/// The chosen layouts.
struct LayoutPlan {
  std::vector<graph::Layout> value_layouts;  ///< per value id (graph inputs keep theirs)
  double predicted_ms = 0;                   ///< sum of op costs
  size_t states = 0;                         ///< states explored
  size_t dominated = 0;                      ///< states dropped as dominated
};

/// Chooses a layout per value (see the file comment). Throws Error when no assignment can run.
LayoutPlan optimize_layouts(const graph::Graph& graph, LayoutCostModel& model,
                            const LayoutDpOptions& options);

/// The cost of a given assignment under the model (the uniform options, tests).
double layout_plan_cost(const graph::Graph& graph, LayoutCostModel& model,
                        const std::vector<graph::Layout>& value_layouts);

}  // namespace stagecraft::layouts
