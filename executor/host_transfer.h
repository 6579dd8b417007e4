#pragma once
/// Moving host tensors (f32, logical NCHW/NC order) into and out of backend tensors: f16 tensors
/// are converted on the host, 8-bit tensors quantised (round to nearest, saturate) and
/// dequantised with their scale.

#include "executor/backend.h"
#include "executor/tensor.h"

namespace stagecraft::executor {

/// Uploads `t` into the backend tensor `ref` (same logical shape, plain layout).
void upload_tensor(Backend& backend, const TensorRef& ref, const HostTensor& t);
/// Downloads the backend tensor `ref` (plain layout) as an f32 host tensor.
HostTensor download_tensor(Backend& backend, const TensorRef& ref);

}  // namespace stagecraft::executor
