// `stagecraft devices`: the CPU backend (ISA oneDNN uses, default layout) and the GPUs this build
// can use, or why there are none.
#include <iostream>

#include "cli/commands.h"
#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cuda/devices.h"

namespace stagecraft::cli {

namespace {

std::string version_string(int64_t version, int64_t major_div, int64_t minor_div) {
  if (version == 0) return "none";
  return cat(version / major_div, ".", (version % major_div) / minor_div);
}

void run_devices() {
  std::cout << "CPU backend: " << executor::make_backend("cpu")->device().description() << "\n";
  const executor::DeviceQuery q = executor::query_cuda_devices();
  std::cout << "CUDA backend: " << (q.compiled ? "built" : "not built") << "\n";
  if (q.compiled) {
    std::cout << "CUDA runtime " << version_string(q.runtime_version, 1000, 10) << ", driver "
              << version_string(q.driver_version, 1000, 10) << ", cuDNN "
              << version_string(q.cudnn_version, 10000, 100) << "\n";
  }
  if (q.devices.empty()) {
    std::cout << "no usable GPU: " << q.reason << "\n";
    return;
  }
  TextTable table({"index", "name", "compute", "SMs", "memory"},
                  {TextTable::kRight, TextTable::kLeft, TextTable::kLeft, TextTable::kRight,
                   TextTable::kRight});
  for (const auto& d : q.devices) {
    table.add_row({cat(d.index), d.name, cat(d.compute_major, ".", d.compute_minor),
                   cat(d.sm_count), byte_size(static_cast<double>(d.memory_bytes))});
  }
  std::cout << table.render();
}

}  // namespace

void add_device_commands(CLI::App& app) {
  app.add_subcommand("devices", "The CPU backend's instruction set and default layout; the GPUs this "
                                "build can use, or why there are none")
      ->callback([] { run_devices(); });
}

}  // namespace stagecraft::cli
