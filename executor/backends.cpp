// The one registry of backends: the only place that knows which backends this build has.
#include <iostream>
#include <mutex>

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
  if (name == "cpu") {
    // The CPU backend has no use for the CUDA settings: a request for TF32 is a mistake, a
    // changed workspace limit is said once and ignored. (cache_dir holds the profile caches the
    // caller keeps; the CPU backend caches nothing itself.)
    if (config.tf32) {
      throw BackendError("TF32 is a CUDA setting: --tf32 needs --backend cuda");
    }
    if (config.workspace_limit != BackendConfig{}.workspace_limit) {
      static std::once_flag once;
      std::call_once(once, [] {
        std::cerr << "stagecraft: warning: the CPU backend ignores the convolution workspace limit "
                     "(a CUDA setting)\n";
      });
    }
    return make_cpu_backend(config);
  }
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
