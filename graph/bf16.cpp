// bf16 inference: per-op precision and the conversion ops between bf16 and f32.
#include "graph/bf16.h"

#include <algorithm>
#include <map>
#include <utility>

#include "common/strings.h"
#include "graph/errors.h"

namespace stagecraft::graph {

namespace {

class Bf16Converter {
 public:
  explicit Bf16Converter(const Graph& g) : g_(g) {}

  Graph run(Bf16Report* report) {
    decide();
    Graph out(g_.name());
    std::vector<ValueId> mapped(g_.num_values(), -1);
    for (ValueId v : g_.inputs()) mapped[v] = out.add_input(g_.value(v).name, g_.value(v).desc);
    for (const Op& op : g_.ops()) {
      const bool bf16 = computes_[op.id];
      std::vector<ValueId> inputs;
      for (ValueId in : op.inputs) {
        inputs.push_back(as_type(out, mapped[in], bf16 ? DataType::kBF16 : DataType::kF32));
      }
      const OpId id = out.add_op(op.name, op.kind, op.attrs, inputs);
      ++(bf16 ? report_.bf16_ops : report_.f32_ops);
      const DataType type = bf16 && !writes_f32_[op.id] ? DataType::kBF16 : DataType::kF32;
      for (size_t i = 0; i < op.outputs.size(); ++i) {
        const ValueId v = out.op(id).outputs[i];
        mapped[op.outputs[i]] = v;
        if (g_.value(op.outputs[i]).desc.dtype == DataType::kF32) out.set_value_type(v, type, 1.0f);
      }
    }
    for (ValueId v : g_.outputs()) out.add_output(as_type(out, mapped[v], DataType::kF32));
    if (report) *report = report_;
    return out;
  }

 private:
  // Whether the kernel of `op` reads bf16 and writes f32 itself: convolutions (without a residual),
  // linear layers and matmuls of two activations, from their f32 accumulators. oneDNN 2.6's
  // binary kernels (additions, a convolution's residual) have only the reference for a bf16
  // source and an f32 destination (9 ms for one of MaxViT's additions): those write bf16 and a
  // conversion follows.
  static bool writes_f32_natively(const Op& op) {
    if (op.kind == OpKind::kLinear || op.kind == OpKind::kMatMul) return true;
    return op.kind == OpKind::kConv2d && !op.attrs_as<Conv2dAttrs>().residual;
  }

  // Which ops compute in bf16 and which of those write f32. Forward: by role, a follower in bf16
  // when its input is. Backward: an op whose outputs are graph outputs or read only by f32 ops
  // writes f32 — a computing op from its f32 accumulators (one rounding fewer on the way out), a
  // follower by computing in f32 itself (so the op before it sees an f32 reader in turn).
  void decide() {
    // An int8 or f16 graph has its own precision already; other types (i32) pass through.
    const auto foreign = [](DataType t) { return is_int8(t) || t == DataType::kF16 || t == DataType::kBF16; };
    for (ValueId v : g_.inputs()) {
      if (foreign(g_.value(v).desc.dtype)) {
        throw GraphError(cat("bf16 needs an f32 graph, but input '", g_.value(v).name, "' is ",
                             to_string(g_.value(v).desc.dtype)));
      }
    }
    computes_.assign(g_.num_ops(), false);
    writes_f32_.assign(g_.num_ops(), false);
    std::vector<bool> bf16_value(g_.num_values(), false);
    for (const Op& op : g_.ops()) {
      for (ValueId v : op.outputs) {
        if (foreign(g_.value(v).desc.dtype)) {
          throw GraphError(cat("bf16 needs an f32 graph, but value '", g_.value(v).name, "' of op '",
                               op.name, "' is ", to_string(g_.value(v).desc.dtype)));
        }
      }
      const auto is_bf16 = [&](ValueId v) { return static_cast<bool>(bf16_value[v]); };
      switch (bf16_role(op.kind, op.attrs)) {
        case Bf16Role::kComputes:
          computes_[op.id] = op.kind != OpKind::kConcat || std::any_of(op.inputs.begin(), op.inputs.end(), is_bf16);
          break;
        case Bf16Role::kFollows:
          computes_[op.id] = !op.inputs.empty() && is_bf16(op.inputs[0]);
          break;
        case Bf16Role::kF32:
          break;
      }
      for (ValueId v : op.outputs) bf16_value[v] = computes_[op.id];
    }
    for (auto it = g_.ops().rbegin(); it != g_.ops().rend(); ++it) {
      const Op& op = *it;
      if (!computes_[op.id] || op.kind == OpKind::kConcat) continue;
      bool f32_out = true;
      for (ValueId v : op.outputs) {
        for (OpId reader : g_.consumers(v)) f32_out = f32_out && !computes_[reader];
        f32_out = f32_out && (g_.is_output(v) || !g_.consumers(v).empty());
      }
      if (!f32_out) continue;
      if (bf16_role(op.kind, op.attrs) == Bf16Role::kFollows) {
        computes_[op.id] = false;
      } else if (writes_f32_natively(op)) {
        writes_f32_[op.id] = true;
      }
    }
  }

