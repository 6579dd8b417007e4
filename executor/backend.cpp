// The parts of the backend contract (backend.h, device.h) every backend shares.
#include "executor/backend.h"

#include <algorithm>

#include "common/strings.h"

namespace stagecraft::executor {

bool Capabilities::computes(graph::DataType type) const {
  const auto has = [&](graph::DataType t) {
    return std::find(compute_types.begin(), compute_types.end(), t) != compute_types.end();
  };
  return has(type) || (graph::is_int8(type) && (has(graph::DataType::kU8) || has(graph::DataType::kI8)));
}

KernelDesc with_layouts(KernelDesc desc, const KernelSpec& spec) {
  desc.layouts.clear();
  for (const auto* list : {&spec.srcs, &spec.dsts}) {
    for (const graph::TensorDesc& d : *list) desc.layouts.push_back(d.layout);
  }
  return desc;
}

std::unique_ptr<Kernel> Backend::create_kernel(const KernelSpec& spec, const KernelDesc& desc) {
  if (!desc.runnable()) throw unsupported(name(), spec, desc.support);
  return build_kernel(spec, desc);
}

std::unique_ptr<Kernel> Backend::create_kernel(const KernelSpec& spec) {
  return create_kernel(spec, supports(spec));
}

BackendError unsupported(const std::string& backend, const KernelSpec& spec, const Support& why) {
  return BackendError(cat(backend, " cannot run op '", spec.name, "' (", graph::to_string(spec.kind),
                          "): ", why.message));
}

}  // namespace stagecraft::executor
