#pragma once
// Own CUDA kernels of the CUDA backend (element-wise, pooling, copies, padding, softmax,
// conversions, epilogues): plain launchers callable from C++, templated on the element type
// inside kernels.cu. What each thread computes is in element_ops.h. Internal to executor/cuda/.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "executor/cuda/element_ops.h"
#include "executor/cuda/movement_ops.h"

namespace stagecraft::executor::cuda {

/// The most inputs one addition kernel reads (longer sums accumulate in several launches).
inline constexpr int kMaxAddInputs = 8;

/// y[i] = act(y[i] + bias[channel(i)]) in place; bias may be null.
void launch_bias_act(Elem e, void* y, const float* bias, const Dims4& d, Act act, float relu6_max,
                     cudaStream_t s);
/// y = act(x) over n elements (y may equal x): a standalone activation op.
void launch_act(Elem e, const void* x, void* y, int64_t n, const ActParams& act, cudaStream_t s);
/// y = act(x OP o) with NumPy broadcasting (element_ops.h: binary_at): x and y of element type e
/// (f32 or f16), o of type `o_elem` (e, or f32 for a constant); each operand in its own layout.
/// Packs of 4 destination elements per thread when x has y's geometry and both are aligned.
void launch_binary(Elem e, const void* x, const Dims4& xd, const void* o, Elem o_elem,
                   const Dims4& od, void* y, const Dims4& yd, const BinaryParams& p, cudaStream_t s);
/// y = factor · x over n elements.
void launch_scale(Elem e, const void* x, void* y, int64_t n, float factor, cudaStream_t s);
/// y = act(sum of `count` (at most kMaxAddInputs) inputs), n elements each.
void launch_add(Elem e, const void* const* srcs, int count, void* y, int64_t n, Act act,
                float relu6_max, cudaStream_t s);
/// y = layer normalisation of x over the channels of each pixel, times gamma plus beta (per
/// channel; element_ops.h: layer_norm_at; tensor_kernels.cu).
void launch_layer_norm(Elem e, const void* x, void* y, const float* gamma, const float* beta, float eps,
                       const Dims4& d, cudaStream_t s);
/// y = x * scale[c] + shift[c] (inference batch norm).
void launch_scale_shift(Elem e, const void* x, void* y, const float* scale, const float* shift,
                        const Dims4& d, cudaStream_t s);
/// 2-D pooling with PyTorch's semantics from `in` into `out` (same layout).
void launch_pool(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out,
                 const PoolParams& p, cudaStream_t s);
/// Mean over H×W into N×C×1×1.
void launch_global_avg(Elem e, const void* x, void* y, const Dims4& in, cudaStream_t s);
/// Maximum over H×W into N×C×1×1.
void launch_global_max(Elem e, const void* x, void* y, const Dims4& in, cudaStream_t s);
/// Channel shuffle (ShuffleNet) from x to y (same shape, each in its own layout): whole planes in
/// the widest aligned unit when both are NCHW, else one element per thread.
void launch_channel_shuffle(Elem e, const void* x, const Dims4& xd, void* y, const Dims4& yd,
                            int64_t groups, cudaStream_t s);
/// Reshape keeping the plain element order (rank 2 or 4 either side, each in its own layout): a
/// flat copy in 16-byte units where both memory orders are plain, else one element per thread.
void launch_reshape(Elem e, const void* x, const Dims4& xd, void* y, const Dims4& yd, cudaStream_t s);
/// Nearest or bilinear resize of H and W (graph::ResizeAttrs), each tensor in its own layout.
void launch_resize(Elem e, const void* x, const Dims4& xd, void* y, const Dims4& yd, double scale_h,
                   double scale_w, bool linear, cudaStream_t s);
/// Copies `channels` channels from src (channels [src_c0, ...)) to dst (channels [dst_c0, ...)),
/// converting layout when the two differ; N, H, W are shared. Same-layout copies move strided
/// rows of bytes in the widest aligned unit (up to 16 bytes per thread).
void launch_copy_channels(Elem e, const void* src, const Dims4& src_dims, int64_t src_c0,
                          void* dst, const Dims4& dst_dims, int64_t dst_c0, int64_t channels,
                          cudaStream_t s);
/// Constant padding (negative amounts crop).
void launch_pad(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int top,
                int left, float value, cudaStream_t s);
/// Reflect padding, space to depth and reductions, one output element per thread
/// (movement_ops.h: reflect_pad_at, space_to_depth_at, reduce_at).
void launch_reflect_pad(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int64_t top,
                        int64_t left, cudaStream_t s);
void launch_space_to_depth(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, int64_t block,
                           cudaStream_t s);
void launch_reduce(Elem e, const void* x, const Dims4& in, void* y, const Dims4& out, ReduceMode mode,
                   cudaStream_t s);
/// Softmax over the columns of each contiguous row (one block per row).
void launch_softmax(Elem e, const void* x, void* y, int64_t rows, int64_t cols, cudaStream_t s);

// tensor_kernels.cu: rows and row-major tensors of any rank.

/// Softmax over an axis seen as [outer, extent, inner] (element_ops.h: softmax_row_at): one block
/// per row when rows are contiguous (inner = 1), else one thread per row.
void launch_softmax_axis(Elem e, const void* x, void* y, const SoftmaxGeometry& g, cudaStream_t s);
/// Transpose or narrow (movement_ops.h: gather_at): y[i] = x[strided_offset(v, i)].
void launch_gather(Elem e, const void* x, const StridedView& v, void* y, cudaStream_t s);
/// The input with a constant block (f32, one sample's, on the device) joined along an axis
/// (movement_ops.h: concat_constant_at).
void launch_concat_constant(Elem e, const void* x, const float* constant, void* y, const ConcatConstantParams& p,
                            cudaStream_t s);
/// dst = factor · src element by element, between element types (rounded and saturated into 8-bit
/// types) and layouts of the same N, H, W: quantise, dequantise, requantise; channels of dst
/// beyond src's are zero.
void launch_convert(Elem src_elem, const void* src, const Dims4& src_dims, Elem dst_elem, void* dst,
                    const Dims4& dst_dims, float factor, cudaStream_t s);
/// y = act(sum of factors[k] · srcs[k]) over n elements, inputs of any element types (at most
/// kMaxAddInputs).
void launch_add_scaled(const void* const* srcs, const Elem* elems, const float* factors, int count,
                       Elem dst_elem, void* y, int64_t n, Act act, float relu6_max, cudaStream_t s);
/// The epilogue of a quantised convolution (element_ops.h: requantize_at).
void launch_requantize(const float* acc, const Dims4& acc_dims, const float* bias,
                       const float* scale, Act act, float relu6_max, Elem dst_elem, void* y,
                       const Dims4& y_dims, cudaStream_t s);

}  // namespace stagecraft::executor::cuda
