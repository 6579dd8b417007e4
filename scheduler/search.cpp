// Sequential and greedy schedulers, the shared metadata and costing, and the scheduler factory.
#include "common/enum_table.h"
#include "scheduler/search.h"

#include <algorithm>
#include <chrono>

#include "common/strings.h"
#include "graph/yaml_io.h"
#include "graph/quantize.h"
#include "scheduler/dp.h"
#include "scheduler/stage_coster.h"

namespace stagecraft::scheduler {

namespace {
constexpr Named<Strategy> kStrategies[] = {
    {Strategy::kSequential, "sequential"}, {Strategy::kGreedy, "greedy"}, {Strategy::kDp, "dp"}};
constexpr Named<DpMode> kModes[] = {
    {DpMode::kBoth, "both"}, {DpMode::kMerge, "merge"}, {DpMode::kConcurrent, "concurrent"}};

template <class Entry, size_t N, class E>
std::string_view name_in(const Entry (&table)[N], E value) {
  const Entry* e = entry_for(table, value);
  return e != nullptr ? e->name : "?";
}
}  // namespace

std::string_view to_string(Strategy strategy) { return name_in(kStrategies, strategy); }

std::string_view to_string(DpMode mode) { return name_in(kModes, mode); }

Strategy parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::kSequential, Strategy::kGreedy, Strategy::kDp})
    if (to_string(s) == name) return s;
  throw UsageError(cat("unknown strategy '", name, "' (known: sequential, greedy, dp)"));
}

DpMode parse_dp_mode(std::string_view name) {
  for (DpMode m : {DpMode::kBoth, DpMode::kMerge, DpMode::kConcurrent})
    if (to_string(m) == name) return m;
  throw UsageError(cat("unknown dp mode '", name, "' (known: both, merge, concurrent)"));
}

double cost_schedule(const graph::Graph& graph, CostModel& model, Schedule& schedule) {
  StageCoster coster(graph, schedule.layouts, model);
  double total = 0;
  for (Stage& stage : schedule.stages) {
    stage.predicted_ms = coster.latency(stage);
    total += stage.predicted_ms;
  }
  schedule.meta.predicted_ms = total;
  return total;
}

void fill_meta(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
               const CostModel& model, const SearchOptions& options, Schedule& schedule) {
  schedule.layouts = layouts;
  ScheduleMeta& meta = schedule.meta;
  meta.network = graph.name();
  meta.graph_hash = graph::graph_hash(graph);
  meta.num_ops = graph.num_ops();
  const auto& input = graph.value(graph.inputs().at(0)).desc;
  meta.batch = input.shape.rank() > 0 ? input.shape[0] : 1;
  meta.dtype = graph::compute_type(graph);
  meta.device = model.device_fingerprint();
  meta.cost_model = model.name();
  meta.search = options;
  meta.search.on_progress = nullptr;
  meta.predicted_ms = 0;
  for (const Stage& stage : schedule.stages) meta.predicted_ms += stage.predicted_ms;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<Stage> sequential_stages(const graph::Graph& graph, const SearchOptions&) {
  return sequential_schedule(graph).stages;
}

// Up to max_num_groups ready ops a stage, one op a group, lowest ids first.
std::vector<Stage> greedy_stages(const graph::Graph& graph, const SearchOptions& options) {
  const size_t n = graph.num_ops();
  const size_t cap = static_cast<size_t>(std::max(1, options.max_num_groups));
  std::vector<size_t> waiting(n);
  std::vector<OpId> ready;
  for (OpId id = 0; static_cast<size_t>(id) < n; ++id) {
    waiting[id] = graph.predecessors(id).size();
    if (waiting[id] == 0) ready.push_back(id);
  }
  std::vector<Stage> stages;
  while (!ready.empty()) {
    std::sort(ready.begin(), ready.end());
    const size_t take = std::min(cap, ready.size());
    std::vector<std::vector<OpId>> groups;
    for (size_t i = 0; i < take; ++i) groups.push_back({ready[i]});
    std::vector<OpId> rest(ready.begin() + static_cast<long>(take), ready.end());
    for (size_t i = 0; i < take; ++i) {
      for (OpId s : graph.successors(ready[i]))
        if (--waiting[s] == 0) rest.push_back(s);
    }
    stages.push_back(Stage::concurrent(std::move(groups)));
    ready = std::move(rest);
  }
  return stages;
}

// A simple scheduler: one function lists the stages; this costs every stage, fills the metadata
// and the stats, and times the whole.
class ListScheduler : public Scheduler {
 public:
  using ListStages = std::vector<Stage> (*)(const graph::Graph&, const SearchOptions&);

  ListScheduler(std::string name, ListStages list, SearchOptions options)
      : name_(std::move(name)), list_(list), options_(std::move(options)) {}
  std::string name() const override { return name_; }
  using Scheduler::schedule;
  Schedule schedule(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                    CostModel& model, SearchStats* stats) override {
    const auto start = Clock::now();
    Schedule result;
    result.stages = list_(graph, options_);
    StageCoster coster(graph, layouts, model);
    for (Stage& stage : result.stages) stage.predicted_ms = coster.latency(stage);
    fill_meta(graph, layouts, model, options_, result);
    result.meta.search_seconds = seconds_since(start);
    if (stats) {
      stats->stage_keys = coster.distinct_keys();
      stats->cost_queries = coster.queries();
      stats->known = coster.known();
      stats->measured = coster.measured();
      stats->seconds = result.meta.search_seconds;
    }
    return result;
  }

 private:
  std::string name_;
  ListStages list_;
  SearchOptions options_;
};

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const SearchOptions& options) {
  if (options.max_group_size < 1 || options.max_num_groups < 1) {
    throw UsageError(cat("max_group_size and max_num_groups must be >= 1, got ",
                         options.max_group_size, " and ", options.max_num_groups));
  }
  switch (options.strategy) {
    case Strategy::kSequential:
      return std::make_unique<ListScheduler>("sequential", sequential_stages, options);
    case Strategy::kGreedy:
      return std::make_unique<ListScheduler>("greedy", greedy_stages, options);
    case Strategy::kDp:
      return make_dp_scheduler(options);
  }
  return nullptr;
}

}  // namespace stagecraft::scheduler
