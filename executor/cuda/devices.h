#pragma once
/// Which GPUs this build can use. A build without CUDA, or a machine without a usable GPU, reports
/// zero devices and a reason instead of failing (as PyTorch's c10 does), so commands can say in
/// one line why `--backend cuda` is unavailable.
///
/// Example:
///   DeviceQuery q = query_cuda_devices();
///   if (q.devices.empty()) std::cerr << "no usable GPU: " << q.reason << "\n";

#include <cstdint>
#include <string>
#include <vector>

namespace stagecraft::executor {

/// One CUDA device.
struct DeviceInfo {
  int index = 0;                 ///< CUDA device ordinal
  std::string name;              ///< e.g. "NVIDIA H100 80GB HBM3"
  int compute_major = 0;         ///< compute capability, major
  int compute_minor = 0;         ///< compute capability, minor
  int sm_count = 0;              ///< streaming multiprocessors
  int64_t memory_bytes = 0;      ///< global memory
};

/// The result of asking the CUDA runtime for devices.
struct DeviceQuery {
  bool compiled = false;            ///< whether this build has the CUDA backend
  std::vector<DeviceInfo> devices;  ///< usable devices (empty when none)
  std::string reason;               ///< why there are none, when empty
  int runtime_version = 0;          ///< CUDA runtime version (e.g. 13000), 0 when not compiled
  int driver_version = 0;           ///< CUDA driver version, 0 when no driver
  int64_t cudnn_version = 0;        ///< cuDNN library version, 0 when not compiled
};

/// Queries the CUDA runtime; never throws.
DeviceQuery query_cuda_devices();

}  // namespace stagecraft::executor
