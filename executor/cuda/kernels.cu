// Own CUDA kernels of the CUDA backend. Arithmetic is in float whatever the storage type.
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "executor/cuda/kernels.h"

namespace stagecraft::executor::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxAddInputs = 8;
constexpr int64_t kMaxBlocks = 65535LL * 32;

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__half* p, int64_t i, float v) { p[i] = __float2half(v); }
__device__ __forceinline__ float load(const uint8_t* p, int64_t i) { return static_cast<float>(p[i]); }
__device__ __forceinline__ float load(const int8_t* p, int64_t i) { return static_cast<float>(p[i]); }
__device__ __forceinline__ void store(uint8_t* p, int64_t i, float v) {
  p[i] = static_cast<uint8_t>(fminf(fmaxf(rintf(v), 0.f), 255.f));
}
__device__ __forceinline__ void store(int8_t* p, int64_t i, float v) {
  p[i] = static_cast<int8_t>(fminf(fmaxf(rintf(v), -128.f), 127.f));
}

__device__ __forceinline__ float load_any(const void* p, int elem, int64_t i) {
  switch (elem) {
    case 1:
      return load(static_cast<const __half*>(p), i);
    case 2:
      return load(static_cast<const uint8_t*>(p), i);
    case 3:
      return load(static_cast<const int8_t*>(p), i);
    default:
      return load(static_cast<const float*>(p), i);
  }
}

__device__ __forceinline__ float activate(float v, Act act) {
  switch (act) {
    case Act::kRelu:
      return v > 0.f ? v : 0.f;
    case Act::kRelu6:
      return fminf(fmaxf(v, 0.f), 6.f);
    case Act::kSigmoid:
      return 1.f / (1.f + __expf(-v));
    default:
      return v;
  }
}

// Offset of (n, c, h, w) in a tensor of dims d.
__device__ __forceinline__ int64_t offset(const Dims4& d, int64_t n, int64_t c, int64_t h,
                                          int64_t w) {
  return d.nhwc ? ((n * d.h + h) * d.w + w) * d.c + c : ((n * d.c + c) * d.h + h) * d.w + w;
}

__device__ __forceinline__ int64_t channel_of(const Dims4& d, int64_t i) {
  return d.nhwc ? i % d.c : (i / (d.h * d.w)) % d.c;
}

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

#define GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <class T>
__global__ void bias_act_kernel(T* y, const float* bias, Dims4 d, Act act) {
  const int64_t total = d.n * d.c * d.h * d.w;
  GRID_LOOP(i, total) {
    float v = load(y, i);
    if (bias) v += bias[channel_of(d, i)];
    store(y, i, activate(v, act));
  }
}

template <class T>
__global__ void act_kernel(const T* x, T* y, int64_t n, Act act) {
  GRID_LOOP(i, n) { store(y, i, activate(load(x, i), act)); }
}

template <class T>
__global__ void scale_kernel(const T* x, T* y, int64_t n, float factor) {
  GRID_LOOP(i, n) { store(y, i, load(x, i) * factor); }
}

template <class T>
struct AddInputs {
  const T* p[kMaxAddInputs];
};

template <class T>
__global__ void add_kernel(AddInputs<T> in, int count, T* y, int64_t n, Act act) {
  GRID_LOOP(i, n) {
    float v = 0.f;
    for (int k = 0; k < count; ++k) v += load(in.p[k], i);
    store(y, i, activate(v, act));
  }
}

template <class T>
__global__ void scale_shift_kernel(const T* x, T* y, const float* scale, const float* shift,
                                   Dims4 d) {
  const int64_t total = d.n * d.c * d.h * d.w;
  GRID_LOOP(i, total) {
    const int64_t c = channel_of(d, i);
    store(y, i, load(x, i) * scale[c] + shift[c]);
  }
}

template <class T>
__global__ void pool_kernel(const T* x, T* y, Dims4 in, Dims4 out, int kh, int kw, int sh,
                            int sw, int pt, int pl, int pb, int pr, PoolMode mode) {
  const int64_t total = out.n * out.c * out.h * out.w;
  GRID_LOOP(i, total) {
    // Output coordinates in NCHW order of the linear index.
    const int64_t ow = i % out.w, oh = (i / out.w) % out.h, c = (i / (out.w * out.h)) % out.c,
                  n = i / (out.w * out.h * out.c);
    const int64_t hs = oh * sh - pt, ws = ow * sw - pl;
    const int64_t he = min(hs + kh, in.h + pb), we = min(ws + kw, in.w + pr);
    const int64_t h0 = max(hs, int64_t{0}), w0 = max(ws, int64_t{0});
    const int64_t h1 = min(he, in.h), w1 = min(we, in.w);
    float acc = mode == PoolMode::kMax ? -FLT_MAX : 0.f;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const float v = load(x, offset(in, n, c, h, w));
        acc = mode == PoolMode::kMax ? fmaxf(acc, v) : acc + v;
      }
    if (mode == PoolMode::kAvgIncludePad) acc /= static_cast<float>((he - hs) * (we - ws));
    if (mode == PoolMode::kAvgExcludePad) acc /= static_cast<float>(max((h1 - h0) * (w1 - w0), int64_t{1}));
    store(y, offset(out, n, c, oh, ow), acc);
  }
}

