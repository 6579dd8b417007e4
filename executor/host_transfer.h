#pragma once
/// Moving host tensors (f32, logical NCHW/NC order) into and out of backend tensors: f16 tensors
/// are converted on the host, 8-bit tensors quantised (round to nearest, saturate) and
/// dequantised with their scale.

#include <span>

#include "executor/backend.h"
#include "executor/tensor.h"

namespace stagecraft::executor {

/// Uploads `values` (ref's shape.numel() of them, logical order) into the backend tensor `ref`
/// (plain layout).
void upload_tensor(Backend& backend, const TensorRef& ref, std::span<const float> values);
/// Uploads `t` into the backend tensor `ref` (same logical shape, plain layout).
void upload_tensor(Backend& backend, const TensorRef& ref, const HostTensor& t);
/// Downloads the backend tensor `ref` (plain layout) into `out` (ref's shape.numel() floats).
void download_tensor(Backend& backend, const TensorRef& ref, std::span<float> out);
/// Downloads the backend tensor `ref` (plain layout) as an f32 host tensor.
HostTensor download_tensor(Backend& backend, const TensorRef& ref);

}  // namespace stagecraft::executor
