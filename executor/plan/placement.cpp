// Plan pass 2: placement. Each op becomes tasks (or views: concatenation parts, split outputs,
// merged convolution parts and identities are placed inside other tensors where the layout allows,
// so they cost no copy), the tasks are put in launch order stage by stage, groups on streams, and
// outputs in a non-plain layout get a copy into a plain staging tensor.
#include <algorithm>

#include "common/strings.h"
#include "executor/kernel_math.h"
#include "executor/plan/plan_ir.h"
#include "graph/errors.h"

namespace stagecraft::executor::planning {

namespace {

// Row-major: the elements in their logical order.
bool plain_layout(const TensorDesc& d) {
  return d.layout == graph::Layout::kRowMajor ||
         d.layout == graph::default_layout(d.shape.rank()).value_or(d.layout);
}

class Placement {
 public:
  explicit Placement(PlanIR& ir) : ir_(ir), g_(ir.g) {}

  void run() {
    order_tasks();
    stage_outputs();
  }

 private:
  // When the backend cannot run a kernel natively with its inputs in their layouts, converts the
  // rank-4 inputs whose layout differs from the output's (each consumer its own copy, so that the
  // copy runs on the consumer's stream right before it).
  void conform_inputs(const graph::Op& op, Task& task) {
    if (task.dsts.empty() || ir_.backend.supports(task.spec).is_native()) return;
    const TensorDesc out = ir_.values[task.dsts[0]].desc;
    if (out.shape.rank() != 4) return;
    for (size_t i = 0; i < task.srcs.size(); ++i) {
      const TensorDesc in = ir_.values[task.srcs[i]].desc;
      if (in.shape.rank() != 4 || in.layout == out.layout) continue;
      TensorDesc converted = in;
      converted.layout = out.layout;
      const int copy = ir_.new_value(converted);
      ir_.op_tasks[op.id].push_back(ir_.copy_task(task.srcs[i], copy, cat("convert for ", op.name)));
      task.srcs[i] = copy;
      task.spec.srcs[i] = converted;
    }
  }

  std::vector<std::string> op_names(const std::vector<OpId>& ids) const {
    std::vector<std::string> names;
    for (OpId id : ids) names.push_back(g_.op(id).name);
    return names;
  }

  // The weights of a merged convolution: each part's kernel zero-padded and centred in the
  // largest, output channels stacked.
  graph::OpWeights merged_weights(const std::vector<OpId>& convs, const graph::Conv2dAttrs& m) const {
    graph::OpWeights out;
    const ConvWeightDims merged = conv_weight_dims(m);
    out.weight.assign(static_cast<size_t>(merged.size()), 0.0f);
    if (m.bias) out.bias.assign(static_cast<size_t>(m.out_channels), 0.0f);
    int64_t o_base = 0;
    for (OpId id : convs) {
      const graph::Op& op = g_.op(id);
      const auto& a = op.attrs_as<graph::Conv2dAttrs>();
      const graph::OpWeights* w = ir_.weights.find(op.name);
      if (!w) throw graph::GraphError(cat("op '", op.name, "' (conv2d): no weights"));
      place_kernel(w->weight, conv_weight_dims(a), out.weight, merged, o_base,
                   m.padding.top - a.padding.top, m.padding.left - a.padding.left);
      if (a.bias) std::copy(w->bias.begin(), w->bias.end(), out.bias.begin() + o_base);
      o_base += a.out_channels;
    }
    return out;
  }

