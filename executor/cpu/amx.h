#pragma once
// Internal to the CPU backend: whether oneDNN may run its AMX kernels here. A CPU can advertise
// AMX and still fault on its tile instructions (oneDNN 2.6.3's AMX int8 inner product died with
// SIGILL on one VM; on another, an Intel Xeon under Firecracker, 94 of inception_v3's 129 int8
// kernels ran on AMX and agreed), so the kernels are tried once in a child process before this
// process lets oneDNN use them.

#include <functional>
#include <string>

namespace stagecraft::executor::cpu {

/// How a function run in a child process ended.
struct ChildOutcome {
  enum class Kind { kExited, kSignalled, kTimedOut, kNotStarted };
  Kind kind = Kind::kNotStarted;
  int code = 0;  // the exit status (kExited), the signal's number (kSignalled), errno (kNotStarted)
  bool ok() const { return kind == Kind::kExited && code == 0; }
  /// "exited with status 3", "died with SIGILL (signal 4)", "did not end within 10 s".
  std::string describe(double timeout_s) const;
};

/// Runs `body` in a forked child whose exit status is body's return value (an exception: 70),
/// waits up to `timeout_s`, then kills and reaps it. The child leaves with _exit (no atexit
/// handlers, no flushing of the parent's buffers) and runs oneDNN on one thread.
ChildOutcome run_in_child(const std::function<int()>& body, double timeout_s);

/// Builds and runs, once each, small kernels oneDNN runs on AMX where it may: an int8 inner
/// product (u8 x s8) and a bf16 3x3 convolution in nhwc (where the CPU has bf16). 0 when they
/// ran; what is missing on this CPU is skipped. The body of the AMX trial.
int run_amx_trial_kernels();

/// The decision, made once per process before any oneDNN primitive (CpuDevice's constructor):
/// - ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA set: the environment decides, nothing is tried;
/// - a CPU without AMX (no amx_tile in /proc/cpuinfo): nothing to decide;
/// - STAGECRAFT_AMX=off (or 0): capped below AMX; =on (or 1): allowed untried;
/// - else run_amx_trial_kernels() in a child with AMX allowed: allowed when it exits with 0,
///   capped below AMX (oneDNN's avx512_core_bf16) when it dies, fails or hangs.
struct AmxDecision {
  bool cpu_has_amx = false;
  bool allowed = false;
  std::string why;  // one line for the device's description ("" on a CPU without AMX)
};
const AmxDecision& settle_amx();

}  // namespace stagecraft::executor::cpu
