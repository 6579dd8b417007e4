#pragma once
// Internal to the CPU backend: this machine's CPU as a Device (executor/device.h) — host memory,
// the instruction set oneDNN runs on, the layouts its kernels run fastest in.

#include <string>

#include "executor/device.h"

namespace stagecraft::executor::cpu {

/// The CPU as oneDNN sees it. The first one made settles whether oneDNN may use AMX (amx.h: tried
/// in a child process, capped below it otherwise), so it is made before any primitive.
class CpuDevice : public Device {
 public:
  /// `winograd`: whether the backend runs eligible convolutions on our Winograd kernels, `fast`
  /// with their larger tiles (both and their revision are part of the fingerprint; the
  /// description says when they are off or fast).
  CpuDevice(bool winograd, bool fast);

  std::string name() const override { return "cpu"; }
  std::string device_fingerprint() const override;
  std::string description() const override;
  int parallelism() const override;
  const Capabilities& capabilities() const override { return caps_; }
  /// oneDNN's effective ISA by name ("avx512_core_bf16"), after any cap.
  const std::string& isa() const { return isa_; }
  graph::Layout preferred_layout(graph::DataType compute) const override;
  std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;

 private:
  Capabilities caps_;
  std::string isa_;
  std::string amx_;  // settle_amx()'s line ("" on a CPU without AMX)
  bool winograd_;
  bool fast_;
};

}  // namespace stagecraft::executor::cpu
