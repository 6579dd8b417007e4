#pragma once
// For the scope of a test, the FMA-width gain the CPU backend's kernel choice reads
// (cpu::host_fma512_gain) is `gain` instead of this machine's measurement: 1 (512-bit FMAs no
// wider than two 256-bit ones, as on AMD Zen 4) runs our Winograd kernels wherever they apply,
// 2 (Intel's two 512-bit ports) oneDNN's AVX-512 kernels where it has them. Tests then cover the
// same kernels on every machine, however loaded it is when the probe runs.
#include "executor/cpu/host_simd.h"

namespace stagecraft::executor::testing {

class ForcedFma512Gain {
 public:
  explicit ForcedFma512Gain(double gain) { cpu::override_fma512_gain(gain); }
  ~ForcedFma512Gain() { cpu::override_fma512_gain(-1.0); }
  ForcedFma512Gain(const ForcedFma512Gain&) = delete;
  ForcedFma512Gain& operator=(const ForcedFma512Gain&) = delete;
};

}  // namespace stagecraft::executor::testing
