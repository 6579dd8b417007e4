// Device query of a build without the CUDA backend: zero devices and the reason.
#include "executor/cuda/devices.h"

namespace stagecraft::executor {

DeviceQuery query_cuda_devices() {
  DeviceQuery query;
  query.reason = "this build has no CUDA backend (configure with nvcc and cuDNN available, "
                 "STAGECRAFT_CUDA=AUTO or ON)";
  return query;
}

}  // namespace stagecraft::executor
