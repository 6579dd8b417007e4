// The execution plan: the plan representation's helpers and the pass pipeline (plan/plan_ir.h).
#include "executor/plan.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/strings.h"
#include "executor/plan/plan_ir.h"
#include "graph/errors.h"
#include "graph/quantize.h"
#include "graph/yaml_io.h"

namespace stagecraft::executor {

using graph::Layout;
using graph::TensorDesc;

namespace planning {

PlanIR::PlanIR(const graph::Graph& graph, const scheduler::Schedule& s, const graph::WeightStore& w,
               Backend& b, const PlanOptions& o)
    : g(graph), schedule(s), weights(w), backend(b), options(o),
      layout(activation_layout(b, graph, o)), parallelism(std::max(1, b.device().parallelism())) {}

int PlanIR::new_value(const TensorDesc& desc) {
  ValueInfo info;
  info.desc = desc;
  values.push_back(std::move(info));
  return static_cast<int>(values.size()) - 1;
}

void PlanIR::make_view(int child, int parent, size_t offset) {
  values[child].parent = parent;
  values[child].offset = offset;
  values[parent].children.push_back(child);
  ++memory.views;
}

Task PlanIR::op_task(const graph::Op& op, const graph::OpAttrs& attrs, std::vector<int> srcs,
                     std::vector<int> dsts, const graph::OpWeights* w) const {
  Task t;
  t.spec.kind = op.kind;
  t.spec.attrs = attrs;
  for (int v : srcs) t.spec.srcs.push_back(values[v].desc);
  for (int v : dsts) t.spec.dsts.push_back(values[v].desc);
  t.spec.weights = w;
  t.spec.name = op.name;
  t.spec.threads = parallelism;
  t.srcs = std::move(srcs);
  t.dsts = std::move(dsts);
  t.label = op.name;
  t.ops = {op.id};
  return t;
}

Task PlanIR::copy_task(int src, int dst, const std::string& label) const {
  Task t;
  t.copy = true;
  t.srcs = {src};
  t.dsts = {dst};
  t.label = label;
  return t;
}

int PlanIR::src_value(const graph::Op& op, size_t slot) const {
  const graph::ValueId v = op.inputs[slot];
  if (op.kind == graph::OpKind::kConcat) return v;
  if (op.kind == graph::OpKind::kConv2d && !convert_for_conv.count(v)) return v;
  return alias[v];
}

int PlanIR::root(int v) const {
  while (values[v].parent >= 0) v = values[v].parent;
  return v;
}

size_t PlanIR::offset_in_root(int v) const {
  size_t offset = 0;
  for (; values[v].parent >= 0; v = values[v].parent) offset += values[v].offset;
  return offset;
}

void* PlanIR::allocate(size_t bytes) {
  buffers.push_back(backend.allocate(bytes + options.guard_bytes));
  buffer_bytes.push_back(bytes);
  if (options.guard_bytes > 0) {
    const std::vector<unsigned char> pattern(options.guard_bytes, kGuardPattern);
    backend.upload(static_cast<char*>(buffers.back()->data()) + bytes, pattern.data(), pattern.size());
  }
  return buffers.back()->data();
}

bool dense_slice(const TensorDesc& d, int64_t c0, int64_t c, size_t* offset) {
  const graph::Shape& s = d.shape;
  const int64_t channels = s[1];
  const bool whole = c0 == 0 && c == channels;
  const int64_t batch = s[0];
  const int64_t spatial = s.numel() / (s[0] * s[1]);  // the elements after dimension 1
  const int64_t element = graph::size_of(d.dtype);
  switch (d.layout) {
    case Layout::kNCHW:
    case Layout::kNC:
    case Layout::kRowMajor:
      if (!whole && batch != 1) return false;
      *offset = static_cast<size_t>(c0 * spatial * element);
      return true;
    case Layout::kNChw8c:
    case Layout::kNChw16c:
    case Layout::kNCHWVectC: {
      const int64_t block = graph::channel_block(d.layout);
      if (whole) {
        *offset = 0;
        return true;
      }
      if (batch != 1 || c0 % block != 0 || (c % block != 0 && c0 + c != channels)) return false;
      *offset = static_cast<size_t>(c0 * spatial * element);
      return true;
    }
    case Layout::kNHWC:
      // Channels are innermost: a channel range is dense only when there is one pixel.
      *offset = static_cast<size_t>(c0 * element);
      return whole || batch * spatial == 1;
  }
  return false;
}

bool same_storage(const TensorDesc& a, const TensorDesc& b) {
  return a.layout == b.layout && a.dtype == b.dtype && a.scale == b.scale;
}

TensorDesc with_channels(TensorDesc d, int64_t channels) {
  d.shape[1] = channels;
  return d;
}

namespace {

// "nChw8c", or "114 nhwc + 5 nChw16c" (most first) over the rank-4 op outputs as planned.
std::string summarise_layouts(const PlanIR& ir) {
  std::map<Layout, size_t> counts;
  for (size_t v = 0; v < ir.g.num_values(); ++v) {
    const graph::Value& value = ir.g.value(static_cast<graph::ValueId>(v));
    if (value.producer != graph::kNoOp && graph::takes_layouts(value.desc)) ++counts[ir.values[v].desc.layout];
  }
  if (counts.empty()) return std::string(graph::to_string(ir.layout));
  if (counts.size() == 1) return std::string(graph::to_string(counts.begin()->first));
  std::vector<std::pair<size_t, Layout>> sorted;
  for (const auto& [layout, n] : counts) sorted.emplace_back(n, layout);
  std::sort(sorted.rbegin(), sorted.rend());
  std::string out;
  for (const auto& [n, layout] : sorted) out += cat(out.empty() ? "" : " + ", n, " ", graph::to_string(layout));
  return out;
}

}  // namespace

}  // namespace planning

/// Runs the passes and moves their results into the plan.
class PlanBuilder {
 public:
  static void build(ExecutionPlan& plan, const graph::Graph& graph, const scheduler::Schedule& schedule,
                    const graph::WeightStore& weights, const PlanOptions& options) {
    graph::check_weights(graph, weights);
    if (!schedule.meta.graph_hash.empty() && schedule.meta.graph_hash != graph::graph_hash(graph)) {
      throw scheduler::ScheduleError(cat("the schedule was made for another graph ('",
                                         schedule.meta.network, "', hash ", schedule.meta.graph_hash,
                                         "), not for '", graph.name(), "'"));
    }
    scheduler::validate(graph, schedule);
    planning::PlanIR ir(graph, schedule, weights, plan.backend_, options);
    planning::describe_values(ir);
    planning::legalise_layouts(ir);
    planning::convert_inputs(ir);
    planning::place_tasks(ir);
    planning::synchronise(ir);
    planning::plan_memory(ir);
    plan.kernels_ = planning::create_kernels(ir);
    for (graph::ValueId v : graph.inputs()) plan.inputs_.push_back({ir.address[v], ir.values[v].desc});
    for (int v : ir.output_values) plan.outputs_.push_back({ir.address[v], ir.values[v].desc});
    plan.num_streams_ = ir.num_streams;
    plan.num_events_ = ir.num_events;
    plan.parallelism_ = ir.parallelism;
    if (options.can_limit_threads && ir.parallelism > 1) {
      for (const planning::Task& task : ir.tasks) {
        ExecutionPlan::Rebuild r{task.spec, {}, {}, ir.workspace[static_cast<size_t>(task.stream)],
                                 ir.workspace_bytes[static_cast<size_t>(task.stream)], task.copy};
        for (int v : task.srcs) r.srcs.push_back({ir.address[v], ir.values[v].desc});
        for (int v : task.dsts) r.dsts.push_back({ir.address[v], ir.values[v].desc});
        plan.rebuild_.push_back(std::move(r));
      }
    }
    plan.memory_ = ir.memory;
    plan.fallbacks_ = std::move(ir.fallbacks);
    plan.layout_summary_ = planning::summarise_layouts(ir);
    plan.merged_weights_ = std::move(ir.merged_weights);
    if (options.guard_bytes > 0) {
      // Name the tensors each buffer holds, and the tasks writing them, for the report.
      std::vector<std::string> writers(ir.values.size());
      for (const planning::Task& t : ir.tasks) {
        for (int v : t.dsts) writers[static_cast<size_t>(v)] += cat(writers[static_cast<size_t>(v)].empty() ? " by " : ", ", t.label);
      }
      for (size_t b = 0; b < ir.buffers.size(); ++b) {
        const auto* begin = static_cast<const unsigned char*>(ir.buffers[b]->data());
        std::vector<std::string> held;
        for (size_t v = 0; v < ir.values.size(); ++v) {
          const auto* at = static_cast<const unsigned char*>(ir.address[v]);
          if (at >= begin && at < begin + ir.buffer_bytes[b]) held.push_back(ir.values[v].desc.to_string() + writers[v]);
        }
        plan.guards_.push_back({begin + ir.buffer_bytes[b], options.guard_bytes,
                                cat("buffer ", b, " (", ir.buffer_bytes[b], " bytes", held.empty() ? "" : ": ",
                                    join(held, "; "), ")")});
      }
    }
    plan.buffers_ = std::move(ir.buffers);
  }
};

graph::Layout activation_layout(const Backend& backend, const graph::Graph& graph,
                                const PlanOptions& options) {
  if (const auto uniform = options.layouts.uniform_layout()) return *uniform;
  // f16 graphs carry f16 values from the input on (cli --dtype f16): NHWC suits tensor cores.
  return backend.preferred_layout(graph::compute_dtype(graph));
}

ExecutionPlan::ExecutionPlan(const graph::Graph& graph, const scheduler::Schedule& schedule,
                             const graph::WeightStore& weights, Backend& backend,
                             const PlanOptions& options)
    : backend_(backend), layout_(activation_layout(backend, graph, options)) {
  PlanBuilder::build(*this, graph, schedule, weights, options);
}

ExecutionPlan::~ExecutionPlan() = default;

const std::vector<std::unique_ptr<Kernel>>& ExecutionPlan::limited_kernels(int threads) {
  const std::lock_guard<std::mutex> lock(limited_mutex_);
  auto [it, fresh] = limited_.try_emplace(threads);
  if (!fresh) return it->second;
  std::vector<std::unique_ptr<Kernel>>& kernels = it->second;
  kernels.resize(kernels_.size());
  for (size_t i = 0; i < rebuild_.size() && i < kernels_.size(); ++i) {
    const Rebuild& r = rebuild_[i];
    if (r.copy || r.spec.threads <= threads) continue;
    KernelSpec spec = r.spec;
    spec.threads = threads;
    // Whatever goes wrong here, the planned kernel runs instead: a run never fails for this.
    try {
      const KernelDesc desc = backend_.supports(spec);
      if (!desc.runnable()) continue;
      std::unique_ptr<Kernel> k = backend_.create_kernel(spec, desc);
      if (k->workspace_bytes() > r.workspace_bytes) continue;
      k->bind(r.srcs, r.dsts, r.workspace);
      kernels[i] = std::move(k);
    } catch (const std::exception&) {
      continue;
    }
  }
  return kernels;
}

bool ExecutionPlan::guards_intact(std::vector<std::string>* damaged) const {
  bool intact = true;
  for (const Guard& guard : guards_) {
    std::vector<unsigned char> bytes(guard.bytes);
    backend_.download(bytes.data(), guard.begin, bytes.size());
    if (std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == planning::kGuardPattern; })) {
      continue;
    }
    intact = false;
    if (damaged) damaged->push_back(guard.what);
  }
  return intact;
}

}  // namespace stagecraft::executor
