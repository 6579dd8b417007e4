// Execution plan construction: placement (views), tasks in launch order, events, memory reuse.
#include "executor/plan.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/half.h"
#include "common/strings.h"
#include "graph/errors.h"
#include "graph/quantize.h"

namespace stagecraft::executor {

using graph::Layout;
using graph::OpId;
using graph::OpKind;
using graph::TensorDesc;
using graph::ValueId;
using scheduler::Stage;
using scheduler::StageKind;

namespace {

// A fixed-size bit set over tasks (happens-before sets).
class Bits {
 public:
  explicit Bits(size_t n = 0) : words_((n + 63) / 64, 0) {}
  void set(size_t i) { words_[i / 64] |= uint64_t{1} << (i % 64); }
  bool test(size_t i) const { return (words_[i / 64] >> (i % 64)) & 1; }
  void merge(const Bits& o) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
  }
  bool subset_of(const Bits& o) const {
    for (size_t i = 0; i < words_.size(); ++i)
      if ((words_[i] & ~o.words_[i]) != 0) return false;
    return true;
  }

 private:
  std::vector<uint64_t> words_;
};

bool plain_layout(const TensorDesc& d) {
  return d.layout == graph::default_layout(d.shape.rank()).value_or(d.layout);
}

// Whether channels [c0, c0 + c) of a tensor with descriptor `d` form a dense tensor of the same
// layout, and at which byte offset.
bool dense_slice(const TensorDesc& d, int64_t c0, int64_t c, size_t* offset) {
  const graph::Shape& s = d.shape;
  const int64_t channels = s[1];
  const bool whole = c0 == 0 && c == channels;
  const int64_t batch = s[0];
  const int64_t spatial = s.rank() == 4 ? s[2] * s[3] : 1;
  const int64_t element = graph::size_of(d.dtype);
  switch (d.layout) {
    case Layout::kNCHW:
    case Layout::kNC:
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
      *offset = 0;
      return whole || batch * spatial == 1;
  }
  return false;
}

// Whether two tensors hold their elements the same way (layout, type, quantisation scale), so
// that one can be a view of (a slice of) the other.
bool same_storage(const TensorDesc& a, const TensorDesc& b) {
  return a.layout == b.layout && a.dtype == b.dtype && a.scale == b.scale;
}

TensorDesc with_channels(TensorDesc d, int64_t channels) {
  d.shape[1] = channels;
  return d;
}

}  // namespace

struct ExecutionPlan::Builder {
  struct ValueInfo {
    TensorDesc desc;
    int parent = -1;      // value this one is a view into
    size_t offset = 0;    // byte offset inside the parent
    bool pinned = false;  // never shares memory (graph inputs, outputs)
    std::vector<int> children;
    std::vector<int> writers;  // tasks writing exactly this value
  };
  struct Task {
    KernelSpec spec;
    bool copy = false;  // a layout/slice copy made with Backend::create_copy
    std::vector<int> srcs, dsts;
    int stream = 0;
    int stage = 0;
    std::string label;
    std::vector<OpId> ops;
  };

  const graph::Graph& g;
  const scheduler::Schedule& schedule;
  const graph::WeightStore& weights;
  Backend& backend;
  const PlanOptions& options;
  ExecutionPlan& plan;
  Layout layout;
  int parallelism;
  std::vector<ValueInfo> values;
  std::vector<int> alias;                    // graph value -> value read by non-conv consumers
  std::vector<std::vector<Task>> op_tasks;   // tasks of each graph op (or of a merge's first conv)
  std::vector<Task> tasks;                   // in launch order

  Builder(const graph::Graph& graph, const scheduler::Schedule& s, const graph::WeightStore& w,
          Backend& b, const PlanOptions& o, ExecutionPlan& p)
      : g(graph), schedule(s), weights(w), backend(b), options(o), plan(p),
        layout(activation_layout(b, graph, o)), parallelism(std::max(1, b.parallelism())) {}

  int new_value(const TensorDesc& desc) {
    ValueInfo info;
    info.desc = desc;
    values.push_back(std::move(info));
    return static_cast<int>(values.size()) - 1;
  }

  void make_view(int child, int parent, size_t offset) {
    values[child].parent = parent;
    values[child].offset = offset;
    values[parent].children.push_back(child);
    ++plan.memory_.views;
  }

  Task op_task(const graph::Op& op, const graph::OpAttrs& attrs, std::vector<int> srcs,
               std::vector<int> dsts, const graph::OpWeights* w) {
    Task t;
    t.spec.kind = op.kind;
    t.spec.attrs = attrs;
    for (int v : srcs) t.spec.srcs.push_back(values[v].desc);
    for (int v : dsts) t.spec.dsts.push_back(values[v].desc);
    t.spec.weights = w;
    t.spec.name = op.name;
    t.srcs = std::move(srcs);
    t.dsts = std::move(dsts);
    t.label = op.name;
    t.ops = {op.id};
    return t;
  }

