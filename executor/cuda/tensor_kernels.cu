// Own CUDA kernels over rows and row-major tensors of any rank: layer normalisation (one thread
// per normalised row), softmax (one block per contiguous row; one thread per strided row, so
// neighbouring threads read neighbouring addresses), transpose and narrow (one destination
// element per thread, N-D index arithmetic up to kMaxRank dimensions), concat_constant. What each
// thread computes is in element_ops.h and movement_ops.h, tested on the host.
#include <cuda_fp16.h>

#include <cstdint>

#include "executor/cuda/grid.cuh"
#include "executor/cuda/kernels.h"
#include "executor/cuda/movement_ops.h"

namespace stagecraft::executor::cuda {

namespace {

template <class T>
__global__ void layer_norm_kernel(const T* x, T* y, const float* gamma, const float* beta, float eps, Dims4 d) {
  GRID_LOOP(i, d.n * d.h * d.w) { layer_norm_at(x, y, gamma, beta, eps, d, i); }
}

// One block per row: max, sum of exponentials, then the quotients.
template <class T>
__global__ void softmax_kernel(const T* x, T* y, int64_t cols) {
  __shared__ float scratch[kThreads];
  const int64_t row = blockIdx.x;
  const T* in = x + row * cols;
  T* out = y + row * cols;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, load(in, j));
  scratch[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  m = scratch[0];
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(load(in, j) - m);
  scratch[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  sum = scratch[0];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) store(out, j, expf(load(in, j) - m) / sum);
}

template <class T>
__global__ void softmax_rows_kernel(const T* x, T* y, SoftmaxGeometry g) {
  GRID_LOOP(r, g.rows()) { softmax_row_at(x, y, g, r); }
}

template <class T>
__global__ void gather_kernel(const T* x, StridedView v, T* y) {
  GRID_LOOP(i, v.numel()) { gather_at(x, v, y, i); }
}

template <class T>
__global__ void concat_constant_kernel(const T* x, const float* constant, T* y, ConcatConstantParams p) {
  GRID_LOOP(i, p.numel()) { concat_constant_at(x, constant, y, p, i); }
}

}  // namespace

void launch_layer_norm(Elem e, const void* x, void* y, const float* gamma, const float* beta, float eps,
                       const Dims4& d, cudaStream_t s) {
  DISPATCH(e, (layer_norm_kernel<T><<<blocks_for(d.n * d.h * d.w), kThreads, 0, s>>>(
                  static_cast<const T*>(x), static_cast<T*>(y), gamma, beta, eps, d)));
}

void launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, cudaStream_t s) {
  DISPATCH(e, (softmax_kernel<T><<<static_cast<int>(rows), kThreads, 0, s>>>(
                  static_cast<const T*>(x), static_cast<T*>(y), cols)));
}

void launch_softmax_axis(Elem e, const void* x, void* y, const SoftmaxGeometry& g, cudaStream_t s) {
  if (g.inner == 1 && g.outer <= kMaxBlocks) {  // contiguous rows: one block each
    return launch_softmax(e, x, y, g.outer, g.extent, s);
  }
  DISPATCH(e, (softmax_rows_kernel<T><<<blocks_for(g.rows()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), static_cast<T*>(y), g)));
}

void launch_gather(Elem e, const void* x, const StridedView& v, void* y, cudaStream_t s) {
  DISPATCH(e, (gather_kernel<T><<<blocks_for(v.numel()), kThreads, 0, s>>>(static_cast<const T*>(x), v,
                                                                           static_cast<T*>(y))));
}

void launch_concat_constant(Elem e, const void* x, const float* constant, void* y, const ConcatConstantParams& p,
                            cudaStream_t s) {
  DISPATCH(e, (concat_constant_kernel<T><<<blocks_for(p.numel()), kThreads, 0, s>>>(
                  static_cast<const T*>(x), constant, static_cast<T*>(y), p)));
}

}  // namespace stagecraft::executor::cuda
