#include "graph/passes.h"

#include <algorithm>
#include <map>
#include <optional>

#include "common/strings.h"
#include "graph/errors.h"
#include "graph/weights.h"

namespace stagecraft::graph {

namespace {

// What a pass does with one op: keep it (possibly with new attributes) or drop it and let its
// only output stand for another value of the old graph.
struct Decision {
  bool drop = false;
  ValueId alias = -1;                // old value that replaces the dropped op's output
  std::optional<OpAttrs> new_attrs;  // for kept ops
  std::optional<OpKind> new_kind;    // for kept ops (with new_attrs of that kind)
  std::optional<std::vector<ValueId>> new_inputs;  // for kept ops (old values)
  std::optional<std::string> new_name;             // for kept ops

  static Decision dropped(ValueId alias) {
    Decision d;
    d.drop = true;
    d.alias = alias;
    return d;
  }
};

// Rebuilds `graph` applying per-op decisions; dropped ops forward their output to an alias.
// `batch` > 0 replaces the batch dimension of every input.
Graph rebuild(const Graph& graph, const std::vector<Decision>& decisions, int64_t batch = 0,
              std::optional<DataType> dtype = std::nullopt) {
  Graph out(graph.name());
  std::vector<ValueId> map(graph.num_values(), -1);  // old value -> new value
  for (ValueId v : graph.inputs()) {
    TensorDesc desc = graph.value(v).desc;
    if (batch > 0 && desc.shape.rank() > 0) desc.shape[0] = batch;
    if (dtype) desc.dtype = *dtype;
    map[v] = out.add_input(graph.value(v).name, desc);
  }
  auto resolve = [&map](ValueId old) { return map[old]; };
  for (const Op& op : graph.ops()) {
    const Decision& d = decisions[op.id];
    if (d.drop) {
      if (d.alias >= 0) map[op.outputs.at(0)] = resolve(d.alias);  // -1: nothing reads it
      continue;
    }
    std::vector<ValueId> inputs;
    for (ValueId v : d.new_inputs ? *d.new_inputs : op.inputs) inputs.push_back(resolve(v));
    const OpId id = out.add_op(d.new_name.value_or(op.name), d.new_kind.value_or(op.kind),
                               d.new_attrs ? *d.new_attrs : op.attrs, inputs);
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      map[op.outputs[i]] = out.op(id).outputs[i];
      // Types shape inference cannot know (a quantised graph's 8-bit values and their scales)
      // stay as they were.
      const TensorDesc& was = graph.value(op.outputs[i]).desc;
      const TensorDesc& now = out.value(out.op(id).outputs[i]).desc;
      if (!dtype && (now.dtype != was.dtype || now.scale != was.scale)) {
        out.set_value_type(out.op(id).outputs[i], was.dtype, was.scale);
      }
    }
  }
  for (ValueId v : graph.outputs()) out.add_output(resolve(v));
  return out;
}

// The op producing `op`'s first input when that value is read by `op` alone and is not a graph
// output; nullopt otherwise.
std::optional<OpId> sole_producer(const Graph& graph, const Op& op) {
  if (op.inputs.size() != 1) return std::nullopt;
  const Value& in = graph.value(op.inputs[0]);
  if (in.producer == kNoOp || graph.is_output(in.id) || graph.consumers(in.id).size() != 1) {
    return std::nullopt;
  }
  if (graph.op(in.producer).outputs.size() != 1) return std::nullopt;
  return in.producer;
}

// The convolution producing `op`'s input (sole_producer) when a per-channel affine map after it
// can be folded into its weights: no activation of its own, no residual (act(conv(x) + r) and
// conv(x) + r are not convolutions of x).
std::optional<OpId> plain_conv_producer(const Graph& graph, const Op& op) {
  const auto producer = sole_producer(graph, op);
  if (!producer || graph.op(*producer).kind != OpKind::kConv2d) return std::nullopt;
  const auto& conv = graph.op(*producer).attrs_as<Conv2dAttrs>();
  if (conv.activation != Activation::kNone || conv.residual) return std::nullopt;
  return producer;
}

using Decisions = std::vector<Decision>;  // one per op of the old graph

// A pass over the ops of one kind: decide(op, decisions) records, for each op of `kind` in order,
// what becomes of it and of the ops before it; the graph is then rebuilt with the decisions.
template <class Decide>
Graph rewrite_ops_of(const Graph& graph, OpKind kind, Decide decide) {
  Decisions decisions(graph.num_ops());
  for (const Op& op : graph.ops()) {
    if (op.kind == kind) decide(op, decisions);
  }
  return rebuild(graph, decisions);
}

}  // namespace

