#include "profiler/measured_cost_model.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "common/error.h"
#include "common/strings.h"
#include "scheduler/stage_key.h"

namespace stagecraft::profiler {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Saves the cache when the last save is this long ago, so that a search killed by a time limit
// (a GPU lease runs commands of at most 10 minutes) leaves its measurements for the next one.
constexpr double kSaveEveryMs = 20e3;

void save_if_due(ProfileCache& cache) {
  static std::mutex mutex;
  static Clock::time_point last = Clock::now();
  std::lock_guard<std::mutex> lock(mutex);
  if (ms_since(last) < kSaveEveryMs) return;
  last = Clock::now();
  try {
    cache.save();
  } catch (const std::exception&) {
    // Reported by the final save.
  }
}

// Per-value layouts of another graph would be read by the wrong value ids.
void require_layouts_of(const graph::Graph& graph, const graph::LayoutAssignment& layouts) {
  if (layouts.is_per_value() && layouts.per_value().size() != graph.num_values()) {
    throw Error(cat("measuring a stage of '", graph.name(), "' (", graph.num_values(),
                    " values) in per-value layouts of a graph of ", layouts.per_value().size()));
  }
}

}  // namespace

StageGraph stage_graph(const graph::Graph& graph, const scheduler::Stage& stage,
                       const graph::LayoutAssignment& layouts, graph::Layout fallback) {
  const auto layout_of = [&](graph::ValueId v) { return layouts.of(static_cast<size_t>(v), fallback); };
  graph::Graph sub("stage");
  std::map<graph::ValueId, graph::ValueId> mapped;  // graph value -> sub value
  std::map<graph::OpId, graph::OpId> op_map;
  const std::vector<graph::OpId> ops = stage.ops();
  std::vector<bool> inside(graph.num_ops(), false);
  for (graph::OpId id : ops) inside[id] = true;
  int next_input = 0;
  for (graph::OpId id : ops) {
    const graph::Op& op = graph.op(id);
    std::vector<graph::ValueId> inputs;
    for (graph::ValueId v : op.inputs) {
      auto it = mapped.find(v);
      if (it == mapped.end()) {
        // As in the full plan: graph inputs keep their layout, op outputs are in theirs.
        graph::TensorDesc desc = graph.value(v).desc;
        if (graph::takes_layouts(desc) && graph.value(v).producer != graph::kNoOp) desc.layout = layout_of(v);
        it = mapped.emplace(v, sub.add_input(cat("in", next_input++), desc)).first;
      }
      inputs.push_back(it->second);
    }
    const graph::OpId nid = graph::copy_op(sub, graph, id, inputs);
    op_map[id] = nid;
    for (size_t i = 0; i < op.outputs.size(); ++i) mapped[op.outputs[i]] = sub.op(nid).outputs[i];
  }
  // Values the stage hands on (read outside it, or graph outputs) stay live as outputs.
  for (graph::OpId id : ops) {
    for (graph::ValueId v : graph.op(id).outputs) {
      bool outside = graph.is_output(v) || graph.consumers(v).empty();
      for (graph::OpId reader : graph.consumers(v)) outside = outside || !inside[reader];
      if (outside) sub.add_output(mapped.at(v));
    }
  }
  if (sub.outputs().empty()) sub.add_output(mapped.at(graph.op(ops.back()).outputs[0]));
  graph::LayoutAssignment sub_layouts = graph::LayoutAssignment::uniform(layouts.uniform_or(fallback));
  if (layouts.is_per_value()) {
    std::vector<graph::Layout> by_value(sub.num_values(), fallback);
    for (const auto& [v, sv] : mapped) by_value[static_cast<size_t>(sv)] = layout_of(v);
    sub_layouts = graph::LayoutAssignment::per_value(sub, std::move(by_value));
  }
  scheduler::Stage renumbered = stage;
  for (auto& group : renumbered.groups)
    for (graph::OpId& id : group) id = op_map.at(id);
  return {std::move(sub), std::move(renumbered), std::move(sub_layouts)};
}

MeasuredCostModel::MeasuredCostModel(executor::Backend& backend, ProfileCache* cache,
                                     MeasureOptions options)
    : backend_(backend), streams_(backend), cache_(cache), options_(std::move(options)) {
  constexpr double kCpuConcurrencyMargin = 0.5;
  constexpr double kDefaultConcurrencyMargin = 0.1;
  if (!options_.concurrency_margin) {
    options_.concurrency_margin = backend.capabilities().streams_share_cores
                                      ? kCpuConcurrencyMargin
                                      : kDefaultConcurrencyMargin;
  }
}

graph::Layout MeasuredCostModel::default_layout(const graph::Graph& graph,
                                               const graph::LayoutAssignment& layouts) const {
  executor::PlanOptions plan;
  plan.layouts = layouts;  // per value: the backend's layout where none is named
  return executor::activation_layout(backend_, graph, plan);
}

std::string MeasuredCostModel::name() const { return "measured:" + backend_.name(); }

std::string MeasuredCostModel::device_fingerprint() const { return backend_.device().device_fingerprint(); }

std::string MeasuredCostModel::settings_key(const graph::Graph& graph,
                                            const graph::LayoutAssignment& layouts) const {
  std::string key = cat("layout=", graph::to_string(default_layout(graph, layouts)),
                        ";streams=", options_.max_streams);
  if (layouts.is_per_value()) key += cat(";values=", layouts.key());
  return key;
}