  void plan_merge(const Stage& stage) {
    const std::vector<OpId> convs = stage.ops();
    const graph::Op& first = g_.op(convs[0]);
    const graph::Conv2dAttrs attrs = scheduler::merged_conv_attrs(g_, convs);
    const TensorDesc out = with_channels(ir_.values[first.outputs[0]].desc, attrs.out_channels);
    const int merged = ir_.new_value(out);
    ir_.merged_weights.push_back(std::make_unique<graph::OpWeights>(merged_weights(convs, attrs)));
    Task t = ir_.op_task(first, attrs, {ir_.src_value(first, 0)}, {merged},
                         ir_.merged_weights.back().get());
    t.ops = convs;
    if (graph::is_int8(out.dtype)) {
      for (OpId id : convs) {
        const TensorDesc& part = ir_.values[g_.op(id).outputs[0]].desc;
        t.spec.dst_channel_scales.insert(t.spec.dst_channel_scales.end(),
                                         static_cast<size_t>(part.shape[1]), part.scale);
      }
    }
    t.spec.name = t.label = cat("merge(", join(op_names(convs), ", "), ")");
    conform_inputs(first, t);  // input conversions (if any) go first
    std::vector<Task> list = std::move(ir_.op_tasks[convs[0]]);
    list.push_back(std::move(t));
    int64_t c0 = 0;
    for (OpId id : convs) {
      const int v = g_.op(id).outputs[0];
      const int64_t c = ir_.values[v].desc.shape[1];
      size_t offset = 0;
      if (ir_.values[v].desc.layout == out.layout && ir_.values[v].desc.dtype == out.dtype &&
          dense_slice(out, c0, c, &offset)) {
        ir_.make_view(v, merged, offset);  // quantised parts keep their scales (per channel)
      } else {
        graph::SliceAttrs slice;
        slice.begin = c0;
        slice.end = c0 + c;
        Task s = ir_.op_task(g_.op(id), slice, {merged}, {v}, nullptr);
        s.spec.kind = OpKind::kSlice;
        s.spec.srcs[0].scale = ir_.values[v].desc.scale;  // the channels this part was written in
        s.label = cat("slice ", g_.op(id).name);
        list.push_back(std::move(s));
      }
      c0 += c;
    }
    ir_.op_tasks[convs[0]] = std::move(list);
  }

  // Byte offsets of a concatenation's parts inside its output; false unless every part is a dense
  // slice of it (only then can the parts be views).
  bool part_offsets(const graph::Op& op, std::vector<size_t>* offsets) const {
    const TensorDesc& od = ir_.values[op.outputs[0]].desc;
    int64_t c0 = 0;
    for (ValueId v : op.inputs) {
      size_t offset = 0;
      const int64_t c = ir_.values[v].desc.shape[1];
      if (!dense_slice(od, c0, c, &offset)) return false;
      offsets->push_back(offset);
      c0 += c;
    }
    return true;
  }

  // Concatenations whose inputs are a contiguous run of another's, as DenseNet's growing feature
  // lists cat(x0, x1), cat(x0, x1, x2), ...: each is placed inside the smallest one that contains
  // it, so that every part is written once, where the largest concatenation wants it. Fills
  // host_[op] = (containing concatenation, index of the run's first input).
  void find_concat_hosts() {
    host_.assign(g_.num_ops(), {graph::kNoOp, 0});
    std::vector<OpId> concats;
    for (const graph::Op& op : g_.ops()) {
      if (op.kind == OpKind::kConcat && op.inputs.size() > 1) concats.push_back(op.id);
    }
    for (OpId a : concats) {
      const auto& run = g_.op(a).inputs;
      for (OpId b : concats) {
        const auto& all = g_.op(b).inputs;
        // (size, id) grows along host links, so they form no cycles.
        if (b == a || all.size() < run.size() || (all.size() == run.size() && b < a)) continue;
        const OpId current = host_[a].first;
        if (current != graph::kNoOp && g_.op(current).inputs.size() <= all.size()) continue;
        const auto at = std::search(all.begin(), all.end(), run.begin(), run.end());
        if (at != all.end()) host_[a] = {b, static_cast<size_t>(at - all.begin())};
      }
    }
  }

  // Places a concatenation's output inside its host's (find_concat_hosts) when both hold their
  // parts as views and store elements alike. Returns false when the parts should rather be copied
  // here: the host holds its parts as views but this output cannot live inside it (a graph
  // output, say), so the parts stay free to be written straight into the host.
  bool place_in_host(const graph::Op& op) {
    const auto [host, first] = host_[op.id];
    const int out = op.outputs[0];
    if (host == graph::kNoOp || ir_.values[out].parent >= 0) return true;
    const graph::Op& h = g_.op(host);
    std::vector<size_t> host_offsets, own;
    if (!part_offsets(h, &host_offsets) || !same_storage(ir_.values[out].desc, ir_.values[h.outputs[0]].desc)) {
      return true;  // the host copies its parts anyway
    }
    if (g_.is_output(out) || !part_offsets(op, &own)) return false;
    ir_.make_view(out, h.outputs[0], host_offsets[first]);
    return true;
  }

  // Whether value v is already a view at `offset` inside `out` (placed there for a smaller
  // concatenation inside this one): its producer writes it where this concatenation wants it.
  // (Copies are never reused this way: the task that made one need not run before this
  // concatenation's readers.)
  bool already_placed(int v, int out, size_t offset) const {
    return ir_.values[v].parent >= 0 && ir_.root(v) == ir_.root(out) &&
           ir_.offset_in_root(v) == ir_.offset_in_root(out) + offset;
  }

