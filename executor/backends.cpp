// The one registry of backends: the only place that knows which backends this build has.
#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cpu/cpu_backend.h"
#include "executor/devices.h"

#ifdef STAGECRAFT_HAVE_CUDA
#include "executor/cuda/cuda_backend.h"
#endif

namespace stagecraft::executor {

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
