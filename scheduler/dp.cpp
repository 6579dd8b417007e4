// Schedule search by dynamic programming over ending subsets (after IOS, MLSys 2021), bounded and
// anytime on cost models that measure.
//
// Inputs: a graph, a cost model, SearchOptions. Output: a schedule minimising the sum of stage
// latencies within the search space. The graph is cut into blocks (graph/blocks.h) and wide
// blocks into parts; for each part the DP computes cost[S] = min over endings E of S (E non-empty,
// no edge from E to S - E) of cost[S - E] + latency(stage of E) over the down-sets S of the part
// (part_dag.h enumerates them once; candidate stages are shared by canonical key across parts, so
// repeated cells cost one measurement per distinct stage).
//
// A cost model that measures is asked as little as possible (SearchBudget): every single op is
// measured first (the sequential schedule is then always complete); every other candidate is
// costed by an optimistic estimate from its ops' latencies (candidates.h); each round solves every
// part on known latencies and estimates, measures the unknown stages on the paths chosen (largest
// estimated gain first) and learns from them, until the chosen paths are all known (converged) or
// the budget ends. One-group chains cost the sum of their ops, and stages of tiny ops are judged
// from their ops, without measuring. Exhaustive: then the estimates are lowered to half and to
// zero, which measures every stage that could still win (the unbounded search's optimum).
// The result is the best schedule whose stages are all known (or chains and tiny stages costed
// from their ops). Cheap models know every latency: the first round is the exact DP.
// Complexity: enumeration O(sum over states of endings enumerated) per part; each round
// O(transitions) plus its measurements.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "common/strings.h"
#include "graph/blocks.h"
#include "graph/poset.h"
#include "scheduler/candidates.h"
#include "scheduler/dp.h"
#include "scheduler/part_dag.h"

namespace stagecraft::scheduler {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kProgressInterval = 0.2;  // seconds between progress reports
// Exhaustive search: after converging on the estimates, converge again with every estimate
// scaled by these factors; at 0 an unknown stage could cost nothing, so converging proves the
// optimum over all candidates.
constexpr double kExhaustiveScales[] = {0.5, 0.0};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The DP search over all parts of a graph.
class DpSearch {
 public:
  DpSearch(const graph::Graph& graph, const graph::LayoutAssignment& layouts, CostModel& model,
           const SearchOptions& options)
      : graph_(graph), options_(options), table_(graph, layouts, model), start_(Clock::now()) {}

  Schedule run(SearchStats& stats) {
    const auto blocks = graph::partition_blocks(graph_);
    stats.blocks = blocks.size();
    std::vector<std::vector<OpId>> parts;
    for (size_t b = 0; b < blocks.size(); ++b) {
      std::string note;
      for (auto& part : split_block(graph_, blocks[b].ops, options_, &note)) parts.push_back(std::move(part));
      if (!note.empty()) stats.splits.push_back(cat("block ", b, " ", note));
    }
    stats.parts = parts.size();
    progress_.num_blocks = parts.size();
    progress_.budget_s = options_.budget.seconds;

    measure_single_ops();
    singles_measured_ = table_.num_measured();
    const PartDag::Intern intern = [this](const Stage& stage) { return table_.intern(stage); };
    for (auto& part : parts) {
      dags_.push_back(PartDag::build(graph_, std::move(part), options_, intern,
                                     [this](size_t states, size_t transitions) {
                                       progress_.states = states_ + states;
                                       progress_.transitions = transitions_ + transitions;
                                       tick();
                                     }));
      states_ += dags_.back().num_states();
      transitions_ += dags_.back().transitions().size();
      progress_.states = states_;
      progress_.transitions = transitions_;
      ++progress_.block;
      tick();
    }

    std::vector<PartSolution> solutions = improve(stats);
    Schedule schedule;
    for (size_t p = 0; p < dags_.size(); ++p) {
      for (uint32_t t : solutions[p].transitions) {
        const Transition& tr = dags_[p].transitions()[t];
        Stage stage = dags_[p].stage_of(tr);
        stage.predicted_ms = final_cost(tr.stage);
        schedule.stages.push_back(std::move(stage));
      }
    }
    stats.states = states_;
    stats.transitions = transitions_;
    stats.stage_keys = table_.size();
    stats.cost_queries = table_.queries();
    stats.measured = table_.num_measured();
    stats.known = table_.known_on_intern();
    stats.estimated = table_.size() - stats.measured - stats.known;
    stats.measuring_seconds = table_.measuring_seconds();
    report(true);
    return schedule;
  }