  void plan_concat(const graph::Op& op) {
    const int out = op.outputs[0];
    const bool parts_may_be_views = place_in_host(op);
    const TensorDesc od = ir_.values[out].desc;  // a copy: new_value() may move `values`
    // Views only when every part is a dense slice of the output.
    std::vector<size_t> offsets;
    const bool all_dense = part_offsets(op, &offsets);
    if (!all_dense) {
      std::vector<int> srcs;
      for (size_t i = 0; i < op.inputs.size(); ++i) srcs.push_back(ir_.src_value(op, i));
      Task t = ir_.op_task(op, op.attrs, srcs, {out}, nullptr);
      conform_inputs(op, t);
      ir_.op_tasks[op.id].push_back(std::move(t));
      return;
    }
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const ValueId v = op.inputs[i];
      const int64_t c = ir_.values[v].desc.shape[1];
      if (already_placed(static_cast<int>(v), out, offsets[i])) continue;
      if (const size_t taken = parts_may_be_views ? place_merged_run(op, i, offsets[i]) : 0; taken > 0) {
        i += taken - 1;  // a merged convolution's whole output lands in the concatenation
        continue;
      }
      const bool repeated = std::count(op.inputs.begin(), op.inputs.end(), v) > 1;
      const graph::Value& value = g_.value(v);
      const bool produced = value.producer != graph::kNoOp ||
                            (ir_.options.inputs_may_be_views && ir_.alias[v] == static_cast<int>(v));
      const bool eligible = parts_may_be_views && produced && ir_.values[v].parent < 0 && !repeated &&
                            same_storage(ir_.values[v].desc, od) &&
                            (value.producer == graph::kNoOp || g_.op(value.producer).outputs.size() == 1);
      if (eligible) {
        ir_.make_view(v, out, offsets[i]);
      } else {
        const int part = ir_.new_value(with_channels(od, c));
        ir_.make_view(part, out, offsets[i]);
        --ir_.memory.views;  // the slice is a view, but the part is copied into it
        ++ir_.memory.copies;
        ir_.op_tasks[op.id].push_back(ir_.copy_task(v, part, cat("copy into ", op.name)));
      }
    }
  }

  // When inputs i, i+1, ... of a concatenation are, in order, all the parts of one merged
  // convolution's output, that output itself becomes the view (no copies). Returns the number of
  // inputs covered, 0 when the pattern does not apply.
  size_t place_merged_run(const graph::Op& op, size_t i, size_t offset) {
    const int parent = ir_.values[op.inputs[i]].parent;
    if (parent < static_cast<int>(g_.num_values()) || ir_.values[parent].parent >= 0) return 0;
    const auto& parts = ir_.values[parent].children;
    if (i + parts.size() > op.inputs.size()) return 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      if (parts[k] != op.inputs[i + k]) return 0;
      if (std::count(op.inputs.begin(), op.inputs.end(), op.inputs[i + k]) > 1) return 0;
    }
    const TensorDesc& whole = ir_.values[op.outputs[0]].desc;
    if (ir_.values[parent].desc.layout != whole.layout || ir_.values[parent].desc.dtype != whole.dtype) {
      return 0;
    }
    for (int p : parts) {
      if (ir_.values[p].desc.scale != whole.scale) return 0;
    }
    ir_.make_view(parent, op.outputs[0], offset);
    return parts.size();
  }