  Task copy_task(int src, int dst, const std::string& label) {
    Task t;
    t.copy = true;
    t.srcs = {src};
    t.dsts = {dst};
    t.label = label;
    return t;
  }

  // ---- 1. Descriptors and input conversions -------------------------------------------------
  void describe_values() {
    if (!options.value_layouts.empty() && options.value_layouts.size() != g.num_values()) {
      throw BackendError(cat("the layout plan has ", options.value_layouts.size(),
                             " entries for a graph of ", g.num_values(), " values"));
    }
    for (size_t v = 0; v < g.num_values(); ++v) {
      TensorDesc d = g.value(static_cast<ValueId>(v)).desc;
      if (g.value(static_cast<ValueId>(v)).producer != graph::kNoOp) {
        const Layout chosen = options.value_layouts.empty() ? layout : options.value_layouts[v];
        if (d.shape.rank() == 4 && graph::layout_rank(chosen) != 4) {
          throw BackendError(cat("the layout plan gives value '", g.value(static_cast<ValueId>(v)).name,
                                 "' the layout ", graph::to_string(chosen), ", which is not 4-D"));
        }
        d.layout = d.shape.rank() == 4 ? chosen : Layout::kNC;
      }
      new_value(d);
      alias.push_back(static_cast<int>(v));
    }
    for (ValueId v : g.inputs()) values[v].pinned = true;
    for (ValueId v : g.inputs()) {
      const TensorDesc d = values[v].desc;
      if (d.shape.rank() != 4 || d.layout == layout || !options.convert_inputs) continue;
      // Convolutions read a graph input in its own layout when the backend can (the usual first
      // layer); concatenations copy their parts anyway. Everything else reads a converted copy.
      bool needs = false;
      for (OpId reader : g.consumers(v)) {
        const graph::Op& op = g.op(reader);
        if (op.kind == OpKind::kConcat) continue;
        if (op.kind == OpKind::kConv2d && conv_reads_directly(op, v)) continue;
        needs = true;
        if (op.kind == OpKind::kConv2d) convert_for_conv.insert(v);
      }
      if (!needs) continue;
      TensorDesc converted = d;
      converted.layout = layout;
      alias[v] = new_value(converted);
      Task t = copy_task(v, alias[v], "convert " + g.value(v).name);
      tasks.push_back(std::move(t));
    }
  }

  std::set<ValueId> convert_for_conv;  // graph inputs convolutions read converted

  bool conv_reads_directly(const graph::Op& op, ValueId input) const {
    KernelSpec spec;
    spec.kind = op.kind;
    spec.attrs = op.attrs;
    spec.srcs = {values[input].desc};
    spec.dsts = {values[op.outputs[0]].desc};
    spec.weights = weights.find(op.name);
    spec.name = op.name;
    return backend.supports(spec).empty();
  }

  int src_value(const graph::Op& op, size_t slot) const {
    const ValueId v = op.inputs[slot];
    if (op.kind == OpKind::kConcat) return v;
    if (op.kind == OpKind::kConv2d && !convert_for_conv.count(v)) return v;
    return alias[v];
  }

  // ---- 2. Per-op tasks and placement ------------------------------------------------------
  void plan_merge(const Stage& stage) {
    const std::vector<OpId> convs = stage.ops();
    const graph::Op& first = g.op(convs[0]);
    const graph::Conv2dAttrs attrs = scheduler::merged_conv_attrs(g, convs);
    const TensorDesc out = with_channels(values[first.outputs[0]].desc, attrs.out_channels);
    const int merged = new_value(out);
    plan.merged_weights_.push_back(merged_weights(convs, attrs));
    Task t = op_task(first, attrs, {src_value(first, 0)}, {merged}, &plan.merged_weights_.back());
    t.ops = convs;
    if (graph::is_int8(out.dtype)) {
      for (OpId id : convs) {
        const TensorDesc& part = values[g.op(id).outputs[0]].desc;
        t.spec.dst_channel_scales.insert(t.spec.dst_channel_scales.end(),
                                         static_cast<size_t>(part.shape[1]), part.scale);
      }
    }
    t.spec.name = t.label = cat("merge(", join(op_names(convs), ", "), ")");
    conform_inputs(first, t);  // input conversions (if any) go first
    std::vector<Task> list = std::move(op_tasks[convs[0]]);
    list.push_back(std::move(t));
    int64_t c0 = 0;
    for (OpId id : convs) {
      const int v = g.op(id).outputs[0];
      const int64_t c = values[v].desc.shape[1];
      size_t offset = 0;
      if (values[v].desc.layout == out.layout && values[v].desc.dtype == out.dtype &&
          dense_slice(out, c0, c, &offset)) {
        make_view(v, merged, offset);  // quantised parts keep their scales (per channel)
      } else {
        graph::SliceAttrs slice;
        slice.begin = c0;
        slice.end = c0 + c;
        Task s = op_task(g.op(id), slice, {merged}, {v}, nullptr);
        s.spec.kind = OpKind::kSlice;
        s.spec.srcs[0].scale = values[v].desc.scale;  // the channels this part was written in
        s.label = cat("slice ", g.op(id).name);
        list.push_back(std::move(s));
      }
      c0 += c;
    }
    op_tasks[convs[0]] = std::move(list);
  }