  // `v` in type `t`: itself, or the output of a (shared) identity op converting it. Only f32 and
  // bf16 convert into each other; a value of another type is read as it is.
  ValueId as_type(Graph& out, ValueId v, DataType t) {
    const DataType have = out.value(v).desc.dtype;
    if (have == t || (have != DataType::kF32 && have != DataType::kBF16)) return v;
    const auto key = std::make_pair(v, t);
    if (auto it = conversions_.find(key); it != conversions_.end()) return it->second;
    const std::string name = out.unused_name(out.value(v).name, "bf", &next_conversion_);
    const OpId id = out.add_op(name, OpKind::kIdentity, NoAttrs{}, {v});
    const ValueId converted = out.op(id).outputs[0];
    out.set_value_type(converted, t, 1.0f);
    ++report_.conversions;
    conversions_.emplace(key, converted);
    return converted;
  }

  const Graph& g_;
  std::vector<bool> computes_;    // by op id: computes in bf16
  std::vector<bool> writes_f32_;  // by op id: computes in bf16 and writes f32
  std::map<std::pair<ValueId, DataType>, ValueId> conversions_;
  int next_conversion_ = 0;
  Bf16Report report_;
};

}  // namespace

Bf16Role bf16_role(OpKind kind, const OpAttrs& attrs) {
  switch (kind) {
    case OpKind::kConv2d:
    case OpKind::kLinear:
    case OpKind::kMatMul:
    case OpKind::kAdd:
    case OpKind::kConcat:
      return Bf16Role::kComputes;
    case OpKind::kPad: {
      // A reorder into a zeroed buffer; other fill values and reflection are f32 kernels.
      const auto* pad = std::get_if<PadAttrs>(&attrs);
      return pad && !pad->reflect && pad->value == 0 ? Bf16Role::kFollows : Bf16Role::kF32;
    }
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool:
    case OpKind::kBatchNorm:
    case OpKind::kRelu:
    case OpKind::kScale:  // a oneDNN eltwise (attention's query scaling)
    case OpKind::kFlatten:
    case OpKind::kSplit:
    case OpKind::kSlice:
    case OpKind::kIdentity:
    case OpKind::kReshape:    // a view or a reorder of 2-byte elements
    case OpKind::kTranspose:  // the same (attention's head shuffles)
    case OpKind::kNarrow:
      return Bf16Role::kFollows;
    default:
      return Bf16Role::kF32;
  }
}

bool is_bf16(const Graph& graph) {
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (graph.value(static_cast<ValueId>(v)).desc.dtype == DataType::kBF16) return true;
  }
  return false;
}

Graph to_bf16(const Graph& graph, Bf16Report* report) { return Bf16Converter(graph).run(report); }

}  // namespace stagecraft::graph
