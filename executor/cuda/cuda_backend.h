#pragma once
/// The CUDA backend: cuDNN convolutions (algorithm timed once per shape and cached on disk per
/// device), cuBLAS GEMMs, own kernels for the rest; non-blocking streams with one cuDNN and one
/// cuBLAS handle each; events without timing for cross-stream dependencies; CUDA Graph capture of
/// whole runs. f32 (TF32 only when enabled) in NCHW or NHWC, f16 with tensor cores (NHWC best).
/// Only this folder sees CUDA types; the rest of the project sees this factory and the contract.

#include <memory>

#include "executor/backend.h"

namespace stagecraft::executor {

/// A CUDA backend on device 0; throws BackendError when no GPU is usable.
std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config);

}  // namespace stagecraft::executor