  std::vector<std::string> op_names(const std::vector<OpId>& ids) const {
    std::vector<std::string> names;
    for (OpId id : ids) names.push_back(g.op(id).name);
    return names;
  }

  graph::OpWeights merged_weights(const std::vector<OpId>& convs, const graph::Conv2dAttrs& m) {
    graph::OpWeights out;
    const int64_t in = m.in_channels, kh = m.kernel.h, kw = m.kernel.w;
    out.weight.assign(static_cast<size_t>(m.out_channels * in * kh * kw), 0.0f);
    if (m.bias) out.bias.assign(static_cast<size_t>(m.out_channels), 0.0f);
    int64_t o_base = 0;
    for (OpId id : convs) {
      const graph::Op& op = g.op(id);
      const auto& a = op.attrs_as<graph::Conv2dAttrs>();
      const graph::OpWeights* w = weights.find(op.name);
      if (!w) throw graph::GraphError(cat("op '", op.name, "' (conv2d): no weights"));
      const int64_t dh = m.padding.top - a.padding.top;  // centres the smaller kernel
      const int64_t dw = m.padding.left - a.padding.left;
      for (int64_t o = 0; o < a.out_channels; ++o)
        for (int64_t c = 0; c < in; ++c)
          for (int64_t y = 0; y < a.kernel.h; ++y)
            for (int64_t x = 0; x < a.kernel.w; ++x) {
              out.weight[static_cast<size_t>((((o_base + o) * in + c) * kh + y + dh) * kw + x + dw)] =
                  w->weight[static_cast<size_t>(((o * in + c) * a.kernel.h + y) * a.kernel.w + x)];
            }
      if (a.bias) {
        std::copy(w->bias.begin(), w->bias.end(), out.bias.begin() + o_base);
      }
      o_base += a.out_channels;
    }
    return out;
  }