Graph fold_batch_norm(const Graph& graph, PassLog* log) {
  return rewrite_ops_of(graph, OpKind::kBatchNorm, [&](const Op& op, Decisions& decisions) {
    const auto producer = plain_conv_producer(graph, op);
    if (!producer) return;
    auto conv = graph.op(*producer).attrs_as<Conv2dAttrs>();
    Decision& kept = decisions[*producer];
    if (kept.new_attrs) conv = std::get<Conv2dAttrs>(*kept.new_attrs);
    conv.bias = true;
    kept.new_attrs = conv;
    decisions[op.id] = Decision::dropped(op.inputs[0]);
    if (log) log->folded.push_back({graph.op(*producer).name, op.name});
  });
}

Graph batch_norms_as_convolutions(const Graph& graph, PassLog* log) {
  return rewrite_ops_of(graph, OpKind::kBatchNorm, [&](const Op& op, Decisions& decisions) {
    const Shape& x = graph.value(op.inputs[0]).desc.shape;
    if (x.rank() != 4) return;
    Conv2dAttrs conv;
    conv.in_channels = conv.out_channels = conv.groups = x[1];
    conv.kernel = {1, 1};
    conv.bias = true;
    conv.activation = op.attrs_as<BatchNormAttrs>().activation;
    decisions[op.id].new_kind = OpKind::kConv2d;
    decisions[op.id].new_attrs = conv;
    if (log) log->batch_norm_convolutions.push_back(op.name);
  });
}

Graph fold_scales(const Graph& graph, PassLog* log) {
  return rewrite_ops_of(graph, OpKind::kScale, [&](const Op& op, Decisions& decisions) {
    const auto producer = plain_conv_producer(graph, op);
    if (!producer || is_int8(graph.value(op.outputs[0]).desc.dtype)) return;
    decisions[op.id] = Decision::dropped(op.inputs[0]);
    if (log) log->scales.push_back({graph.op(*producer).name, op.name, op.attrs_as<ScaleAttrs>().factor});
  });
}

