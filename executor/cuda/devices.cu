// CUDA device query. Without a GPU, cudaGetDeviceCount returns an error (35: insufficient driver,
// or 100: no device) rather than crashing; that error becomes the reason.
#include <cuda_runtime.h>
#include <cudnn.h>

#include "executor/cuda/devices.h"

namespace stagecraft::executor {

DeviceQuery query_cuda_devices() {
  DeviceQuery query;
  query.compiled = true;
  query.cudnn_version = static_cast<int64_t>(cudnnGetVersion());
  cudaRuntimeGetVersion(&query.runtime_version);
  if (cudaDriverGetVersion(&query.driver_version) != cudaSuccess) query.driver_version = 0;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    query.reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status) +
                   " (error " + std::to_string(static_cast<int>(status)) + ")";
    cudaGetLastError();  // clear the sticky error
    return query;
  }
  if (count == 0) {
    query.reason = "the CUDA runtime reports no devices";
    return query;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    query.devices.push_back(info);
  }
  if (query.devices.empty()) query.reason = "no device answered cudaGetDeviceProperties";
  return query;
}

}  // namespace stagecraft::executor