  void plan_concat(const graph::Op& op) {
    const int out = op.outputs[0];
    const TensorDesc od = values[out].desc;  // a copy: new_value() may move `values`
    // Views only when every part is a dense slice of the output.
    std::vector<size_t> offsets;
    int64_t c0 = 0;
    bool all_dense = true;
    for (ValueId v : op.inputs) {
      size_t offset = 0;
      const int64_t c = values[v].desc.shape[1];
      all_dense = all_dense && dense_slice(od, c0, c, &offset);
      offsets.push_back(offset);
      c0 += c;
    }
    if (!all_dense) {
      std::vector<int> srcs;
      for (size_t i = 0; i < op.inputs.size(); ++i) srcs.push_back(src_value(op, i));
      op_tasks[op.id].push_back(op_task(op, op.attrs, srcs, {out}, nullptr));
      return;
    }
    c0 = 0;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const ValueId v = op.inputs[i];
      const int64_t c = values[v].desc.shape[1];
      if (const size_t taken = place_merged_run(op, i, offsets[i]); taken > 0) {
        i += taken - 1;  // a merged convolution's whole output lands in the concatenation
        continue;
      }
      const bool repeated = std::count(op.inputs.begin(), op.inputs.end(), v) > 1;
      const graph::Value& value = g.value(v);
      const bool produced = value.producer != graph::kNoOp ||
                            (options.inputs_may_be_views && alias[v] == static_cast<int>(v));
      const bool eligible = produced && values[v].parent < 0 &&
                            !repeated && same_storage(values[v].desc, od) &&
                            (value.producer == graph::kNoOp ||
                             g.op(value.producer).outputs.size() == 1);
      if (eligible) {
        make_view(v, out, offsets[i]);
      } else {
        const int part = new_value(with_channels(od, c));
        make_view(part, out, offsets[i]);
        --plan.memory_.views;  // the slice is a view, but the part is copied into it
        ++plan.memory_.copies;
        op_tasks[op.id].push_back(copy_task(v, part, cat("copy into ", op.name)));
      }
      c0 += c;
    }
  }

  // When inputs i, i+1, ... of a concatenation are, in order, all the parts of one merged
  // convolution's output, that output itself becomes the view (no copies). Returns the number of
  // inputs covered, 0 when the pattern does not apply.
  size_t place_merged_run(const graph::Op& op, size_t i, size_t offset) {
    const int parent = values[op.inputs[i]].parent;
    if (parent < static_cast<int>(g.num_values()) || values[parent].parent >= 0) return 0;
    const auto& parts = values[parent].children;
    if (i + parts.size() > op.inputs.size()) return 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      if (parts[k] != op.inputs[i + k]) return 0;
      if (std::count(op.inputs.begin(), op.inputs.end(), op.inputs[i + k]) > 1) return 0;
    }
    const TensorDesc& whole = values[op.outputs[0]].desc;
    if (values[parent].desc.layout != whole.layout || values[parent].desc.dtype != whole.dtype) {
      return 0;
    }
    for (size_t k = 0; k < parts.size(); ++k) {
      if (values[parts[k]].desc.scale != whole.scale) return 0;
    }
    make_view(parent, op.outputs[0], offset);
    return parts.size();
  }

  void plan_split(const graph::Op& op) {
    const int in = src_value(op, 0);
    const TensorDesc id = values[in].desc;
    int64_t c0 = op.kind == OpKind::kSlice ? op.attrs_as<graph::SliceAttrs>().begin : 0;
    std::vector<size_t> offsets;
    bool all_dense = true;
    for (ValueId v : op.outputs) {
      size_t offset = 0;
      all_dense = all_dense && dense_slice(id, c0, values[v].desc.shape[1], &offset);
      offsets.push_back(offset);
      c0 += values[v].desc.shape[1];
    }
    for (ValueId v : op.outputs) all_dense = all_dense && same_storage(values[v].desc, id);
    if (all_dense) {
      for (size_t i = 0; i < op.outputs.size(); ++i) make_view(op.outputs[i], in, offsets[i]);
      return;
    }
    std::vector<int> dsts(op.outputs.begin(), op.outputs.end());
    op_tasks[op.id].push_back(op_task(op, op.attrs, {in}, dsts, nullptr));
  }

  void plan_op(const graph::Op& op) {
    switch (op.kind) {
      case OpKind::kConcat:
        plan_concat(op);
        return;
      case OpKind::kSplit:
      case OpKind::kSlice:
        plan_split(op);
        return;
      case OpKind::kIdentity: {
        const int in = src_value(op, 0);
        if (same_storage(values[in].desc, values[op.outputs[0]].desc)) {
          make_view(op.outputs[0], in, 0);
        } else {
          op_tasks[op.id].push_back(copy_task(in, op.outputs[0], op.name));
        }
        return;
      }
      case OpKind::kFlatten: {
        const int in = src_value(op, 0);
        if ((values[in].desc.layout == Layout::kNCHW || values[in].desc.layout == Layout::kNC) &&
            values[in].desc.dtype == values[op.outputs[0]].desc.dtype) {
          make_view(op.outputs[0], in, 0);  // plain order is already the N×(C·H·W) matrix
          return;
        }
        break;
      }
      default:
        break;
    }
    std::vector<int> srcs;
    for (size_t i = 0; i < op.inputs.size(); ++i) srcs.push_back(src_value(op, i));
    std::vector<int> dsts(op.outputs.begin(), op.outputs.end());
    Task task = op_task(op, op.attrs, srcs, dsts, weights.find(op.name));
    conform_inputs(op, task);
    op_tasks[op.id].push_back(std::move(task));
  }

  // When the backend cannot run a kernel with its inputs in their layouts, converts the rank-4
  // inputs whose layout differs from the output's (each consumer its own copy, so that the copy
  // runs on the consumer's stream right before it).
  void conform_inputs(const graph::Op& op, Task& task) {
    if (task.dsts.empty() || backend.supports(task.spec).empty()) return;
    const TensorDesc out = values[task.dsts[0]].desc;
    if (out.shape.rank() != 4) return;
    for (size_t i = 0; i < task.srcs.size(); ++i) {
      const TensorDesc in = values[task.srcs[i]].desc;
      if (in.shape.rank() != 4 || in.layout == out.layout) continue;
      TensorDesc converted = in;
      converted.layout = out.layout;
      const int copy = new_value(converted);
      op_tasks[op.id].push_back(copy_task(task.srcs[i], copy, cat("convert for ", op.name)));
      task.srcs[i] = copy;
      task.spec.srcs[i] = converted;
    }
  }

  // ---- 3. Launch order, streams, threads --------------------------------------------------
  void order_tasks() {
    op_tasks.assign(g.num_ops(), {});
    for (const Stage& stage : schedule.stages) {
      if (stage.kind == StageKind::kMerge) plan_merge(stage);
    }
    std::vector<bool> merged(g.num_ops(), false);
    for (const Stage& stage : schedule.stages) {
      if (stage.kind != StageKind::kMerge) continue;
      for (OpId id : stage.ops()) merged[id] = true;
    }
    for (const graph::Op& op : g.ops()) {
      if (!merged[op.id]) plan_op(op);
    }
    const int max_streams = std::max(1, options.max_streams);
    for (size_t s = 0; s < schedule.stages.size(); ++s) {
      const Stage& stage = schedule.stages[s];
      if (stage.kind == StageKind::kMerge) {
        emit(op_tasks[stage.ops()[0]], 0, parallelism, static_cast<int>(s) + 1);
        continue;
      }
      const int groups = static_cast<int>(stage.groups.size());
      const int threads = std::max(1, parallelism / std::min(groups, max_streams));
      // Round-robin over groups so that every stream gets work early.
      size_t longest = 0;
      for (const auto& group : stage.groups) longest = std::max(longest, group.size());
      for (size_t pos = 0; pos < longest; ++pos) {
        for (int gi = 0; gi < groups; ++gi) {
          if (pos >= stage.groups[gi].size()) continue;
          emit(op_tasks[stage.groups[gi][pos]], gi % max_streams, threads, static_cast<int>(s) + 1);
        }
      }
    }
  }

  void emit(std::vector<Task>& list, int stream, int threads, int stage) {
    for (Task& t : list) {
      t.stream = stream;
      t.spec.threads = threads;
      t.stage = stage;
      tasks.push_back(std::move(t));
    }
    list.clear();
  }

  // Outputs that are not in plain layout get a copy into a plain staging tensor.
  std::vector<int> output_values;  // per graph output: the value downloaded

  void stage_outputs() {
    for (ValueId v : g.outputs()) {
      values[v].pinned = true;
      if (plain_layout(values[v].desc) || !options.plain_outputs) {
        output_values.push_back(v);
        continue;
      }
      TensorDesc plain = values[v].desc;
      plain.layout = *graph::default_layout(plain.shape.rank());
      const int staged = new_value(plain);
      values[staged].pinned = true;
      Task t = copy_task(v, staged, "output " + g.value(v).name);
      t.stage = 0;
      tasks.push_back(std::move(t));
      output_values.push_back(staged);
    }
  }

  // ---- 4. Dependencies, events, happens-before --------------------------------------------
  std::vector<int> root_of;
  std::vector<Bits> before;  // before[t]: tasks that happen before task t

  int root(int v) const {
    while (values[v].parent >= 0) v = values[v].parent;
    return v;
  }

  void collect_subtree_writers(int v, std::vector<int>& out) const {
    out.insert(out.end(), values[v].writers.begin(), values[v].writers.end());
    for (int c : values[v].children) collect_subtree_writers(c, out);
  }

  // Tasks that must finish before a task reading value v can start.
  std::vector<int> producers_of(int v) const {
    std::vector<int> deps;
    collect_subtree_writers(v, deps);
    for (int p = values[v].parent; p >= 0; p = values[p].parent) {
      deps.insert(deps.end(), values[p].writers.begin(), values[p].writers.end());
    }
    return deps;
  }

  void link() {
    const size_t n = tasks.size();
    for (size_t t = 0; t < n; ++t) {
      for (int v : tasks[t].dsts) values[v].writers.push_back(static_cast<int>(t));
    }
    before.assign(n, Bits(n));
    std::vector<int> last_on_stream(static_cast<size_t>(std::max(1, options.max_streams)), -1);
    int events = 0;
    std::vector<int> event_of(n, -1);
    plan.kernels_.resize(n);
    for (size_t t = 0; t < n; ++t) {
      std::set<int> deps;
      for (int v : tasks[t].srcs)
        for (int d : producers_of(v))
          if (d < static_cast<int>(t)) deps.insert(d);
      // Write-after-write of overlapping regions: a task writing a slice waits for whole writes.
      for (int v : tasks[t].dsts)
        for (int p = values[v].parent; p >= 0; p = values[p].parent)
          for (int d : values[p].writers)
            if (d < static_cast<int>(t)) deps.insert(d);
      const int stream = tasks[t].stream;
      if (last_on_stream[stream] >= 0) {
        before[t].merge(before[last_on_stream[stream]]);
        before[t].set(last_on_stream[stream]);
      }
      // Cross-stream dependencies need an event; per other stream only the latest one.
      std::map<int, int> latest;  // stream -> latest dependency
      for (int d : deps) {
        before[t].merge(before[d]);
        before[t].set(d);
        if (tasks[d].stream != stream) {
          auto [it, inserted] = latest.emplace(tasks[d].stream, d);
          if (!inserted) it->second = std::max(it->second, d);
        }
      }
      for (const auto& [other, d] : latest) {
        if (event_of[d] < 0) event_of[d] = events++;
        plan.kernels_[t].waits.push_back(event_of[d]);
      }
      last_on_stream[stream] = static_cast<int>(t);
    }
    for (size_t t = 0; t < n; ++t) plan.kernels_[t].record = event_of[t];
    plan.num_events_ = events;
    int streams = 1;
    for (const Task& t : tasks) streams = std::max(streams, t.stream + 1);
    plan.num_streams_ = streams;
  }

  // ---- 5. Memory: roots, reuse, buffers, binding -----------------------------------------
  void allocate() {
    const size_t n = tasks.size();
    root_of.assign(values.size(), -1);
    for (size_t v = 0; v < values.size(); ++v) root_of[v] = root(static_cast<int>(v));
    // Which values are in use at all (views of unused values still count through their root).
    std::vector<bool> used_root(values.size(), false);
    std::vector<Bits> accessors(values.size(), Bits(n));
    std::vector<std::vector<int>> root_writers(values.size());
    std::vector<int> first_access(values.size(), static_cast<int>(n));
    for (size_t t = 0; t < n; ++t) {
      for (int v : tasks[t].srcs) {
        const int r = root_of[v];
        used_root[r] = true;
        accessors[r].set(t);
        first_access[r] = std::min(first_access[r], static_cast<int>(t));
      }
      for (int v : tasks[t].dsts) {
        const int r = root_of[v];
        used_root[r] = true;
        accessors[r].set(t);
        root_writers[r].push_back(static_cast<int>(t));
        first_access[r] = std::min(first_access[r], static_cast<int>(t));
      }
    }
    for (ValueId v : g.inputs()) used_root[root_of[v]] = true;
    for (int v : output_values) used_root[root_of[v]] = true;
    for (size_t v = 0; v < values.size(); ++v) {
      if (values[v].pinned) values[root_of[v]].pinned = true;
    }

    std::vector<int> roots;
    for (size_t v = 0; v < values.size(); ++v) {
      if (root_of[v] == static_cast<int>(v) && used_root[v]) roots.push_back(static_cast<int>(v));
    }
    std::sort(roots.begin(), roots.end(),
              [&](int a, int b) { return first_access[a] < first_access[b]; });

    struct Slot {
      size_t bytes = 0;
      Bits accessors;
    };
    std::vector<Slot> slots;
    std::vector<int> slot_of(values.size(), -1);
    for (int r : roots) {
      const size_t bytes = static_cast<size_t>(values[r].desc.bytes());
      plan.memory_.activation_bytes_without_reuse += bytes;
      int chosen = -1;
      if (options.reuse_memory && !values[r].pinned) {
        size_t best_waste = SIZE_MAX;
        for (size_t s = 0; s < slots.size(); ++s) {
          bool free = true;
          for (int w : root_writers[r]) free = free && slots[s].accessors.subset_of(before[w]);
          if (!free) continue;
          const size_t grown = std::max(slots[s].bytes, bytes);
          const size_t waste = grown - std::min(slots[s].bytes, bytes);
          if (waste < best_waste) {
            best_waste = waste;
            chosen = static_cast<int>(s);
          }
        }
      }
      if (chosen < 0 || values[r].pinned) {
        slots.push_back(Slot{0, Bits(n)});
        chosen = static_cast<int>(slots.size()) - 1;
        if (values[r].pinned) slots.back().accessors = all_tasks(n);  // never shared
      }
      slots[chosen].bytes = std::max(slots[chosen].bytes, bytes);
      slots[chosen].accessors.merge(accessors[r]);
      slot_of[r] = chosen;
    }
    std::vector<void*> slot_data(slots.size(), nullptr);
    for (size_t s = 0; s < slots.size(); ++s) {
      plan.buffers_.push_back(backend.allocate(slots[s].bytes));
      slot_data[s] = plan.buffers_.back()->data();
      plan.memory_.activation_bytes += slots[s].bytes;
    }
    // Absolute addresses of every value.
    address.assign(values.size(), nullptr);
    for (size_t v = 0; v < values.size(); ++v) {
      const int r = root_of[v];
      if (slot_of[r] < 0) continue;
      size_t offset = 0;
      for (int u = static_cast<int>(v); u != r; u = values[u].parent) offset += values[u].offset;
      address[v] = static_cast<char*>(slot_data[slot_of[r]]) + offset;
    }
  }

  static Bits all_tasks(size_t n) {
    Bits b(n);
    for (size_t i = 0; i < n; ++i) b.set(i);
    return b;
  }

  std::vector<void*> address;

  TensorRef ref(int v) const { return TensorRef{address[v], values[v].desc}; }

  void create_kernels() {
    std::vector<size_t> workspace(static_cast<size_t>(plan.num_streams_), 0);
    for (size_t t = 0; t < tasks.size(); ++t) {
      Task& task = tasks[t];
      PlannedKernel& k = plan.kernels_[t];
      if (task.copy) {
        k.kernel = backend.create_copy(values[task.srcs[0]].desc, values[task.dsts[0]].desc);
      } else {
        if (const std::string why = backend.supports(task.spec); !why.empty()) {
          throw unsupported(backend.name(), task.spec, why);
        }
        k.kernel = backend.create_kernel(task.spec);
      }
      k.stream = task.stream;
      k.stage = task.stage;
      k.label = task.label;
      k.ops = task.ops;
      workspace[task.stream] = std::max(workspace[task.stream], k.kernel->workspace_bytes());
    }
    std::vector<void*> arena(workspace.size(), nullptr);
    for (size_t s = 0; s < workspace.size(); ++s) {
      if (workspace[s] == 0) continue;
      plan.buffers_.push_back(backend.allocate(workspace[s]));
      arena[s] = plan.buffers_.back()->data();
      plan.memory_.workspace_bytes += workspace[s];
    }
    for (size_t t = 0; t < tasks.size(); ++t) {
      std::vector<TensorRef> srcs, dsts;
      for (int v : tasks[t].srcs) srcs.push_back(ref(v));
      for (int v : tasks[t].dsts) dsts.push_back(ref(v));
      plan.kernels_[t].kernel->bind(srcs, dsts, arena[tasks[t].stream]);
    }
  }

  void build() {
    graph::check_weights(g, weights);
    if (!schedule.meta.graph_hash.empty() && schedule.meta.graph_hash != scheduler::graph_hash(g)) {
      throw scheduler::ScheduleError(cat("the schedule was made for another graph ('",
                                         schedule.meta.network, "', hash ", schedule.meta.graph_hash,
                                         "), not for '", g.name(), "'"));
    }
    scheduler::validate(g, schedule);
    describe_values();
    order_tasks();
    stage_outputs();
    link();
    allocate();
    create_kernels();
    for (ValueId v : g.inputs()) plan.inputs_.push_back(ref(v));
    for (int v : output_values) plan.outputs_.push_back(ref(v));
  }
};

