#pragma once
// Own CUDA kernels of the CUDA backend (element-wise, pooling, copies, padding, softmax,
// epilogues): plain launchers callable from C++, templated on the element type inside kernels.cu.
// Internal to executor/cuda/.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace stagecraft::executor::cuda {

/// Element type of a tensor handled by the own kernels. 8-bit tensors hold quantised values:
/// kernels that keep the scale (pooling, copies, pad, ReLU) work on the integers directly (reads
/// as float, writes rounded to nearest and saturated); conversions take a factor.
enum class Elem : int { kF32 = 0, kF16 = 1, kU8 = 2, kI8 = 3 };
/// Activation codes (same order as graph::Activation).
enum class Act : int { kNone = 0, kRelu = 1, kRelu6 = 2, kSigmoid = 3 };
/// Pooling modes.
enum class PoolMode : int { kMax = 0, kAvgIncludePad = 1, kAvgExcludePad = 2 };

/// Geometry of a rank-4 tensor and its layout.
struct Dims4 {
  int64_t n = 1, c = 1, h = 1, w = 1;
  bool nhwc = false;
};

/// y[i] = act(y[i] + bias[channel(i)]) in place; bias may be null.
void launch_bias_act(Elem e, void* y, const float* bias, const Dims4& d, Act act, cudaStream_t s);
/// y = act(x) over n elements (y may equal x).
void launch_act(Elem e, const void* x, void* y, int64_t n, Act act, cudaStream_t s);
/// y = factor · x over n elements.
void launch_scale(Elem e, const void* x, void* y, int64_t n, float factor, cudaStream_t s);
/// y = act(sum of up to 8 inputs), n elements each.
void launch_add(Elem e, const void* const* srcs, int count, void* y, int64_t n, Act act,
                cudaStream_t s);
/// y = x * scale[c] + shift[c] (inference batch norm).
void launch_scale_shift(Elem e, const void* x, void* y, const float* scale, const float* shift,
                        const Dims4& d, cudaStream_t s);
/// 2-D pooling with PyTorch's semantics; `pad_end_h/w` are the bottom/right paddings.
void launch_pool(Elem e, const void* x, void* y, const Dims4& in, int64_t oh, int64_t ow,
                 int kh, int kw, int sh, int sw, int pad_top, int pad_left, int pad_bottom,
                 int pad_right, PoolMode mode, cudaStream_t s);
/// Mean over H×W into N×C×1×1.
void launch_global_avg(Elem e, const void* x, void* y, const Dims4& in, cudaStream_t s);
/// Copies `channels` channels from src (channels [src_c0, ...)) to dst (channels [dst_c0, ...)),
/// converting layout when the two differ; N, H, W are shared.
void launch_copy_channels(Elem e, const void* src, const Dims4& src_dims, int64_t src_c0,
                          void* dst, const Dims4& dst_dims, int64_t dst_c0, int64_t channels,
                          cudaStream_t s);
/// Constant padding (negative amounts crop).
void launch_pad(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int top,
                int left, float value, cudaStream_t s);
/// Softmax over the columns of each row.
void launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, cudaStream_t s);
/// dst = factor · src element by element, between element types (rounded and saturated into 8-bit
/// types) and layouts of the same logical shape: quantise, dequantise, requantise.
void launch_convert(Elem src_elem, const void* src, const Dims4& src_dims, Elem dst_elem, void* dst,
                    const Dims4& dst_dims, float factor, cudaStream_t s);
/// y = act(sum of factors[k] · srcs[k]) over n elements, inputs of any element types (at most 8).
void launch_add_scaled(const void* const* srcs, const Elem* elems, const float* factors, int count,
                       Elem dst_elem, void* y, int64_t n, Act act, float relu6_max, cudaStream_t s);
/// The epilogue of a quantised convolution: y[n,h,w,k] = act((acc[n,h,w,k] + bias[k]) · scale[k])
/// for k < out_channels, where acc is NHWC f32 with `acc_channels` (>= out_channels, padded)
/// channels; ReLU6 clips at relu6_max (6 / the output scale for 8-bit outputs); bias may be null.
void launch_requantize(const float* acc, const Dims4& acc_dims, const float* bias,
                       const float* scale, Act act, float relu6_max, Elem dst_elem, void* y,
                       const Dims4& y_dims, cudaStream_t s);
/// dst[i] = (half) src[i].
void launch_float_to_half(const float* src, void* dst, int64_t n, cudaStream_t s);

}  // namespace stagecraft::executor::cuda