namespace {

// Whether a binary op applies one constant value per channel (or one value) to a rank-4 input,
// with the constant second: foldable into the convolution before it.
bool per_channel_constant(const Graph& graph, const Op& op) {
  if (op.kind != OpKind::kBinary || op.inputs.size() != 1) return false;
  const auto& a = op.attrs_as<BinaryAttrs>();
  const Shape& x = graph.value(op.inputs[0]).desc.shape;
  if (!is_arithmetic(a.op) || a.constant.size() != 4 || x.rank() != 4 || a.constant_first ||
      is_int8(graph.value(op.inputs[0]).desc.dtype)) {
    return false;
  }
  return a.constant[0] == 1 && (a.constant[1] == 1 || a.constant[1] == x[1]) && a.constant[2] == 1 &&
         a.constant[3] == 1;
}

// Whether a binary op applies one constant value per feature (or one value) over the last axis of
// a linear layer's output, with the constant second; the linear layer (read by it alone, no
// activation of its own) when so. A transformer's projections: MatMul, then Add of the bias.
std::optional<OpId> linear_with_feature_constant(const Graph& graph, const Op& op) {
  if (op.kind != OpKind::kBinary || op.inputs.size() != 1) return std::nullopt;
  const auto& a = op.attrs_as<BinaryAttrs>();
  const TensorDesc& x = graph.value(op.inputs[0]).desc;
  if (!is_arithmetic(a.op) || a.constant.empty() || a.constant_first || is_int8(x.dtype) ||
      a.constant.size() != x.shape.rank()) {
    return std::nullopt;
  }
  for (size_t i = 0; i + 1 < a.constant.size(); ++i)
    if (a.constant[i] != 1) return std::nullopt;
  const auto producer = sole_producer(graph, op);
  if (!producer || graph.op(*producer).kind != OpKind::kLinear) return std::nullopt;
  const auto& linear = graph.op(*producer).attrs_as<LinearAttrs>();
  if (linear.activation != Activation::kNone) return std::nullopt;
  if (a.constant.back() != 1 && a.constant.back() != linear.out_features) return std::nullopt;
  return producer;
}

Graph fold_channel_constants_once(const Graph& graph, PassLog* log, bool* changed) {
  std::vector<Decision> decisions(graph.num_ops());
  // Drops the binary op `op`, its constant folded into `target`, whose attributes `attrs` get a
  // bias when the op adds or subtracts, and the op's activation.
  const auto fold = [&](const Op& op, OpId target, auto attrs) {
    const auto& a = op.attrs_as<BinaryAttrs>();
    if (a.op == BinaryOp::kAdd || a.op == BinaryOp::kSub) attrs.bias = true;
    attrs.activation = a.activation;
    decisions[target].new_attrs = attrs;
    decisions[op.id] = Decision::dropped(op.inputs[0]);
    if (log) log->constants.push_back({graph.op(target).name, op.name, a.op});
    *changed = true;
  };
  for (const Op& op : graph.ops()) {
    if (const auto linear = linear_with_feature_constant(graph, op); linear && !decisions[*linear].new_attrs) {
      fold(op, *linear, graph.op(*linear).attrs_as<LinearAttrs>());
      continue;
    }
    if (!per_channel_constant(graph, op)) continue;
    const auto producer = plain_conv_producer(graph, op);
    if (!producer || decisions[*producer].new_attrs) continue;  // one fold per conv and round
    fold(op, *producer, graph.op(*producer).attrs_as<Conv2dAttrs>());
  }
  return rebuild(graph, decisions);
}

}  // namespace

Graph fold_channel_constants(const Graph& graph, PassLog* log) {
  Graph g = graph;
  for (bool changed = true; changed;) {
    changed = false;
    g = fold_channel_constants_once(g, log, &changed);
  }
  return g;
}

Graph fuse_activations(const Graph& graph, PassLog* log) {
  std::vector<Decision> decisions(graph.num_ops());
  for (const Op& op : graph.ops()) {
    const Activation act = activation_of_kind(op.kind, op.attrs);
    if (act == Activation::kNone) continue;
    const auto producer = sole_producer(graph, op);
    if (!producer) continue;
    const Op& p = graph.op(*producer);
    OpAttrs attrs = p.attrs;
    bool fused = false;
    std::visit(
        [&](auto& a) {
          if constexpr (requires { a.activation; }) {
            if (a.activation == Activation::kNone) {
              a.activation = act;
              fused = true;
            }
          }
        },
        attrs);
    if (!fused) continue;
    decisions[p.id].new_attrs = attrs;
    decisions[op.id] = Decision::dropped(op.inputs[0]);
    if (log) log->fused.push_back({p.name, op.name});
  }
  return rebuild(graph, decisions);
}

