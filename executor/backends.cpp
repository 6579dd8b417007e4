// The one registry of backends: the only place that knows which backends this build has.
#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cpu/cpu_backend.h"
#include "executor/devices.h"
#include "graph/quantize.h"

#ifdef STAGECRAFT_HAVE_CUDA
#include "executor/cuda/cuda_backend.h"
#endif

namespace stagecraft::executor {

std::string weights_reason(const KernelSpec& spec) {
  const bool needs = spec.kind == graph::OpKind::kConv2d || spec.kind == graph::OpKind::kLinear ||
                     spec.kind == graph::OpKind::kBatchNorm;
  return needs && spec.weights == nullptr ? "no weights given" : "";
}

std::string quantised_reason(const KernelSpec& spec) {
  using graph::Activation;
  using graph::OpKind;
  using graph::TensorDesc;
  const auto quantised = [](const TensorDesc& d) { return graph::is_int8(d.dtype); };
  const auto activation_of = [&]() {
    if (spec.kind == OpKind::kConv2d) return std::get<graph::Conv2dAttrs>(spec.attrs).activation;
    if (spec.kind == OpKind::kLinear) return std::get<graph::LinearAttrs>(spec.attrs).activation;
    return std::get<graph::AddAttrs>(spec.attrs).activation;
  };
  if (graph::rescales(spec.kind)) {
    for (const TensorDesc& src : spec.srcs) {
      if (!quantised(src)) {
        return cat("a quantised ", graph::to_string(spec.kind), " reads 8-bit inputs only (input is ",
                   graph::to_string(src.dtype), "): quantise it with an identity op first");
      }
    }
    if (activation_of() == Activation::kSigmoid && quantised(spec.dsts[0])) {
      return "a fused sigmoid needs an f32 output (it acts on real values)";
    }
    return "";
  }
  if (spec.kind == OpKind::kIdentity) return "";  // a conversion: any types and scales
  // Concatenations keep one scale too: the quantiser gives their parts the output's.
  if (graph::keeps_scale(spec.kind) || spec.kind == OpKind::kConcat) {
    for (const auto* list : {&spec.srcs, &spec.dsts}) {
      for (const TensorDesc& d : *list) {
        if (d.dtype != spec.srcs[0].dtype || d.scale != spec.srcs[0].scale) {
          return cat("a quantised ", graph::to_string(spec.kind), " keeps one element type and "
                     "scale (", spec.srcs[0].describe(), " vs ", d.describe(),
                     "): requantise with an identity op first");
        }
      }
    }
    return "";
  }
  return cat(graph::to_string(spec.kind), " runs in f32 only (got ",
             graph::to_string(spec.srcs.empty() ? spec.dsts[0].dtype : spec.srcs[0].dtype),
             "): dequantise its input first");
}

BackendError unsupported(const std::string& backend, const KernelSpec& spec, const std::string& why) {
  return BackendError(cat(backend, " cannot run op '", spec.name, "' (", graph::to_string(spec.kind),
                          "): ", why));
}

std::vector<std::string> backend_names() {
#ifdef STAGECRAFT_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendConfig& config) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") {
    const DeviceQuery q = query_cuda_devices();
    if (!q.compiled) throw BackendError("backend 'cuda' is not built: " + q.reason);
    if (q.devices.empty()) throw BackendError("backend 'cuda' has no usable GPU: " + q.reason);
#ifdef STAGECRAFT_HAVE_CUDA
    return make_cuda_backend(config);
#endif
  }
  (void)config;
  throw BackendError(cat("unknown backend '", name, "' (known: ", join(backend_names(), ", "), ")"));
}

}  // namespace stagecraft::executor
