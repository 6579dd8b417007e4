#pragma once
// One kernel at a time, for the tests of a backend's kernels: a spec named after its kind, and
// one run of a kernel with its sources uploaded and its destinations downloaded.

#include <cstdint>
#include <vector>

#include "executor/backend.h"

namespace stagecraft::testing {

/// The bytes of one tensor on the host.
using Bytes = std::vector<uint8_t>;

/// A spec of `kind` named after it ("softmax").
executor::KernelSpec kernel_spec(graph::OpKind kind, graph::OpAttrs attrs,
                                 std::vector<graph::TensorDesc> srcs,
                                 std::vector<graph::TensorDesc> dsts,
                                 const graph::OpWeights* weights = nullptr);

/// Runs `kernel`, made by `backend` for `spec`, once on a new stream of it: `srcs` uploaded as
/// the sources, every destination downloaded.
std::vector<Bytes> run_kernel(executor::Backend& backend, executor::Kernel& kernel,
                              const executor::KernelSpec& spec, const std::vector<Bytes>& srcs);

/// Creates and runs an f32 kernel of `spec` on `backend`: destination 0.
std::vector<float> run_f32_kernel(executor::Backend& backend, const executor::KernelSpec& spec,
                                  const std::vector<std::vector<float>>& srcs);

}  // namespace stagecraft::testing
