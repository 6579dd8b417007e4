#pragma once
/// The CUDA backend: cuDNN convolutions (algorithm timed once per shape on the call that runs,
/// cached per device), cuBLAS GEMMs, own kernels for the rest; non-blocking streams with one cuDNN
/// and one cuBLAS handle each (cuBLAS with a fixed workspace); events without timing for
/// cross-stream dependencies; CUDA Graph capture of whole runs. f32 (TF32 only when enabled)
/// defaults to NCHW, f16 (tensor cores) and int8 to NHWC. Only this folder sees CUDA types; the
/// rest of the project sees this factory and the contract. See README.md.

#include <memory>

#include "executor/backend.h"

namespace stagecraft::executor {

/// A CUDA backend on device 0; throws BackendError when no GPU is usable.
std::unique_ptr<Backend> make_cuda_backend(const BackendConfig& config);

}  // namespace stagecraft::executor