Graph recognise_gated_activations(const Graph& graph, PassLog* log) {
  std::vector<Decision> decisions(graph.num_ops());
  for (const Op& op : graph.ops()) {
    if (op.kind != OpKind::kBinary || op.inputs.size() != 2) continue;
    const auto& a = op.attrs_as<BinaryAttrs>();
    if (a.op != BinaryOp::kMul || a.activation != Activation::kNone) continue;
    for (size_t slot = 0; slot < 2; ++slot) {
      const ValueId gate = op.inputs[slot];
      const ValueId x = op.inputs[1 - slot];
      const OpId g = graph.value(gate).producer;
      if (g == kNoOp || graph.op(g).inputs.size() != 1 || graph.op(g).inputs[0] != x) continue;
      if (graph.consumers(gate).size() != 1 || graph.is_output(gate) || decisions[g].drop) continue;
      const Activation gate_act = activation_of_kind(graph.op(g).kind, graph.op(g).attrs);
      const OpKind fused = gate_act == Activation::kSigmoid       ? OpKind::kSilu
                           : gate_act == Activation::kHardSigmoid ? OpKind::kHardSwish
                                                                  : OpKind::kIdentity;
      if (fused == OpKind::kIdentity || graph.value(x).desc.shape != graph.value(gate).desc.shape) continue;
      decisions[g] = Decision::dropped(x);
      decisions[op.id] = Decision{false, -1, OpAttrs{NoAttrs{}}, fused, std::vector<ValueId>{x}, std::nullopt};
      if (log) log->recognised.push_back({op.name, graph.op(g).name, std::string(to_string(fused))});
      break;
    }
  }
  return rebuild(graph, decisions);
}

Graph fuse_residual_adds(const Graph& graph, PassLog* log, bool quantised) {
  std::vector<Decision> decisions(graph.num_ops());
  // Depth of each op (longest path from an input, in ops; ops are in topological order).
  std::vector<int> depth(graph.num_ops(), 0);
  for (const Op& op : graph.ops()) {
    for (ValueId v : op.inputs) {
      const OpId p = graph.value(v).producer;
      if (p != kNoOp) depth[op.id] = std::max(depth[op.id], depth[p] + 1);
    }
  }
  for (const Op& op : graph.ops()) {
    if (op.kind != OpKind::kAdd || op.inputs.size() != 2) continue;
    const bool int8 = is_int8(graph.value(op.outputs[0]).desc.dtype);
    if (int8 && !quantised) continue;
    // The deeper operand's convolution takes the other as its residual: a short branch (a
    // ResNet downsample shortcut) stays free to run beside the long one; ties go to the
    // later-produced operand.
    std::optional<size_t> chosen;
    for (size_t slot = 0; slot < 2; ++slot) {
      const Value& in = graph.value(op.inputs[slot]);
      if (in.producer == kNoOp || in.id == op.inputs[1 - slot]) continue;
      const Op& p = graph.op(in.producer);
      if (p.kind != OpKind::kConv2d || decisions[p.id].drop || decisions[p.id].new_attrs) continue;
      const auto& a = p.attrs_as<Conv2dAttrs>();
      if (a.residual || a.activation != Activation::kNone) continue;
      if (graph.consumers(in.id).size() != 1 || graph.is_output(in.id)) continue;
      if (in.desc.shape != graph.value(op.inputs[1 - slot]).desc.shape) continue;
      // 8 bits: the convolution computes in 8 bits and the residual is 8-bit too.
      if (int8 && (!is_int8(graph.value(p.inputs[0]).desc.dtype) || !is_int8(in.desc.dtype) ||
                   !is_int8(graph.value(op.inputs[1 - slot]).desc.dtype))) {
        continue;
      }
      const OpId best = chosen ? graph.value(op.inputs[*chosen]).producer : kNoOp;
      if (!chosen || depth[in.producer] > depth[best] ||
          (depth[in.producer] == depth[best] && in.producer > best)) {
        chosen = slot;
      }
    }
    if (!chosen) continue;
    const Op& conv = graph.op(graph.value(op.inputs[*chosen]).producer);
    auto attrs = conv.attrs_as<Conv2dAttrs>();
    attrs.residual = true;
    attrs.activation = op.attrs_as<AddAttrs>().activation;
    // The fused op takes the add's place in op order (after the residual's producer) and the
    // convolution's name (its weights are found by it).
    decisions[conv.id] = Decision::dropped(-1);
    Decision& fused = decisions[op.id];
    fused.new_kind = OpKind::kConv2d;
    fused.new_attrs = attrs;
    fused.new_inputs = std::vector<ValueId>{conv.inputs[0], op.inputs[1 - *chosen]};
    fused.new_name = conv.name;
    if (log) log->residual.push_back({conv.name, op.name});
  }
  return rebuild(graph, decisions);
}