graph::Layout activation_layout(const Backend& backend, const graph::Graph& graph,
                                const PlanOptions& options) {
  if (options.layout) return *options.layout;
  return backend.preferred_layout(graph::is_quantised(graph) ? graph::DataType::kU8
                                                             : graph::DataType::kF32);
}

ExecutionPlan::ExecutionPlan(const graph::Graph& graph, const scheduler::Schedule& schedule,
                             const graph::WeightStore& weights, Backend& backend,
                             const PlanOptions& options)
    : backend_(backend), layout_(activation_layout(backend, graph, options)) {
  merged_weights_.reserve(schedule.stages.size());  // kernels keep pointers into it
  Builder(graph, schedule, weights, backend, options, *this).build();
}

ExecutionPlan::~ExecutionPlan() = default;

namespace {

// Host tensors are f32; f16 tensors are converted on the host on the way in and out, 8-bit
// tensors quantised (round to nearest, saturate) and dequantised with their scale.
template <class T>
std::vector<T> quantise_host(const std::vector<float>& data, float scale) {
  std::vector<T> q(data.size());
  const float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<T>(std::clamp(std::nearbyint(data[i] / scale), lo, hi));
  }
  return q;
}

template <class T>
void dequantise_host(Backend& backend, const TensorRef& ref, std::vector<float>& out) {
  std::vector<T> q(out.size());
  backend.download(q.data(), ref.data, q.size());
  for (size_t i = 0; i < q.size(); ++i) out[i] = static_cast<float>(q[i]) * ref.desc.scale;
}