 private:
  // Single ops first: every other stage is estimated from them, and with them the sequential
  // schedule is complete. Measured even past the budget (there is no schedule without them).
  void measure_single_ops() {
    for (OpId op = 0; static_cast<size_t>(op) < graph_.num_ops(); ++op) {
      const uint32_t id = table_.intern(Stage::concurrent({{op}}));
      if (!table_.known(id)) {
        table_.measure(id);
        update_counts();
        tick();
      }
      table_.set_single(op, id);
    }
  }

  bool out_of_budget() const {
    if (options_.budget.seconds > 0 && seconds_since(start_) >= options_.budget.seconds) return true;
    return table_.num_measured() - singles_measured_ >= options_.budget.max_measurements;
  }

  // Stages costed from their ops without measuring: chains (no overlap inside one group) and,
  // with a tiny_ms threshold, stages whose every op is tiny.
  bool settled_by_ops(uint32_t c) const {
    if (table_.klass(c) == CandidateClass::kChain) return true;
    return options_.budget.tiny_ms > 0 && table_.max_single_ms(c) < options_.budget.tiny_ms;
  }

  // What a round plans with: known latencies; otherwise the estimate x `scale` (scale 1: chains
  // and tiny stages are settled by their ops' sum).
  std::vector<double> planning_costs(double scale) const {
    std::vector<double> cost(table_.size());
    for (uint32_t c = 0; c < cost.size(); ++c) {
      if (table_.known(c)) {
        cost[c] = table_.ms(c);
      } else if (scale == 1 && settled_by_ops(c)) {
        cost[c] = table_.singles_ms(c);
      } else {
        cost[c] = table_.estimate(c) * scale;
      }
    }
    return cost;
  }

  // What the result may use: known latencies, chains and tiny stages by their ops; nothing else.
  double final_cost(uint32_t c) const {
    if (table_.known(c)) return table_.ms(c);
    return settled_by_ops(c) ? table_.singles_ms(c) : kInfinity;
  }

  static double total(const std::vector<PartSolution>& solutions) {
    double sum = 0;
    for (const PartSolution& s : solutions) sum += s.cost;
    return sum;
  }

  // The parts whose DAG uses each candidate (to solve again only what a measurement changed).
  void index_parts() {
    parts_of_.assign(table_.size(), {});
    for (uint32_t p = 0; p < dags_.size(); ++p) {
      for (const Transition& t : dags_[p].transitions()) {
        auto& parts = parts_of_[t.stage];
        if (parts.empty() || parts.back() != p) parts.push_back(p);
      }
    }
  }

  // Solutions of every part under `cost`, kept up to date part by part.
  struct Solved {
    std::vector<double> cost;
    std::vector<PartSolution> parts;
    std::vector<char> dirty;

    void invalidate_all() { std::fill(dirty.begin(), dirty.end(), 1); }
    void update(const std::vector<PartDag>& dags) {
      for (size_t p = 0; p < dags.size(); ++p) {
        if (!dirty[p]) continue;
        parts[p] = dags[p].solve(cost);
        dirty[p] = 0;
      }
    }
  };

  Solved solved(std::vector<double> cost) const {
    return Solved{std::move(cost), std::vector<PartSolution>(dags_.size()),
                  std::vector<char>(dags_.size(), 1)};
  }

