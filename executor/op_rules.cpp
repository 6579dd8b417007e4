#include "executor/op_rules.h"

#include <algorithm>

#include "common/strings.h"
#include "graph/quantize.h"

namespace stagecraft::executor {

using graph::OpKind;
using graph::TensorDesc;

Support weights_support(const KernelSpec& spec) {
  const bool needs = spec.kind == OpKind::kConv2d || spec.kind == OpKind::kLinear || spec.kind == OpKind::kConvTranspose2d ||
                     spec.kind == OpKind::kBatchNorm || spec.kind == OpKind::kLayerNorm;
  const bool constants = spec.kind == OpKind::kWhere && [&] {
    const auto& a = std::get<graph::WhereAttrs>(spec.attrs);
    return a.condition_constant || a.x_constant || a.y_constant;
  }();
  if ((needs || constants) && spec.weights == nullptr) {
    return Support::unsupported(SupportReason::kWeights, "no weights given");
  }
  return Support::native();
}

bool has_int8(const KernelSpec& spec) {
  const auto int8 = [](const TensorDesc& d) { return graph::is_int8(d.dtype); };
  return std::any_of(spec.srcs.begin(), spec.srcs.end(), int8) ||
         std::any_of(spec.dsts.begin(), spec.dsts.end(), int8);
}

Support quantised_support(const KernelSpec& spec) {
  using graph::Activation;
  const auto quantised = [](const TensorDesc& d) { return graph::is_int8(d.dtype); };
  const auto no = [](std::string message) {
    return Support::unsupported(SupportReason::kQuantisation, std::move(message));
  };
  if (graph::rescales(spec.kind)) {
    for (const TensorDesc& src : spec.srcs) {
      if (!quantised(src)) {
        return no(cat("a quantised ", graph::to_string(spec.kind), " reads 8-bit inputs only (input is ",
                      graph::to_string(src.dtype), "): quantise it with an identity op first"));
      }
    }
    const Activation act = graph::fused_activation(spec.kind, spec.attrs);
    if (!graph::scales_with_units(act) && quantised(spec.dsts[0])) {
      return no(cat("a fused ", graph::to_string(act),
                    " needs an f32 output (it acts on real values)"));
    }
    return Support::native();
  }
  if (spec.kind == OpKind::kIdentity) return Support::native();  // a conversion: any types and scales
  // Concatenations keep one scale too (the quantiser gives their parts the output's), but for
  // those whose parts keep their own (ConcatAttrs::part_scales): one element type.
  if (graph::keeps_scale(spec.kind) || spec.kind == OpKind::kConcat) {
    const bool part_scales = spec.kind == OpKind::kConcat && std::get<graph::ConcatAttrs>(spec.attrs).part_scales;
    for (const auto* list : {&spec.srcs, &spec.dsts}) {
      for (const TensorDesc& d : *list) {
        if (d.dtype != spec.srcs[0].dtype || (d.scale != spec.srcs[0].scale && !part_scales)) {
          return no(cat("a quantised ", graph::to_string(spec.kind), " keeps one element type and "
                        "scale (", spec.srcs[0].describe(), " vs ", d.describe(),
                        "): requantise with an identity op first"));
        }
      }
    }
    return Support::native();
  }
  return no(cat(graph::to_string(spec.kind), " runs in f32 only (got ",
                graph::to_string(spec.srcs.empty() ? spec.dsts[0].dtype : spec.srcs[0].dtype),
                "): dequantise its input first"));
}

Support same_layout_support(const KernelSpec& spec) {
  for (const TensorDesc& src : spec.srcs) {
    if (src.layout != spec.dsts[0].layout) {
      return Support::unsupported(SupportReason::kLayout,
                                  "sources and destination must have the same layout");
    }
  }
  return Support::native();
}

}  // namespace stagecraft::executor