template <class T>
__global__ void global_avg_kernel(const T* x, T* y, Dims4 in) {
  const int64_t total = in.n * in.c;
  GRID_LOOP(i, total) {
    const int64_t c = i % in.c, n = i / in.c;
    float acc = 0.f;
    for (int64_t h = 0; h < in.h; ++h)
      for (int64_t w = 0; w < in.w; ++w) acc += load(x, offset(in, n, c, h, w));
    Dims4 out = in;
    out.h = out.w = 1;
    store(y, offset(out, n, c, 0, 0), acc / static_cast<float>(in.h * in.w));
  }
}

template <class T>
__global__ void copy_channels_kernel(const T* src, Dims4 sd, int64_t sc0, T* dst, Dims4 dd,
                                     int64_t dc0, int64_t channels) {
  const int64_t total = sd.n * channels * sd.h * sd.w;
  GRID_LOOP(i, total) {
    const int64_t w = i % sd.w, h = (i / sd.w) % sd.h, c = (i / (sd.w * sd.h)) % channels,
                  n = i / (sd.w * sd.h * channels);
    store(dst, offset(dd, n, dc0 + c, h, w), load(src, offset(sd, n, sc0 + c, h, w)));
  }
}

template <class T>
__global__ void pad_kernel(const T* x, Dims4 in, T* y, Dims4 out, int top, int left, float value) {
  const int64_t total = out.n * out.c * out.h * out.w;
  GRID_LOOP(i, total) {
    const int64_t w = i % out.w, h = (i / out.w) % out.h, c = (i / (out.w * out.h)) % out.c,
                  n = i / (out.w * out.h * out.c);
    const int64_t sh = h - top, sw = w - left;
    const bool inside = sh >= 0 && sh < in.h && sw >= 0 && sw < in.w;
    store(y, offset(out, n, c, h, w), inside ? load(x, offset(in, n, c, sh, sw)) : value);
  }
}

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
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += __expf(load(in, j) - m);
  scratch[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  sum = scratch[0];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) store(out, j, __expf(load(in, j) - m) / sum);
}

template <class TS, class TD>
__global__ void convert_kernel(const TS* src, Dims4 sd, TD* dst, Dims4 dd, float factor) {
  const int64_t total = sd.n * sd.c * sd.h * sd.w;
  GRID_LOOP(i, total) {
    const int64_t w = i % sd.w, h = (i / sd.w) % sd.h, c = (i / (sd.w * sd.h)) % sd.c,
                  n = i / (sd.w * sd.h * sd.c);
    store(dst, offset(dd, n, c, h, w), load(src, offset(sd, n, c, h, w)) * factor);
  }
}

struct ScaledInputs {
  const void* p[kMaxAddInputs];
  int elem[kMaxAddInputs];
  float factor[kMaxAddInputs];
};

__device__ __forceinline__ float activate_clipped(float v, Act act, float relu6_max) {
  return act == Act::kRelu6 ? fminf(fmaxf(v, 0.f), relu6_max) : activate(v, act);
}

template <class T>
__global__ void add_scaled_kernel(ScaledInputs in, int count, T* y, int64_t n, Act act,
                                  float relu6_max) {
  GRID_LOOP(i, n) {
    float v = 0.f;
    for (int k = 0; k < count; ++k) v += in.factor[k] * load_any(in.p[k], in.elem[k], i);
    store(y, i, activate_clipped(v, act, relu6_max));
  }
}

template <class T>
__global__ void requantize_kernel(const float* acc, Dims4 ad, const float* bias, const float* scale,
                                  Act act, float relu6_max, T* y, Dims4 yd) {
  const int64_t total = yd.n * yd.c * yd.h * yd.w;
  GRID_LOOP(i, total) {
    const int64_t k = i % yd.c, w = (i / yd.c) % yd.w, h = (i / (yd.c * yd.w)) % yd.h,
                  n = i / (yd.c * yd.w * yd.h);
    float v = acc[((n * ad.h + h) * ad.w + w) * ad.c + k];
    if (bias) v += bias[k];
    store(y, offset(yd, n, k, h, w), activate_clipped(v * scale[k], act, relu6_max));
  }
}

__global__ void float_to_half_kernel(const float* src, __half* dst, int64_t n) {
  GRID_LOOP(i, n) { dst[i] = __float2half(src[i]); }
}

}  // namespace

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

namespace {

template <class TS>
void convert_from(const TS* src, const Dims4& sd, Elem de, void* dst, const Dims4& dd, float factor,
                  cudaStream_t s) {
  const int64_t n = sd.n * sd.c * sd.h * sd.w;
  DISPATCH(de, (convert_kernel<TS, T><<<blocks_for(n), kThreads, 0, s>>>(src, sd, static_cast<T*>(dst),
                                                                        dd, factor)));
}

}  // namespace