  void plan_split(const graph::Op& op) {
    const int in = ir_.src_value(op, 0);
    const TensorDesc id = ir_.values[in].desc;
    int64_t c0 = op.kind == OpKind::kSlice ? op.attrs_as<graph::SliceAttrs>().begin : 0;
    std::vector<size_t> offsets;
    bool all_dense = true;
    for (ValueId v : op.outputs) {
      size_t offset = 0;
      all_dense = all_dense && dense_slice(id, c0, ir_.values[v].desc.shape[1], &offset);
      offsets.push_back(offset);
      c0 += ir_.values[v].desc.shape[1];
    }
    for (ValueId v : op.outputs) all_dense = all_dense && same_storage(ir_.values[v].desc, id);
    if (all_dense) {
      for (size_t i = 0; i < op.outputs.size(); ++i) ir_.make_view(op.outputs[i], in, offsets[i]);
      return;
    }
    std::vector<int> dsts(op.outputs.begin(), op.outputs.end());
    ir_.op_tasks[op.id].push_back(ir_.op_task(op, op.attrs, {in}, dsts, nullptr));
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
        const int in = ir_.src_value(op, 0);
        if (same_storage(ir_.values[in].desc, ir_.values[op.outputs[0]].desc)) {
          ir_.make_view(op.outputs[0], in, 0);
        } else {
          ir_.op_tasks[op.id].push_back(ir_.copy_task(in, op.outputs[0], op.name));
        }
        return;
      }
      case OpKind::kFlatten:
      case OpKind::kReshape: {
        // A reshape keeps the elements in plain order: a view when source and result are plain.
        const int in = ir_.src_value(op, 0);
        const TensorDesc& d = ir_.values[in].desc;
        const TensorDesc& out = ir_.values[op.outputs[0]].desc;
        if (plain_layout(d) && plain_layout(out) && d.dtype == out.dtype && d.scale == out.scale) {
          ir_.make_view(op.outputs[0], in, 0);  // plain order is already the new shape
          return;
        }
        break;
      }
      default:
        break;
    }
    std::vector<int> srcs;
    for (size_t i = 0; i < op.inputs.size(); ++i) srcs.push_back(ir_.src_value(op, i));
    std::vector<int> dsts(op.outputs.begin(), op.outputs.end());
    Task task = ir_.op_task(op, op.attrs, srcs, dsts, ir_.weights.find(op.name));
    conform_inputs(op, task);
    ir_.op_tasks[op.id].push_back(std::move(task));
  }

  void order_tasks() {
    ir_.op_tasks.assign(g_.num_ops(), {});
    find_concat_hosts();
    std::vector<bool> merged(g_.num_ops(), false);
    for (const Stage& stage : ir_.schedule.stages) {
      if (stage.kind != StageKind::kMerge) continue;
      plan_merge(stage);
      for (OpId id : stage.ops()) merged[id] = true;
    }
    for (const graph::Op& op : g_.ops()) {
      if (!merged[op.id]) plan_op(op);
    }
    const int max_streams = std::max(1, ir_.options.max_streams);
    for (size_t s = 0; s < ir_.schedule.stages.size(); ++s) {
      const Stage& stage = ir_.schedule.stages[s];
      const int stage_no = static_cast<int>(s) + 1;
      if (stage.kind == StageKind::kMerge) {
        emit(ir_.op_tasks[stage.ops()[0]], 0, ir_.parallelism, stage_no);
        continue;
      }
      const int groups = static_cast<int>(stage.groups.size());
      const int threads = std::max(1, ir_.parallelism / std::min(groups, max_streams));
      // Round-robin over groups so that every stream gets work early.
      size_t longest = 0;
      for (const auto& group : stage.groups) longest = std::max(longest, group.size());
      for (size_t pos = 0; pos < longest; ++pos) {
        for (int gi = 0; gi < groups; ++gi) {
          if (pos >= stage.groups[gi].size()) continue;
          emit(ir_.op_tasks[stage.groups[gi][pos]], gi % max_streams, threads, stage_no);
        }
      }
    }
  }

  void emit(std::vector<Task>& list, int stream, int threads, int stage) {
    for (Task& t : list) {
      t.stream = stream;
      t.spec.threads = threads;
      t.stage = stage;
      ir_.tasks.push_back(std::move(t));
    }
    list.clear();
  }

  void stage_outputs() {
    for (ValueId v : g_.outputs()) {
      ir_.values[v].pinned = true;
      if (plain_layout(ir_.values[v].desc) || !ir_.options.plain_outputs) {
        ir_.output_values.push_back(v);
        continue;
      }
      TensorDesc plain = ir_.values[v].desc;
      plain.layout = *graph::default_layout(plain.shape.rank());
      const int staged = ir_.new_value(plain);
      ir_.values[staged].pinned = true;
      Task t = ir_.copy_task(v, staged, "output " + g_.value(v).name);
      t.stage = 0;
      ir_.tasks.push_back(std::move(t));
      ir_.output_values.push_back(staged);
    }
  }

  PlanIR& ir_;
  const graph::Graph& g_;
  std::vector<std::pair<OpId, size_t>> host_;  // find_concat_hosts
};

}  // namespace

void place_tasks(PlanIR& ir) { Placement(ir).run(); }

}  // namespace stagecraft::executor::planning
