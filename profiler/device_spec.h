#pragma once
/// Device descriptions for the analytic cost model, read from `configs/devices/NAME.yaml`.
///
/// Example:
///   DeviceSpec v100 = find_device_spec("v100");  // configs/devices/v100.yaml
///   v100.sm_count;  // 80

#include <string>
#include <vector>

#include "common/error.h"

namespace stagecraft::profiler {

/// A device description: peak rates and overheads.
struct DeviceSpec {
  std::string id;                    ///< file stem ("v100")
  std::string name;                  ///< marketing name
  int sm_count = 0;                  ///< streaming multiprocessors
  double fp32_tflops = 0;            ///< peak fp32
  double fp16_tflops = 0;            ///< peak fp16 (tensor cores)
  double int8_tops = 0;              ///< peak int8
  double memory_gbps = 0;            ///< DRAM bandwidth, GB/s
  double kernel_launch_us = 0;       ///< host cost of one kernel launch
  double cross_stream_sync_us = 0;   ///< one cross-stream dependency (event record + wait)
  double min_kernel_us = 0;          ///< shortest kernel duration
  int blocks_per_sm = 1;             ///< resident thread blocks per SM of a GEMM-like kernel
  int gemm_tile = 64;                ///< output tile edge of one thread block
  double compute_efficiency = 1;     ///< fraction of peak of a full kernel
  double memory_efficiency = 1;      ///< fraction of peak bandwidth of a streaming kernel
};

/// A device file is missing, malformed, or has an out-of-range value.
class DeviceSpecError : public Error {
 public:
  using Error::Error;
};

/// The folder holding configs (`$STAGECRAFT_CONFIG_DIR`, else the source tree's `configs/`).
std::string default_config_dir();

/// Reads a device file; throws DeviceSpecError naming the file and field.
DeviceSpec load_device_spec(const std::string& path);

/// Reads `<config_dir>/devices/<id>.yaml`; an unknown id lists the known ones.
DeviceSpec find_device_spec(const std::string& id, const std::string& config_dir = "");

/// Ids of the device files in `<config_dir>/devices/`, sorted.
std::vector<std::string> list_device_specs(const std::string& config_dir = "");

}  // namespace stagecraft::profiler
