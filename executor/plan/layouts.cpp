// Plan pass 1: layouts. Every value gets its descriptor (the per-value or uniform layout of rank-4
// op outputs), every kernel a layout with a native implementation where the planned one has only
// a reference one (legalise_layouts), and graph inputs a converted copy where their readers need
// one (convert_inputs).
#include <algorithm>
#include <map>

#include "common/strings.h"
#include "executor/plan/plan_ir.h"
#include "graph/quantize.h"

namespace stagecraft::executor::planning {

void describe_values(PlanIR& ir) {
  const graph::Graph& g = ir.g;
  const graph::LayoutAssignment& layouts = ir.options.layouts;
  if (layouts.is_per_value() && layouts.per_value().size() != g.num_values()) {
    throw BackendError(cat("the layout plan has ", layouts.per_value().size(),
                           " entries for a graph of ", g.num_values(), " values"));
  }
  for (size_t v = 0; v < g.num_values(); ++v) {
    const graph::Value& value = g.value(static_cast<ValueId>(v));
    TensorDesc d = value.desc;
    if (value.producer != graph::kNoOp) {
      const Layout chosen = layouts.of(v, ir.layout);
      if (graph::takes_layouts(d) && graph::layout_rank(chosen) != 4) {
        throw BackendError(cat("the layout plan gives value '", value.name, "' the layout ",
                               graph::to_string(chosen), ", which is not 4-D"));
      }
      if (graph::takes_layouts(d)) d.layout = chosen;
      else if (d.shape.rank() == 2) d.layout = Layout::kNC;
    }
    ir.new_value(d);
    ir.alias.push_back(static_cast<int>(v));
  }
  for (ValueId v : g.inputs()) ir.values[v].pinned = true;
}

namespace {

// Ops whose kernels legalise_layouts checks. Split, slice, identity, flatten and reshape become
// views or reorders, which every layout pair has.
bool checked(OpKind kind) {
  switch (kind) {
    case OpKind::kSplit:
    case OpKind::kSlice:
    case OpKind::kIdentity:
    case OpKind::kFlatten:
    case OpKind::kReshape:
      return false;
    default:
      return true;
  }
}

// One kernel to legalise: an op, or the merged convolution of a merge stage.
struct Unit {
  std::vector<OpId> ops;  // the op, or the convolutions of a merge (first one first)
  std::string name;
};

// The spec of `unit` with its rank-4 output in `out`, reading its inputs in their current layouts
// or, with `converted`, its rank-4 inputs in `out` (the plan converts them where a kernel cannot
// read them as they are).
KernelSpec spec_for(const PlanIR& ir, const Unit& unit, Layout out, bool converted) {
  const graph::Op& op = ir.g.op(unit.ops[0]);
  KernelSpec spec;
  spec.kind = op.kind;
  spec.attrs = op.attrs;
  spec.weights = ir.weights.find(op.name);
  spec.name = unit.name;
  spec.threads = ir.parallelism;
  for (ValueId v : op.inputs) {
    TensorDesc d = ir.values[v].desc;
    if (converted && graph::takes_layouts(d)) d.layout = out;
    spec.srcs.push_back(d);
  }
  for (ValueId v : op.outputs) {
    TensorDesc d = ir.values[v].desc;
    if (graph::takes_layouts(d)) d.layout = out;
    spec.dsts.push_back(d);
  }
  if (unit.ops.size() > 1) {  // merged: the stacked output channels
    const graph::Conv2dAttrs merged = scheduler::merged_conv_attrs(ir.g, unit.ops);
    spec.attrs = merged;
    spec.dsts[0] = with_channels(spec.dsts[0], merged.out_channels);
  }
  return spec;
}

// Whether the backend runs `unit` natively with its output in `out`; `why` gets its answer for
// the spec as planned, `extra` the native kernel's extra multiply-adds per output (KernelDesc).
bool native_in(const PlanIR& ir, const Unit& unit, Layout out, Support* why, double* extra = nullptr) {
  // (A merged convolution is checked with its first part's weights: supports() looks at
  // descriptors, and the plan makes the merged weights later.)
  const KernelSpec direct = spec_for(ir, unit, out, false);
  const KernelDesc d = ir.backend.supports(direct);
  if (why) *why = d.support;
  if (extra) *extra = d.extra_macs_per_output;
  if (d.is_native()) return true;
  const KernelSpec converted = spec_for(ir, unit, out, true);
  if (converted.srcs == direct.srcs) return false;
  const KernelDesc c = ir.backend.supports(converted);
  // With its inputs converted the answer is about the kernel itself: the better reason.
  if (why && (c.runnable() || d.support.reason == SupportReason::kLayout)) *why = c.support;
  if (extra) *extra = c.extra_macs_per_output;
  return c.is_native();
}

// Extra multiply-adds per output element above which converting an op's input and output to a
// layout where its kernel does none is the cheaper way (a copy costs tens of multiply-adds per
// element). Measured on 2-core Zen 4 (model zoo, both exporters): regrouped 3x3 convolutions with
// 1,080-2,088 extra (regnet_x_8gf, regnet_x_32gf, regnet_y_32gf) ran 10-25% faster converted;
// 72-216 extra (regnet_y_400mf, resnext101_64x4d, regnet_y_1_6gf) 5-50% slower.
constexpr double kConversionWorth = 400;

// A layout other than `wanted` where `unit` runs natively without extra arithmetic.
std::optional<Layout> without_extra_arithmetic(const PlanIR& ir, const Unit& unit, Layout wanted) {
  for (Layout l : ir.backend.capabilities().layouts) {
    double extra = 0;
    if (l != wanted && native_in(ir, unit, l, nullptr, &extra) && extra == 0) return l;
  }
  return std::nullopt;
}

void set_output_layout(PlanIR& ir, const Unit& unit, Layout layout) {
  for (OpId id : unit.ops) {
    for (ValueId v : ir.g.op(id).outputs) {
      if (graph::takes_layouts(ir.values[v].desc)) ir.values[v].desc.layout = layout;
    }
  }
}

}  // namespace

void legalise_layouts(PlanIR& ir) {
  using RK = PlanOptions::ReferenceKernels;
  if (ir.options.reference_kernels == RK::kAllow) return;
  const graph::Graph& g = ir.g;
  std::vector<int> merge_of(g.num_ops(), -1);
  for (size_t s = 0; s < ir.schedule.stages.size(); ++s) {
    if (ir.schedule.stages[s].kind != StageKind::kMerge) continue;
    for (OpId id : ir.schedule.stages[s].ops()) merge_of[id] = static_cast<int>(s);
  }
  std::vector<bool> done(g.num_ops(), false);
  for (const graph::Op& op : g.ops()) {
    if (done[op.id] || !checked(op.kind) || op.outputs.empty()) continue;
    if (!graph::takes_layouts(ir.values[op.outputs[0]].desc)) continue;
    Unit unit;
    if (merge_of[op.id] >= 0) {
      unit.ops = ir.schedule.stages[static_cast<size_t>(merge_of[op.id])].ops();
      std::vector<std::string> names;
      for (OpId id : unit.ops) names.push_back(g.op(id).name);
      unit.name = cat("merge(", join(names, ", "), ")");
    } else {
      unit.ops = {op.id};
      unit.name = op.name;
    }
    for (OpId id : unit.ops) done[id] = true;
    const Layout wanted = ir.values[op.outputs[0]].desc.layout;
    Support planned;
    double extra = 0;
    if (native_in(ir, unit, wanted, &planned, &extra)) {
      if (extra > kConversionWorth) {
        // Not a fallback (the kernel in `wanted` is native): converting is the cheaper way; the
        // plan listing shows the conversions.
        if (const auto l = without_extra_arithmetic(ir, unit, wanted)) set_output_layout(ir, unit, *l);
      }
      continue;
    }
    if (!planned.runnable() && planned.reason != SupportReason::kLayout) continue;  // an error later
    if (ir.options.reference_kernels == RK::kRefuse) {
      throw BackendError(cat(ir.backend.name(), " has no native kernel for op '", unit.name, "' in ",
                             graph::to_string(wanted), ": ", planned.message));
    }
    // The layouts to try: the backend's preferred one for the op's element type, then its list.
    std::vector<Layout> candidates{ir.backend.preferred_layout(ir.values[op.outputs[0]].desc.dtype)};
    for (Layout l : ir.backend.capabilities().layouts) {
      if (std::find(candidates.begin(), candidates.end(), l) == candidates.end()) candidates.push_back(l);
    }
    bool moved = false;
    for (Layout l : candidates) {
      if (l == wanted || !native_in(ir, unit, l, nullptr)) continue;
      set_output_layout(ir, unit, l);
      ir.fallbacks.push_back({unit.name, wanted, l, planned.message});
      moved = true;
      break;
    }
    if (!moved && planned.runnable()) ir.fallbacks.push_back({unit.name, wanted, std::nullopt, planned.message});
  }
}

namespace {

// Whether convolution `op` can read its graph input in that input's own layout (the usual
// first layer: NCHW in, blocked out).
bool conv_reads_directly(const PlanIR& ir, const graph::Op& op) {
  KernelSpec spec;
  spec.kind = op.kind;
  spec.attrs = op.attrs;
  // Every input the kernel reads (a fused residual is the second): a spec with fewer sources
  // than its attributes name sent the backend's check past the end of srcs.
  for (ValueId in : op.inputs) spec.srcs.push_back(ir.values[in].desc);
  spec.dsts = {ir.values[op.outputs[0]].desc};
  spec.weights = ir.weights.find(op.name);
  spec.name = op.name;
  spec.threads = ir.parallelism;
  return ir.backend.supports(spec).is_native();
}

}  // namespace

void convert_inputs(PlanIR& ir) {
  const graph::Graph& g = ir.g;
  for (ValueId v : g.inputs()) {
    const TensorDesc d = ir.values[v].desc;
    if (!graph::takes_layouts(d) || d.layout == ir.layout || !ir.options.convert_inputs) continue;
    // Convolutions read a graph input in its own layout when the backend can (the usual first
    // layer); concatenations copy their parts anyway. Everything else reads a converted copy.
    bool needs = false;
    for (OpId reader : g.consumers(v)) {
      const graph::Op& op = g.op(reader);
      if (op.kind == OpKind::kConcat) continue;
      if (op.kind == OpKind::kConv2d && conv_reads_directly(ir, op)) continue;
      needs = true;
      if (op.kind == OpKind::kConv2d) ir.convert_for_conv.insert(v);
    }
    if (!needs) continue;
    TensorDesc converted = d;
    converted.layout = ir.layout;
    ir.alias[v] = ir.new_value(converted);
    ir.tasks.push_back(ir.copy_task(v, ir.alias[v], "convert " + g.value(v).name));
  }
}

}  // namespace stagecraft::executor::planning
