// The one registry of backends: the only place that knows which backends this build has. A
// backend is a row of the table (name, what it runs on, its factory); each factory checks its own
// settings and devices.
#include <algorithm>
#include <iterator>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cpu/cpu_backend.h"
#include "executor/cuda/devices.h"

#ifdef STAGECRAFT_HAVE_CUDA
#include "executor/cuda/cuda_backend.h"
#endif

namespace stagecraft::executor {

namespace {

#ifdef STAGECRAFT_HAVE_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

// The CUDA backend on the first usable GPU, or why there is none.
std::unique_ptr<Backend> open_cuda(const BackendConfig& config) {
  const DeviceQuery q = query_cuda_devices();
  if (!q.compiled) throw BackendError("backend 'cuda' is not built: " + q.reason);
  if (q.devices.empty()) throw BackendError("backend 'cuda' has no usable GPU: " + q.reason);
#ifdef STAGECRAFT_HAVE_CUDA
  return make_cuda_backend(config);
#else
  (void)config;
  throw BackendError("backend 'cuda' is not built");
#endif
}

const BackendEntry kBackends[] = {
    {"cpu", "oneDNN kernels (and our own) on this machine's CPU", true, &make_cpu_backend},
    {"cuda", "cuDNN, cuBLAS and our own kernels on an NVIDIA GPU", kCudaBuilt, &open_cuda},
};

}  // namespace

std::span<const BackendEntry> backend_registry() { return kBackends; }

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const BackendEntry& e : kBackends)
    if (e.built) names.emplace_back(e.name);
  return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendConfig& config) {
  const auto* entry = std::find_if(std::begin(kBackends), std::end(kBackends),
                                   [&](const BackendEntry& e) { return name == e.name; });
  if (entry == std::end(kBackends)) {
    throw BackendError(cat("unknown backend '", name, "' (known: ", join(backend_names(), ", "), ")"));
  }
  return entry->make(config);
}

}  // namespace stagecraft::executor
