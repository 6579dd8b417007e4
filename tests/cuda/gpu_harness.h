#pragma once
// The harness of the GPU tests (label `gpu`): the program's CUDA backend (destroyed by a test
// environment before main returns), whole plans run on it and on the CPU, comparisons, and the
// skip of every GPU test without a usable GPU (with the CUDA runtime's reason).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/devices.h"
#include "executor/tensor.h"
#include "scheduler/schedule.h"
#include "support/models.h"

namespace stagecraft::executor::gpu_test {

// f32 (FMA math, TF32 off): the CPU tests' order of tolerance; cuDNN's FFT and Winograd
// algorithms round differently from oneDNN's direct ones, but TF32 switched on by accident (10
// mantissa bits: errors near 1e-3) fails it. TF32 has its own test and tolerance.
inline constexpr double kF32Tolerance = 1e-4;
inline constexpr double kTf32Tolerance = 1e-2;
inline constexpr double kF16Tolerance = 5e-2;
// int8 against the CPU's int8 run: cuDNN takes u8 inputs halved into i8 (one bit less), so outputs
// differ by a few quantisation steps; expect_close prints each measured error for tightening.
inline constexpr double kInt8Tolerance = 0.05;

#define SKIP_WITHOUT_GPU()                                               \
  do {                                                                   \
    const DeviceQuery q = query_cuda_devices();                          \
    if (q.devices.empty()) GTEST_SKIP() << "no usable GPU: " << q.reason; \
  } while (0)

/// The program's GPU backend (made on first use).
Backend& gpu();

/// Outputs of two runs of one executor.
struct RunResult {
  std::vector<HostTensor> first, second;  ///< outputs for the first and the second inputs
  bool captured = false;                  ///< whether the executor replays a CUDA Graph
};

/// Runs `m` twice on one executor: with inputs of seed 7, then (after a capture in graph mode)
/// with new inputs of seed 8, so that a replay reading stale inputs is caught.
RunResult run_twice(Backend& backend, const stagecraft::testing::Model& m, const scheduler::Schedule& s,
                    graph::Layout layout, bool graph_mode = true);
/// The CPU backend's outputs for inputs of `seed`.
std::vector<HostTensor> run_cpu(const stagecraft::testing::Model& m, const scheduler::Schedule& s,
                                graph::Layout layout, uint64_t seed);
/// Every output's relative error below `tolerance` (NaN and shape mismatches fail); prints the
/// largest one measured with `what`.
void expect_close(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want, double tolerance,
                  const std::string& what);
/// Both runs of r close to the CPU's outputs for seeds 7 and 8.
void expect_both_runs_close(const RunResult& r, const std::vector<HostTensor>& want7,
                            const std::vector<HostTensor>& want8, double tolerance, const std::string& what);
/// Runs `m` twice (seed-7 then seed-8 inputs) in graph and stream mode in `layout` and compares
/// both runs with the CPU's; graph mode must capture.
void expect_graph_and_stream_match(const stagecraft::testing::Model& m, const scheduler::Schedule& s,
                                   graph::Layout layout, const std::vector<HostTensor>& want7,
                                   const std::vector<HostTensor>& want8, double tolerance, const std::string& what);
/// Every value of `m` (each op's outputs made graph outputs) under the sequential schedule in
/// `layout`, on the GPU against the CPU: one failure per value outside `tolerance`, naming it and
/// the op that writes it, so that a wrong output is traced to the first op that goes wrong.
void expect_every_value_matches(const stagecraft::testing::Model& m, graph::Layout layout, double tolerance,
                                const std::string& what);
/// Runs one f32 kernel on the GPU: sources uploaded, destination 0 downloaded.
std::vector<float> run_gpu_kernel(const KernelSpec& spec, const std::vector<std::vector<float>>& srcs);

}  // namespace stagecraft::executor::gpu_test