  // Measures candidate `c` and brings every cost vector and solution that depends on it up to date.
  void measure(uint32_t c, std::initializer_list<Solved*> solutions) {
    const double ms = table_.measure(c);
    for (Solved* s : solutions) {
      s->cost[c] = ms;
      for (uint32_t p : parts_of_[c]) s->dirty[p] = 1;
    }
    update_counts();
    tick();
  }

  // Measures the wanted candidates, the largest possible gain first; false when the budget ended
  // it before all were measured.
  bool measure_by_gain(const std::map<uint32_t, double>& wanted,
                       std::initializer_list<Solved*> solutions) {
    std::vector<std::pair<double, uint32_t>> order;
    for (const auto& [c, gain] : wanted) order.emplace_back(-gain, c);
    std::sort(order.begin(), order.end());
    for (const auto& entry : order) {
      if (out_of_budget()) return false;
      measure(entry.second, solutions);
    }
    return true;
  }

  void stop_for_budget(SearchStats& stats) {
    stats.converged = false;
    stats.out_of_budget = true;
  }

  // Rounds of solve-and-measure on the estimates (see the file comment): each measures the
  // unknown stages on the paths the estimates choose, most promising first. Returns false when
  // the budget ended it; else `out` holds the converged solutions.
  bool estimate_rounds(SearchStats& stats, Solved& best, std::vector<PartSolution>& out) {
    Solved plan = solved(planning_costs(1.0));
    uint64_t revision = table_.ratio_revision();
    for (;;) {
      ++stats.rounds;
      plan.update(dags_);
      // Unknown stages on the planned paths, by the gain their estimates promise (summed over
      // the parts whose path takes them).
      std::map<uint32_t, double> wanted;
      for (size_t p = 0; p < dags_.size(); ++p) {
        for (uint32_t t : plan.parts[p].transitions) {
          const uint32_t c = dags_[p].transitions()[t].stage;
          if (table_.known(c) || settled_by_ops(c)) continue;
          wanted[c] += std::max(0.0, table_.singles_ms(c) - plan.cost[c]);
        }
      }
      stats.bound_ms = progress_.bound_ms = total(plan.parts);
      if (wanted.empty()) {
        out = plan.parts;
        return true;
      }
      if (!measure_by_gain(wanted, {&plan, &best})) return false;
      // Estimates follow the learned ratios: when those moved, every unknown stage's did.
      if (table_.ratio_revision() != revision) {
        revision = table_.ratio_revision();
        plan.cost = planning_costs(1.0);
        plan.invalidate_all();
      }
      best.update(dags_);
      progress_.best_ms = total(best.parts);
    }
  }

  // Exhaustive rounds at `scale` < 1: each measures, in one batch, every unknown stage on some
  // path whose planned cost (known latencies, estimates x scale) beats the part's best path of
  // measured stages, the most promising first. A measurement only raises a planned cost when the
  // estimates are lower bounds (at scale 0 they are: nothing costs less than 0), so a stage left
  // out once cannot matter later: at scale 0 this ends, in a few rounds, with the optimum over all
  // candidates. Returns false when the budget ended it; else `out` holds the optimum of measured
  // stages.
  bool bound_rounds(double scale, SearchStats& stats, Solved& best, std::vector<PartSolution>& out) {
    constexpr double kSlack = 1e-12;  // relative: equal costs are no improvement
    std::vector<double> known(table_.size());
    for (uint32_t c = 0; c < known.size(); ++c) known[c] = table_.known(c) ? table_.ms(c) : kInfinity;
    Solved measured = solved(std::move(known));
    Solved planned = solved(planning_costs(scale));
    std::vector<std::vector<double>> from(dags_.size()), to(dags_.size());
    uint64_t revision = table_.ratio_revision();
    for (;;) {
      ++stats.rounds;
      measured.update(dags_);
      std::map<uint32_t, double> wanted;  // candidate -> the most its paths could gain
      for (size_t p = 0; p < dags_.size(); ++p) {
        if (planned.dirty[p]) {
          from[p] = dags_[p].from_start(planned.cost);
          to[p] = dags_[p].to_end(planned.cost);
          planned.dirty[p] = 0;
        }
        const double limit = measured.parts[p].cost * (1 - kSlack);
        if (to[p].back() >= limit) continue;  // nothing unknown can beat the measured path
        const PartDag& dag = dags_[p];
        dag.for_each_transition([&](uint32_t t, uint32_t state) {
          const Transition& tr = dag.transitions()[t];
          if (table_.known(tr.stage)) return;
          const double path = from[p][state] + planned.cost[tr.stage] + to[p][tr.to];
          if (path < limit) {
            double& gain = wanted[tr.stage];
            gain = std::max(gain, measured.parts[p].cost - path);
          }
        });
      }
      if (wanted.empty()) {
        out = measured.parts;
        return true;
      }
      if (!measure_by_gain(wanted, {&measured, &planned, &best})) return false;
      if (scale > 0 && table_.ratio_revision() != revision) {
        revision = table_.ratio_revision();
        planned.cost = planning_costs(scale);
        planned.invalidate_all();
      }
      best.update(dags_);
      progress_.best_ms = total(best.parts);
    }
  }

