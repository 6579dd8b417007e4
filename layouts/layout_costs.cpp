#include "layouts/layout_costs.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

#include "common/strings.h"
#include "graph/quantize.h"
#include "graph/yaml_io.h"
#include "scheduler/stage_key.h"

namespace stagecraft::layouts {

using profiler::time_plan;

namespace {

using graph::Layout;

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A layout whose first run is this much slower than the op's best so far is not sampled further.
constexpr double kGiveUpFactor = 4.0;
constexpr double kGiveUpFloorMs = 0.5;

std::string layouts_key(const std::vector<Layout>& inputs, Layout output) {
  std::string key = "in=";
  for (Layout l : inputs) key += cat(graph::to_string(l), ",");
  return cat(key, "out=", graph::to_string(output));
}

// The graph that times probe i: the op alone in the query's layouts, or an identity op reading
// the tensor in one layout and writing it in another (a conversion copy).
graph::Graph timed_graph(const LayoutProbes& probes, size_t i) {
  if (i < probes.queries.size()) {
    const layouts::LayoutQuery& q = probes.queries[i];
    return graph::op_alone(*probes.graph, q.op, q.inputs, "layout-op");
  }
  const layouts::ConversionQuery& c = probes.conversions[i - probes.queries.size()];
  graph::Graph timed("layout-convert");
  graph::TensorDesc in = c.desc;
  in.layout = c.from;
  const graph::ValueId x = timed.add_input("x", in);
  const graph::OpId op = timed.add_op("convert", graph::OpKind::kIdentity, {}, {x});
  timed.add_output(timed.op(op).outputs[0]);
  return timed;
}

// Times `timed` (op 0) with its outputs in `output`, as the plan runs it.
double time_probe(executor::Backend& backend, executor::StreamPool& streams, const graph::Graph& timed,
                  graph::Layout output, const MeasureOptions& measure) {
  scheduler::Schedule schedule;
  schedule.stages = {scheduler::Stage::concurrent({{0}})};
  executor::PlanOptions plan;
  plan.max_streams = measure.max_streams;
  plan.layouts = graph::LayoutAssignment::per_value(timed, std::vector<Layout>(timed.num_values(), output));
  plan.plain_outputs = false;
  plan.inputs_may_be_views = true;
  plan.convert_inputs = false;  // inputs stand for op outputs: converted only where needed
  // A layout whose kernel is reference-only is not an option (the plan would run the op in
  // another layout): BackendError, which prices it at infinity without timing it.
  plan.reference_kernels = executor::PlanOptions::ReferenceKernels::kRefuse;
  try {
    return time_plan(backend, streams, timed, schedule, plan, measure);
  } catch (const executor::BackendError&) {
    return kInfinity;  // the backend cannot run the op in these layouts: the DP avoids them
  }
}

}  // namespace

std::vector<Layout> default_layout_candidates(const executor::Backend& backend,
                                              const graph::Graph& graph) {
  // executor::activation_layout without a uniform layout: the backend's for the compute type.
  const Layout preferred = backend.preferred_layout(graph::compute_dtype(graph));
  std::vector<Layout> candidates{preferred};
  if (graph::is_quantised(graph)) return candidates;
  for (Layout l : backend.capabilities().layouts)
    if (l != preferred) candidates.push_back(l);
  return candidates;
}

LayoutProbes plan_layout_probes(const executor::Backend& backend, const graph::Graph& graph,
                                const std::vector<Layout>& candidates,
                                int max_streams) {
  LayoutProbes result;
  result.candidates = candidates.empty() ? default_layout_candidates(backend, graph) : candidates;
  const layouts::LayoutCostTable table(result.candidates);
  result.queries = table.queries(graph);
  result.conversions = table.conversions(graph);
  scheduler::StageKeyBuilder keys(graph);
  const std::string streams = cat("streams=", max_streams, ";");
  for (const layouts::LayoutQuery& q : result.queries) {
    LayoutProbe probe;
    probe.key = cat("layout-op;", streams, layouts_key(q.inputs, q.output), ";",
                    keys.key(scheduler::Stage::concurrent({{q.op}})));
    probe.output = q.output;
    probe.op = q.op;
    result.probes.push_back(std::move(probe));
  }
  for (const layouts::ConversionQuery& c : result.conversions) {
    LayoutProbe probe;
    probe.key = cat("layout-convert;", c.desc.shape.to_string(), ";", graph::to_string(c.desc.dtype),
                    ";", graph::to_string(c.from), "->", graph::to_string(c.to));
    probe.output = c.to;
    result.probes.push_back(std::move(probe));
  }
  result.graph = &graph;
  result.compute_type = graph::compute_type(graph);
  result.graph_key = graph::graph_hash(graph);
  return result;
}

LayoutMeasurement measure_layout_probes(executor::Backend& backend, const LayoutProbes& probes,
                                        ProfileCache& cache, const MeasureOptions& options,
                                        const std::function<void(size_t, double)>& progress) {
  LayoutMeasurement result;
  result.table = layouts::LayoutCostTable(probes.candidates);
  executor::StreamPool streams(backend);
  std::map<graph::OpId, double> best_ms;  // per op, its fastest layout so far (to give up early)
  for (size_t i = 0; i < probes.probes.size(); ++i) {
    const LayoutProbe& probe = probes.probes[i];
    std::optional<double> ms = cache.find(probe.key);
    if (ms) {
      ++result.cache_hits;
    } else {
      MeasureOptions measure = options;
      if (auto best = best_ms.find(probe.op); best != best_ms.end() && probe.op != graph::kNoOp) {
        measure.give_up_ms = std::max(kGiveUpFloorMs, kGiveUpFactor * best->second);
      }
      const auto start = std::chrono::steady_clock::now();
      ms = time_probe(backend, streams, timed_graph(probes, i), probe.output, measure);
      result.measuring_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++result.measurements;
      // Infinite answers (no native kernel in these layouts) are cached too: the device
      // fingerprint names the library version and instruction set they depend on.
      cache.insert(probe.key, *ms);
      if (progress) progress(result.measurements, result.measuring_s);
    }
    if (probe.op != graph::kNoOp) {
      auto [it, inserted] = best_ms.emplace(probe.op, *ms);
      if (!inserted) it->second = std::min(it->second, *ms);
    }
    if (i < probes.queries.size()) {
      result.table.set(probes.queries[i], *ms);
    } else {
      result.table.set(probes.conversions[i - probes.queries.size()], *ms);
    }
  }
  cache.save();
  return result;
}

}  // namespace stagecraft::layouts