std::string MeasuredCostModel::cache_key(const graph::Graph& graph,
                                         const graph::LayoutAssignment& layouts,
                                         const scheduler::Stage& stage) const {
  require_layouts_of(graph, layouts);
  const graph::Layout layout = default_layout(graph, layouts);
  std::string key = cat("layout=", graph::to_string(layout), ";streams=", options_.max_streams,
                        ";", scheduler::stage_key(graph, stage));
  if (layouts.is_per_value()) {
    // The layouts of what the stage reads and writes, in the stage's op order.
    key += ";layouts=";
    const auto name = [&](graph::ValueId v) { return graph::to_string(layouts.of(static_cast<size_t>(v), layout)); };
    for (graph::OpId id : stage.ops()) {
      const graph::Op& op = graph.op(id);
      for (graph::ValueId v : op.inputs) key += cat(name(v), ",");
      key += ">";
      for (graph::ValueId v : op.outputs) key += cat(name(v), ",");
      key += "|";
    }
  }
  return key;
}

double MeasuredCostModel::margin(const scheduler::Stage& stage) const {
  return stage.kind == scheduler::StageKind::kConcurrent && stage.groups.size() > 1
             ? 1.0 + *options_.concurrency_margin
             : 1.0;
}

std::optional<double> MeasuredCostModel::known_latency_ms(const graph::Graph& graph,
                                                          const graph::LayoutAssignment& layouts,
                                                          const scheduler::Stage& stage) {
  if (!cache_) return std::nullopt;
  const auto ms = cache_->find(cache_key(graph, layouts, stage));
  if (!ms) return std::nullopt;
  ++cache_hits_;
  return *ms * margin(stage);
}

double MeasuredCostModel::stage_latency_ms(const graph::Graph& graph,
                                           const graph::LayoutAssignment& layouts,
                                           const scheduler::Stage& stage) {
  const std::string key = cache_ ? cache_key(graph, layouts, stage) : std::string();
  if (cache_) {
    if (auto ms = cache_->find(key)) {
      ++cache_hits_;
      return *ms * margin(stage);
    }
  }
  const double ms = measure(graph, layouts, stage);
  if (cache_) {
    cache_->insert(key, ms);
    save_if_due(*cache_);
  }
  return ms * margin(stage);
}

double MeasuredCostModel::measure(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                                  const scheduler::Stage& stage) {
  const auto start = Clock::now();
  require_layouts_of(graph, layouts);
  StageGraph sub = stage_graph(graph, stage, layouts, default_layout(graph, layouts));
  scheduler::Schedule schedule;
  schedule.stages = {sub.stage};
  schedule.layouts = sub.layouts;
  executor::PlanOptions plan_options;
  plan_options.layouts = std::move(sub.layouts);
  plan_options.max_streams = options_.max_streams;
  plan_options.plain_outputs = false;  // time exactly the stage's kernels
  plan_options.inputs_may_be_views = true;  // its inputs stand for op outputs
  const double ms = time_plan(backend_, streams_, sub.graph, schedule, plan_options, options_);
  ++measurements_;
  measuring_seconds_ += ms_since(start) / 1e3;
  return ms;
}

double time_plan(executor::Backend& backend, executor::StreamPool& streams, const graph::Graph& sub,
                 const scheduler::Schedule& schedule, const executor::PlanOptions& plan_options,
                 const MeasureOptions& options) {
  const graph::WeightStore weights = graph::random_weights(sub, options.seed);
  executor::ExecutionPlan plan(sub, schedule, weights, backend, plan_options);
  executor::Executor executor(plan, &streams, options.executor);
  // Inputs get random bytes in their layout: values do not matter for timing.
  for (size_t i = 0; i < sub.inputs().size(); ++i) {
    const graph::ValueId v = sub.inputs()[i];
    const executor::HostTensor input =
        executor::random_host_tensor(sub.value(v).desc.shape, options.seed + v);
    const auto& ref = plan.inputs()[i];
    const size_t bytes = std::min(static_cast<size_t>(ref.desc.bytes()), input.data.size() * 4);
    backend.upload(ref.data, input.data.data(), bytes);
  }
  // The first run of a plan that is replayed from a capture includes an ordinary run (libraries
  // load their kernels lazily) and the capture itself (issue 16, item 9): it neither counts as
  // warm-up nor sizes the samples. Algorithms were chosen when the plan was built.
  if (options.executor.replay_cuda_graph && backend.can_capture()) executor.execute_repeated(1);
  double once = 0;
  for (int i = 0; i < std::max(1, options.warmup); ++i) once = executor.execute_repeated(1);
  if (once > options.give_up_ms) return once;
  // Samples of several back-to-back runs: a stage in a network starts while the streams are busy,
  // so the time to wake an idle host thread must not count.
  const int runs = std::clamp(static_cast<int>(options.sample_ms / std::max(once, 1e-3)), 1,
                              std::max(1, options.max_runs_per_sample));
  std::vector<double> times;
  for (int i = 0; i < std::max(1, options.repeats); ++i) {
    times.push_back(executor.execute_repeated(runs));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace stagecraft::profiler