  // The rounds of the search (see the file comment). Returns the solutions to use.
  std::vector<PartSolution> improve(SearchStats& stats) {
    index_parts();
    std::vector<double> final(table_.size());
    for (uint32_t c = 0; c < final.size(); ++c) final[c] = final_cost(c);
    Solved best = solved(std::move(final));
    best.update(dags_);
    progress_.best_ms = total(best.parts);
    std::vector<PartSolution> converged;
    bool finished = estimate_rounds(stats, best, converged);
    if (options_.budget.exhaustive) {
      for (double scale : kExhaustiveScales) {
        if (finished) finished = bound_rounds(scale, stats, best, converged);
      }
    }
    if (finished) return converged;
    stop_for_budget(stats);
    best.update(dags_);
    return best.parts;
  }

  void update_counts() { progress_.measured = table_.num_measured(); }

  void tick() {
    if (!options_.on_progress) return;
    // The clock is read every 16 calls: the callback is also where a caller notices an interrupt.
    if ((++calls_ & 15) != 0 && progress_.measured == last_measured_) return;
    if (seconds_since(start_) - last_ < kProgressInterval) return;
    report(false);
  }

  void report(bool final) {
    if (!options_.on_progress) return;
    last_ = seconds_since(start_);
    last_measured_ = progress_.measured;
    progress_.seconds = last_;
    progress_.stages = table_.size();
    progress_.estimated = table_.size() - table_.num_measured() - table_.known_on_intern();
    if (final) progress_.block = progress_.num_blocks;
    options_.on_progress(progress_);
  }

  const graph::Graph& graph_;
  const SearchOptions& options_;
  CandidateTable table_;
  Clock::time_point start_;
  std::vector<PartDag> dags_;
  std::vector<std::vector<uint32_t>> parts_of_;  // by candidate: the parts whose DAG uses it
  size_t states_ = 0, transitions_ = 0;
  size_t singles_measured_ = 0;
  SearchProgress progress_;
  size_t calls_ = 0;
  size_t last_measured_ = 0;
  double last_ = -1;
};

class DpScheduler : public Scheduler {
 public:
  explicit DpScheduler(SearchOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "dp"; }

  using Scheduler::schedule;
  Schedule schedule(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                    CostModel& model, SearchStats* stats_out) override {
    SearchStats stats;
    const auto start = Clock::now();
    Schedule schedule = DpSearch(graph, layouts, model, options_).run(stats);
    fill_meta(graph, layouts, model, options_, schedule);
    schedule.meta.converged = stats.converged;
    stats.seconds = seconds_since(start);
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
  const int max_ops = std::clamp(options.max_part_ops, 1, kMaxPartOps);
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