void upload_tensor(Backend& backend, const TensorRef& ref, const HostTensor& t) {
  switch (ref.desc.dtype) {
    case graph::DataType::kU8: {
      const auto q = quantise_host<uint8_t>(t.data, ref.desc.scale);
      backend.upload(ref.data, q.data(), q.size());
      return;
    }
    case graph::DataType::kI8: {
      const auto q = quantise_host<int8_t>(t.data, ref.desc.scale);
      backend.upload(ref.data, q.data(), q.size());
      return;
    }
    case graph::DataType::kF32:
      backend.upload(ref.data, t.data.data(), t.data.size() * sizeof(float));
      return;
    case graph::DataType::kF16: {
      std::vector<uint16_t> half(t.data.size());
      for (size_t i = 0; i < half.size(); ++i) half[i] = float_to_half(t.data[i]);
      backend.upload(ref.data, half.data(), half.size() * sizeof(uint16_t));
      return;
    }
    default:
      throw BackendError(cat("cannot upload a host tensor into a ",
                             graph::to_string(ref.desc.dtype), " tensor"));
  }
}

HostTensor download_tensor(Backend& backend, const TensorRef& ref) {
  HostTensor t{ref.desc.shape, std::vector<float>(static_cast<size_t>(ref.desc.shape.numel()))};
  switch (ref.desc.dtype) {
    case graph::DataType::kF32:
      backend.download(t.data.data(), ref.data, t.data.size() * sizeof(float));
      break;
    case graph::DataType::kF16: {
      std::vector<uint16_t> half(t.data.size());
      backend.download(half.data(), ref.data, half.size() * sizeof(uint16_t));
      for (size_t i = 0; i < half.size(); ++i) t.data[i] = half_to_float(half[i]);
      break;
    }
    case graph::DataType::kU8:
      dequantise_host<uint8_t>(backend, ref, t.data);
      break;
    case graph::DataType::kI8:
      dequantise_host<int8_t>(backend, ref, t.data);
      break;
    default:
      throw BackendError(cat("cannot download a ", graph::to_string(ref.desc.dtype),
                             " tensor into a host tensor"));
  }
  return t;
}

}  // namespace