Graph fold_concats_into_shuffles(const Graph& graph, PassLog* log) {
  return rewrite_ops_of(graph, OpKind::kChannelShuffle, [&](const Op& op, Decisions& decisions) {
    const auto producer = sole_producer(graph, op);
    if (!producer || graph.op(*producer).kind != OpKind::kConcat) return;
    const Op& concat = graph.op(*producer);
    decisions[concat.id] = Decision::dropped(-1);
    decisions[op.id].new_inputs = concat.inputs;
    if (log) log->concats.push_back({op.name, concat.name});
  });
}

Graph remove_identities(const Graph& graph, PassLog* log) {
  return rewrite_ops_of(graph, OpKind::kIdentity, [&](const Op& op, Decisions& decisions) {
    // A graph input passed straight to a graph output keeps its identity: outputs must be ops.
    if (graph.is_output(op.outputs[0]) && graph.value(op.inputs[0]).producer == kNoOp) return;
    decisions[op.id] = Decision::dropped(op.inputs[0]);
    if (log) log->removed.push_back(op.name);
  });
}

namespace {

bool same_weights(const OpWeights* a, const OpWeights* b) {
  if (!a || !b) return a == b;
  return a->weight == b->weight && a->bias == b->bias && a->gamma == b->gamma && a->beta == b->beta &&
         a->mean == b->mean && a->var == b->var;
}

}  // namespace

Graph merge_duplicate_ops(const Graph& graph, const WeightStore& weights, PassLog* log) {
  Decisions decisions(graph.num_ops());
  std::vector<ValueId> canonical(graph.num_values());  // each value, or the value it equals
  for (size_t v = 0; v < canonical.size(); ++v) canonical[v] = static_cast<ValueId>(v);
  // Ops kept so far by (kind, inputs as canonical values): the candidates an op is compared with.
  std::map<std::pair<OpKind, std::vector<ValueId>>, std::vector<OpId>> seen;
  bool merged = false;
  for (const Op& op : graph.ops()) {  // in id order, as rebuild goes: an op's inputs come first
    std::vector<ValueId> inputs;
    for (ValueId v : op.inputs) inputs.push_back(canonical[static_cast<size_t>(v)]);
    auto& candidates = seen[{op.kind, std::move(inputs)}];
    const bool mergeable = op.outputs.size() == 1 && !graph.is_output(op.outputs[0]);
    const auto same = std::find_if(candidates.begin(), candidates.end(), [&](OpId other) {
      const Op& first = graph.op(other);
      return first.attrs == op.attrs && same_weights(weights.find(first.name), weights.find(op.name));
    });
    if (!mergeable || same == candidates.end()) {
      candidates.push_back(op.id);
      continue;
    }
    const Op& first = graph.op(*same);
    decisions[static_cast<size_t>(op.id)] = Decision::dropped(first.outputs[0]);
    canonical[static_cast<size_t>(op.outputs[0])] = first.outputs[0];
    if (log) log->merged.emplace_back(first.name, op.name);
    merged = true;
  }
  return merged ? rebuild(graph, decisions) : graph;
}

Graph prepare_for_inference(const Graph& graph, PassLog* log, const InferenceOptions& options) {
  Graph g = fold_concats_into_shuffles(
      remove_identities(
          fuse_activations(recognise_gated_activations(
              fold_channel_constants(fold_scales(fold_batch_norm(graph, log), log), log), log), log),
          log),
      log);
  return options.fuse_residual_adds ? fuse_residual_adds(g, log) : g;
}

}  // namespace stagecraft::graph

namespace stagecraft::graph {

Graph with_batch(const Graph& graph, int64_t batch) {
  if (batch < 1) throw GraphError(cat("batch size must be >= 1, got ", batch));
  return rebuild(graph, std::vector<Decision>(graph.num_ops()), batch);
}

Graph with_dtype(const Graph& graph, DataType dtype) {
  return rebuild(graph, std::vector<Decision>(graph.num_ops()), 0, dtype);
}

}  // namespace stagecraft::graph
