#pragma once
// Launch geometry shared by the own kernels' translation units (kernels.cu, tensor_kernels.cu):
// block size, grid size, the grid-stride loop and the dispatch on the element type. Internal to
// executor/cuda/; nvcc only.
#include <cuda_fp16.h>

#include <cstdint>

#include "executor/cuda/element_ops.h"

namespace stagecraft::executor::cuda {

inline constexpr int kThreads = 256;
inline constexpr int kWarp = 32;
inline constexpr int64_t kMaxBlocks = 65535LL * 32;

/// Blocks of kThreads for n threads (at least 1, at most kMaxBlocks: the loops stride the grid).
inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace stagecraft::executor::cuda

#define GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Runs the statement with T the storage type of element type e.
#define DISPATCH(e, ...)                                    \
  do {                                                      \
    if ((e) == Elem::kF16) {                                \
      using T = __half;                                     \
      __VA_ARGS__;                                          \
    } else if ((e) == Elem::kU8) {                          \
      using T = uint8_t;                                    \
      __VA_ARGS__;                                          \
    } else if ((e) == Elem::kI8) {                          \
      using T = int8_t;                                     \
      __VA_ARGS__;                                          \
    } else {                                                \
      using T = float;                                      \
      __VA_ARGS__;                                          \
    }                                                       \
  } while (0)