Stream& StreamPool::get(size_t i) {
  while (streams_.size() <= i) streams_.push_back(backend_.create_stream());
  return *streams_[i];
}

Executor::Executor(ExecutionPlan& plan, StreamPool* pool, ExecutorOptions options)
    : plan_(plan), options_(options) {
  for (int s = 0; s < plan.num_streams(); ++s) {
    if (pool) {
      streams_.push_back(&pool->get(static_cast<size_t>(s)));
    } else {
      owned_.push_back(plan.backend().create_stream());
      streams_.push_back(owned_.back().get());
    }
  }
  for (int e = 0; e < plan.num_events(); ++e) events_.push_back(plan.backend().create_event());
}

Executor::~Executor() {
  // Streams must be idle before kernels (owned by the plan) can go away.
  for (Stream* s : streams_) {
    try {
      s->synchronize();
    } catch (...) {
    }
  }
}

void Executor::set_inputs(const std::vector<HostTensor>& inputs) {
  const auto& refs = plan_.inputs();
  if (inputs.size() != refs.size()) {
    throw BackendError(cat("the graph takes ", refs.size(), " input(s), got ", inputs.size()));
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    if (inputs[i].shape != refs[i].desc.shape ||
        inputs[i].data.size() != static_cast<size_t>(refs[i].desc.shape.numel())) {
      throw BackendError(cat("input ", i, " has shape ", inputs[i].shape.to_string(),
                             " but the graph expects ", refs[i].desc.shape.to_string()));
    }
    upload_tensor(plan_.backend(), refs[i], inputs[i]);
  }
}