void launch_convert(Elem src_elem, const void* src, const Dims4& src_dims, Elem dst_elem, void* dst,
                    const Dims4& dst_dims, float factor, cudaStream_t s) {
  DISPATCH(src_elem, convert_from<T>(static_cast<const T*>(src), src_dims, dst_elem, dst, dst_dims,
                                     factor, s));
}

void launch_add_scaled(const void* const* srcs, const Elem* elems, const float* factors, int count,
                       Elem dst_elem, void* y, int64_t n, Act act, float relu6_max, cudaStream_t s) {
  ScaledInputs in{};
  const int used = count < kMaxAddInputs ? count : kMaxAddInputs;
  for (int k = 0; k < used; ++k) {
    in.p[k] = srcs[k];
    in.elem[k] = static_cast<int>(elems[k]);
    in.factor[k] = factors[k];
  }
  DISPATCH(dst_elem, (add_scaled_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
                         in, used, static_cast<T*>(y), n, act, relu6_max)));
}

void launch_requantize(const float* acc, const Dims4& acc_dims, const float* bias,
                       const float* scale, Act act, float relu6_max, Elem dst_elem, void* y,
                       const Dims4& y_dims, cudaStream_t s) {
  const int64_t n = y_dims.n * y_dims.c * y_dims.h * y_dims.w;
  DISPATCH(dst_elem, (requantize_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
                         acc, acc_dims, bias, scale, act, relu6_max, static_cast<T*>(y), y_dims)));
}

void launch_bias_act(Elem e, void* y, const float* bias, const Dims4& d, Act act, cudaStream_t s) {
  const int64_t n = d.n * d.c * d.h * d.w;
  DISPATCH(e, (bias_act_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(y), bias, d, act)));
}

void launch_act(Elem e, const void* x, void* y, int64_t n, Act act, cudaStream_t s) {
  DISPATCH(e, (act_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x),
                                                               static_cast<T*>(y), n, act)));
}

void launch_scale(Elem e, const void* x, void* y, int64_t n, float factor, cudaStream_t s) {
  DISPATCH(e, (scale_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x),
                                                                 static_cast<T*>(y), n, factor)));
}

void launch_add(Elem e, const void* const* srcs, int count, void* y, int64_t n, Act act,
                cudaStream_t s) {
  DISPATCH(e, {
    AddInputs<T> in{};
    for (int k = 0; k < count && k < kMaxAddInputs; ++k) in.p[k] = static_cast<const T*>(srcs[k]);
    add_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(in, count < kMaxAddInputs ? count : kMaxAddInputs,
                                                    static_cast<T*>(y), n, act);
  });
}

void launch_scale_shift(Elem e, const void* x, void* y, const float* scale, const float* shift,
                        const Dims4& d, cudaStream_t s) {
  const int64_t n = d.n * d.c * d.h * d.w;
  DISPATCH(e, (scale_shift_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
                  static_cast<const T*>(x), static_cast<T*>(y), scale, shift, d)));
}

void launch_pool(Elem e, const void* x, void* y, const Dims4& in, int64_t oh, int64_t ow, int kh,
                 int kw, int sh, int sw, int pad_top, int pad_left, int pad_bottom, int pad_right,
                 PoolMode mode, cudaStream_t s) {
  Dims4 out = in;
  out.h = oh;
  out.w = ow;
  const int64_t n = out.n * out.c * out.h * out.w;
  DISPATCH(e, (pool_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
                  static_cast<const T*>(x), static_cast<T*>(y), in, out, kh, kw, sh, sw, pad_top,
                  pad_left, pad_bottom, pad_right, mode)));
}

void launch_global_avg(Elem e, const void* x, void* y, const Dims4& in, cudaStream_t s) {
  const int64_t n = in.n * in.c;
  DISPATCH(e, (global_avg_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x),
                                                                      static_cast<T*>(y), in)));
}

void launch_copy_channels(Elem e, const void* src, const Dims4& src_dims, int64_t src_c0,
                          void* dst, const Dims4& dst_dims, int64_t dst_c0, int64_t channels,
                          cudaStream_t s) {
  const int64_t n = src_dims.n * channels * src_dims.h * src_dims.w;
  DISPATCH(e, (copy_channels_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
                  static_cast<const T*>(src), src_dims, src_c0, static_cast<T*>(dst), dst_dims,
                  dst_c0, channels)));
}

void launch_pad(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int top,
                int left, float value, cudaStream_t s) {
  const int64_t n = out.n * out.c * out.h * out.w;
  DISPATCH(e, (pad_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), in,
                                                               static_cast<T*>(y), out, top, left,
                                                               value)));
}

void launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, cudaStream_t s) {
  DISPATCH(e, (softmax_kernel<T><<<static_cast<int>(rows), kThreads, 0, s>>>(
                  static_cast<const T*>(x), static_cast<T*>(y), cols)));
}

void launch_float_to_half(const float* src, void* dst, int64_t n, cudaStream_t s) {
  float_to_half_kernel<<<blocks_for(n), kThreads, 0, s>>>(src, static_cast<__half*>(dst), n);
}

}  // namespace stagecraft::executor::cuda
