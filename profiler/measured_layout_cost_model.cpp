#include "profiler/measured_layout_cost_model.h"

#include <chrono>
#include <functional>
#include <limits>

#include "common/error.h"
#include "common/strings.h"
#include "scheduler/stage_key.h"

namespace stagecraft::profiler {

namespace {

using graph::Layout;

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A layout whose first run is this much slower than the op's best so far is not sampled further.
constexpr double kGiveUpFactor = 4.0;
constexpr double kGiveUpFloorMs = 0.5;

// The one-op graph of `id`: each distinct input a graph input in its given layout (rank-4 ones),
// the output an output. Returns the graph and the sub id of the op's output.
graph::Graph one_op_graph(const graph::Graph& graph, graph::OpId id,
                          const std::vector<Layout>& layouts) {
  const graph::Op& op = graph.op(id);
  graph::Graph sub("layout-op");
  std::map<graph::ValueId, graph::ValueId> mapped;
  std::vector<graph::ValueId> inputs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const graph::ValueId v = op.inputs[i];
    auto it = mapped.find(v);
    if (it == mapped.end()) {
      graph::TensorDesc desc = graph.value(v).desc;
      if (desc.shape.rank() == 4) desc.layout = layouts[i];
      it = mapped.emplace(v, sub.add_input(cat("in", mapped.size()), desc)).first;
    }
    inputs.push_back(it->second);
  }
  const graph::OpId nid = graph::copy_op(sub, graph, id, inputs);
  for (graph::ValueId v : sub.op(nid).outputs) sub.add_output(v);
  return sub;
}

std::string layouts_key(const std::vector<Layout>& inputs, Layout output) {
  std::string key = "in=";
  for (Layout l : inputs) key += std::string(graph::to_string(l)) + ",";
  return key + "out=" + std::string(graph::to_string(output));
}

}  // namespace

MeasuredLayoutCostModel::MeasuredLayoutCostModel(executor::Backend& backend, ProfileCache* cache,
                                                 MeasureOptions options)
    : backend_(backend), streams_(backend), cache_(cache), options_(std::move(options)) {}

double MeasuredLayoutCostModel::cached(const std::string& key,
                                       const std::function<double()>& measure) {
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  if (cache_) {
    if (auto ms = cache_->find(key)) {
      ++cache_hits_;
      return memo_[key] = *ms;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  double ms = kInfinity;
  try {
    ms = measure();
  } catch (const executor::BackendError&) {
    ms = kInfinity;  // the backend cannot run the op in these layouts: the DP avoids them
  }
  ++measurements_;
  measuring_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Infinite answers (no native kernel in these layouts) are cached too: the device fingerprint
  // names the library version and instruction set they depend on.
  if (cache_) cache_->insert(key, ms);
  if (progress_) progress_(measurements_, measuring_seconds_);
  return memo_[key] = ms;
}

double MeasuredLayoutCostModel::op_ms(const graph::Graph& graph, graph::OpId id,
                                      const std::vector<Layout>& inputs, Layout output) {
  const graph::Op& op = graph.op(id);
  if (inputs.size() != op.inputs.size()) {
    throw Error(cat("layout query for op '", op.name, "' has ", inputs.size(),
                    " input layouts for ", op.inputs.size(), " inputs"));
  }
  // Rank-4 inputs whose layout differs from the output's.
  std::vector<size_t> differing;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (graph.value(op.inputs[i]).desc.shape.rank() == 4 && inputs[i] != output) differing.push_back(i);
  }
  const bool output_4d = graph.value(op.outputs[0]).desc.shape.rank() == 4;
  if (differing.size() <= 1 || !output_4d) return measure_op(graph, id, inputs, output);
  // Several mixed inputs: the op in one layout plus a conversion per differing input.
  std::vector<Layout> uniform = inputs;
  for (size_t i : differing) uniform[i] = output;
  double total = measure_op(graph, id, uniform, output);
  for (size_t i : differing) {
    total += conversion_ms(graph.value(op.inputs[i]).desc, inputs[i], output);
  }
  return total;
}

double MeasuredLayoutCostModel::measure_op(const graph::Graph& graph, graph::OpId id,
                                           const std::vector<Layout>& inputs, Layout output) {
  const std::string key =
      cat("layout-op;streams=", options_.plan.max_streams, ";", layouts_key(inputs, output), ";",
          scheduler::stage_key(graph, scheduler::Stage::concurrent({{id}})));
  const double ms = cached(key, [&] {
    MeasureOptions measure = options_;
    if (auto best = best_ms_.find(id); best != best_ms_.end()) {
      measure.give_up_ms = std::max(kGiveUpFloorMs, kGiveUpFactor * best->second);
    }
    return time_one_op(one_op_graph(graph, id, inputs), output, measure);
  });
  auto [it, inserted] = best_ms_.emplace(id, ms);
  if (!inserted) it->second = std::min(it->second, ms);
  return ms;
}

double MeasuredLayoutCostModel::conversion_ms(const graph::TensorDesc& desc, Layout from, Layout to) {
  if (from == to) return 0;
  const std::string key = cat("layout-convert;", desc.shape.to_string(), ";",
                              graph::to_string(desc.dtype), ";", graph::to_string(from), "->",
                              graph::to_string(to));
  return cached(key, [&] {
    // An identity op reading the tensor in `from` and writing it in `to` is a conversion copy.
    graph::Graph sub("layout-convert");
    graph::TensorDesc in = desc;
    in.layout = from;
    const graph::ValueId x = sub.add_input("x", in);
    const graph::OpId op = sub.add_op("convert", graph::OpKind::kIdentity, {}, {x});
    sub.add_output(sub.op(op).outputs[0]);
    return time_one_op(sub, to, options_);
  });
}

double MeasuredLayoutCostModel::time_one_op(const graph::Graph& sub, Layout output,
                                            const MeasureOptions& measure) {
  scheduler::Schedule schedule;
  schedule.stages = {scheduler::Stage::concurrent({{0}})};
  executor::PlanOptions plan = options_.plan;
  plan.layout = output;
  plan.value_layouts.assign(sub.num_values(), output);
  plan.plain_outputs = false;
  plan.inputs_may_be_views = true;
  plan.convert_inputs = false;  // inputs stand for op outputs: converted only where needed
  // A layout whose kernel is reference-only is not an option (the plan would run the op in
  // another layout): BackendError, which prices it at infinity without timing it.
  plan.reference_kernels = executor::PlanOptions::ReferenceKernels::kRefuse;
  return time_plan(backend_, streams_, sub, schedule, plan, measure);
}

}  // namespace stagecraft::profiler