void Executor::enqueue(std::vector<KernelTiming>* timings) {
  const auto& kernels = plan_.kernels();
  const auto start = std::chrono::steady_clock::now();
  if (timings) timings->assign(kernels.size(), KernelTiming{});
  auto now_us = [start] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
        .count();
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    const PlannedKernel& k = kernels[i];
    Stream& stream = *streams_[k.stream];
    for (int e : k.waits) stream.wait(*events_[e]);
    if (timings) {
      KernelTiming* slot = &(*timings)[i];
      slot->kernel = i;
      stream.host_callback([slot, now_us] { slot->start_us = now_us(); });
    }
    k.kernel->launch(stream);
    if (timings) {
      KernelTiming* slot = &(*timings)[i];
      stream.host_callback([slot, now_us] { slot->end_us = now_us(); });
    }
    if (k.record >= 0) stream.record(*events_[k.record]);
  }
}

bool Executor::replay() {
  if (!options_.graph || !plan_.backend().can_capture()) return false;
  if (!capture_tried_) {
    capture_tried_ = true;
    // One ordinary run first: libraries allocate workspaces and load kernels lazily on their first
    // call, which must not happen while a capture records.
    enqueue(nullptr);
    for (Stream* s : streams_) s->synchronize();
    std::vector<Stream*> others(streams_.begin() + 1, streams_.end());
    captured_ = plan_.backend().capture(*streams_[0], others, [this] { enqueue(nullptr); });
  }
  if (!captured_) return false;
  captured_->launch(*streams_[0]);
  return true;
}

void Executor::execute(std::vector<KernelTiming>* timings) {
  if (timings || !replay()) enqueue(timings);
  for (Stream* s : streams_) s->synchronize();
}

double Executor::execute_repeated(int times) {
  const auto& kernels = plan_.kernels();
  if (barrier_.empty() && streams_.size() > 1) {
    for (size_t s = 0; s < streams_.size(); ++s) barrier_.push_back(plan_.backend().create_event());
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (options_.graph && (captured_ || !capture_tried_)) {
    // Replays on the origin stream follow each other: no barrier needed.
    bool replayed = true;
    for (int r = 0; r < times && replayed; ++r) replayed = replay();
    if (replayed) {
      for (Stream* s : streams_) s->synchronize();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                 .count() /
             std::max(1, times);
    }
  }
  for (int r = 0; r < times; ++r) {
    for (const PlannedKernel& k : kernels) {
      Stream& stream = *streams_[k.stream];
      for (int e : k.waits) stream.wait(*events_[e]);
      k.kernel->launch(stream);
      if (k.record >= 0) stream.record(*events_[k.record]);
    }
    if (streams_.size() > 1) {  // every stream waits for all others before the next repetition
      for (size_t s = 0; s < streams_.size(); ++s) streams_[s]->record(*barrier_[s]);
      for (size_t s = 0; s < streams_.size(); ++s)
        for (size_t o = 0; o < streams_.size(); ++o)
          if (o != s) streams_[s]->wait(*barrier_[o]);
    }
  }
  for (Stream* s : streams_) s->synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         std::max(1, times);
}

std::vector<double> Executor::isolated_kernel_ms(int repeats) {
  std::vector<double> result;
  for (const PlannedKernel& k : plan_.kernels()) {
    Stream& stream = *streams_[k.stream];
    k.kernel->launch(stream);  // warm
    stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) k.kernel->launch(stream);
    stream.synchronize();
    result.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        repeats);
  }
  return result;
}

std::vector<HostTensor> Executor::outputs() const {
  std::vector<HostTensor> result;
  for (const TensorRef& ref : plan_.outputs()) result.push_back(download_tensor(plan_.backend(), ref));
  return result;
}

std::vector<HostTensor> Executor::run(const std::vector<HostTensor>& inputs) {
  set_inputs(inputs);
  execute();
  return outputs();
}

}  // namespace stagecraft::executor
