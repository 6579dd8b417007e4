#pragma once
// What each thread of the CUDA backend's own kernels computes, and where it reads and writes:
// index arithmetic and per-element bodies shared by the device kernels (kernels.cu: one thread
// per element in a grid-stride loop) and by host tests that run the same bodies over every index
// on the CPU (tests/cuda/test_element_ops.cpp), so that the arithmetic and the memory order of the
// threads are checked without a GPU. Internal to executor/cuda/; free of CUDA types except under
// nvcc (the f16 overloads).
//
// Thread order: thread i writes the element at memory offset i of its destination (in the
// destination's layout), so neighbouring threads touch neighbouring addresses in NCHW and NHWC
// alike (coalesced); in NHWC the channel is the fastest-moving coordinate, so a pooling window or
// a channel slice is read by neighbouring threads at neighbouring addresses too.

#include <math.h>  // rintf, fminf, fmaxf, expf: the same names on the host and the device

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define STAGECRAFT_HD __host__ __device__ __forceinline__
#else
#define STAGECRAFT_HD inline
#endif

namespace stagecraft::executor::cuda {

/// Element type of a tensor handled by the own kernels. 8-bit tensors hold quantised values:
/// kernels that keep the scale (pooling, copies, pad, ReLU) work on the integers directly (read
/// as float, written rounded to nearest even and saturated); conversions take a factor.
enum class Elem : int { kF32 = 0, kF16 = 1, kU8 = 2, kI8 = 3 };
/// Activation codes: the fused activations in graph::Activation's order (ops.cpp checks it), then
/// kLeakyRelu, which only the standalone op computes (ActParams carries its slope).
enum class Act : int {
  kNone = 0,
  kRelu = 1,
  kRelu6 = 2,
  kSigmoid = 3,
  kHardSigmoid = 4,
  kHardSwish = 5,
  kSilu = 6,
  kGelu = 7,
  kGeluTanh = 8,
  kTanh = 9,
  kSqrt = 10,
  kLeakyRelu = 11,
  kClip = 12,
};
/// Binary operations (same order as graph::BinaryOp).
/// The own kernel computes the first four; the CUDA check refuses the others.
enum class BinOp : int {
  kAdd = 0, kSub = 1, kMul = 2, kDiv = 3, kPow = 4, kMax = 5, kMin = 6, kMod = 7,
  // Refused by the binary check (the CPU backend runs them): the comparisons and logical ops.
  kEqual = 8, kLess = 9, kLessEqual = 10, kGreater = 11, kGreaterEqual = 12, kAnd = 13, kOr = 14, kXor = 15
};
/// Reductions over dimensions (reduce_at): mean, maximum, sum.
enum class ReduceMode : int { kMean = 0, kMax = 1, kSum = 2 };
/// Pooling modes.
enum class PoolMode : int { kMax = 0, kAvgIncludePad = 1, kAvgExcludePad = 2 };

/// Bytes of one element.
STAGECRAFT_HD int elem_bytes(Elem e) { return e == Elem::kF32 ? 4 : e == Elem::kF16 ? 2 : 1; }

/// Geometry of a rank-4 tensor and its layout (rank-2 tensors: N × C with H = W = 1).
struct Dims4 {
  int64_t n = 1, c = 1, h = 1, w = 1;
  bool nhwc = false;
  /// Number of elements.
  STAGECRAFT_HD int64_t numel() const { return n * c * h * w; }
};

/// Logical coordinates of an element.
struct Coords {
  int64_t n = 0, c = 0, h = 0, w = 0;
};

STAGECRAFT_HD int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
STAGECRAFT_HD int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/// Memory offset of (n, c, h, w) in a tensor of dims d.
STAGECRAFT_HD int64_t offset(const Dims4& d, int64_t n, int64_t c, int64_t h, int64_t w) {
  return d.nhwc ? ((n * d.h + h) * d.w + w) * d.c + c : ((n * d.c + c) * d.h + h) * d.w + w;
}

/// The coordinate along a dimension of `extent` of what is left of a memory offset (innermost
/// dimension first): i % extent, and i becomes i / extent, for the next dimension out.
STAGECRAFT_HD int64_t next_coordinate(int64_t& i, int64_t extent) {
  const int64_t r = i % extent;
  i /= extent;
  return r;
}

/// The coordinates of the element at memory offset i of d (the inverse of offset()).
STAGECRAFT_HD Coords coords_at(const Dims4& d, int64_t i) {
  Coords r;
  if (d.nhwc) {
    r.c = next_coordinate(i, d.c);
    r.w = next_coordinate(i, d.w);
    r.h = next_coordinate(i, d.h);
  } else {
    r.w = next_coordinate(i, d.w);
    r.h = next_coordinate(i, d.h);
    r.c = next_coordinate(i, d.c);
  }
  r.n = i;
  return r;
}

/// The channel of the element at memory offset i of d.
STAGECRAFT_HD int64_t channel_at(const Dims4& d, int64_t i) {
  return d.nhwc ? i % d.c : (i / (d.h * d.w)) % d.c;
}

// ---- Loads and stores: arithmetic is in float whatever the storage type ----------------------

STAGECRAFT_HD float load(const float* p, int64_t i) { return p[i]; }
STAGECRAFT_HD float load(const uint8_t* p, int64_t i) { return static_cast<float>(p[i]); }
STAGECRAFT_HD float load(const int8_t* p, int64_t i) { return static_cast<float>(p[i]); }
STAGECRAFT_HD void store(float* p, int64_t i, float v) { p[i] = v; }
// 8-bit stores round to nearest even (rintf in the default rounding mode, as the host's
// std::nearbyint and oneDNN) and saturate.
STAGECRAFT_HD void store(uint8_t* p, int64_t i, float v) {
  p[i] = static_cast<uint8_t>(fminf(fmaxf(rintf(v), 0.f), 255.f));
}
STAGECRAFT_HD void store(int8_t* p, int64_t i, float v) {
  p[i] = static_cast<int8_t>(fminf(fmaxf(rintf(v), -128.f), 127.f));
}
#ifdef __CUDACC__
STAGECRAFT_HD float load(const __half* p, int64_t i) { return __half2float(p[i]); }
STAGECRAFT_HD void store(__half* p, int64_t i, float v) { p[i] = __float2half(v); }
#endif

/// Element i of a tensor of element type `e` at p.
STAGECRAFT_HD float load_any(const void* p, Elem e, int64_t i) {
  switch (e) {
#ifdef __CUDACC__
    case Elem::kF16:
      return load(static_cast<const __half*>(p), i);
#endif
    case Elem::kU8:
      return load(static_cast<const uint8_t*>(p), i);
    case Elem::kI8:
      return load(static_cast<const int8_t*>(p), i);
    default:
      return load(static_cast<const float*>(p), i);
  }
}

/// PyTorch's hard sigmoid, relu6(v + 3) / 6 (the fused activation; graph/op.h).
STAGECRAFT_HD float hard_sigmoid(float v) { return fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f; }

/// The fused activation; ReLU6 clips at `relu6_max` (executor/kernel_math.h's relu6_bound: 6 in
/// real units, 6 / scale for an 8-bit destination). The sigmoid family acts on real values (the
/// int8 contract gives such epilogues an f32 destination).
STAGECRAFT_HD float activate(float v, Act act, float relu6_max) {
  switch (act) {
    case Act::kRelu:
      return v > 0.f ? v : 0.f;
    case Act::kRelu6:
      return fminf(fmaxf(v, 0.f), relu6_max);
    case Act::kSigmoid:
      return 1.f / (1.f + expf(-v));
    case Act::kHardSigmoid:
      return hard_sigmoid(v);
    case Act::kHardSwish:
      return v * hard_sigmoid(v);
    case Act::kSilu:
      return v / (1.f + expf(-v));
    case Act::kGelu:
      return 0.5f * v * (1.f + erff(v * 0.70710678f));
    case Act::kGeluTanh:
      return 0.5f * v * (1.f + tanhf(0.79788456f * (v + 0.044715f * v * v * v)));
    case Act::kTanh:
      return tanhf(v);
    case Act::kSqrt:
      return sqrtf(v);
    default:
      return v;
  }
}

/// A standalone activation op: the activation and its parameters.
struct ActParams {
  Act act = Act::kNone;
  float relu6_max = 6.f;  ///< ReLU6's bound in the destination's units
  float alpha = 0.f;      ///< leaky ReLU: the slope below 0; hard sigmoid: the slope; clip: min
  float beta = 0.f;       ///< hard sigmoid: the offset; clip: max
};

/// The activation of a standalone op: leaky ReLU (v >= 0 ? v : alpha · v), hard sigmoid with the
/// op's slope and offset (clamp(alpha · v + beta, 0, 1), ONNX's HardSigmoid), the others as fused.
STAGECRAFT_HD float activate(float v, const ActParams& a) {
  switch (a.act) {
    case Act::kLeakyRelu:
      return v >= 0.f ? v : a.alpha * v;
    case Act::kHardSigmoid:
      return fminf(fmaxf(a.alpha * v + a.beta, 0.f), 1.f);
    case Act::kClip:
      return fminf(fmaxf(v, a.alpha), a.beta);
    default:
      return activate(v, a.act, a.relu6_max);
  }
}

/// a OP b.
STAGECRAFT_HD float binary_value(float a, float b, BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return a + b;
    case BinOp::kSub:
      return a - b;
    case BinOp::kMul:
      return a * b;
    default:
      return a / b;
  }
}

// ---- Element-wise (flat index: thread i reads and writes offset i) --------------------------

/// y[i] = act(x[i]) (a standalone activation op).
template <class T>
STAGECRAFT_HD void act_at(const T* x, T* y, int64_t i, const ActParams& a) {
  store(y, i, activate(load(x, i), a));
}

/// y[i] = factor · x[i].
template <class T>
STAGECRAFT_HD void scale_at(const T* x, T* y, int64_t i, float factor) {
  store(y, i, load(x, i) * factor);
}

/// act(v + bias[channel of offset i]) (bias may be null).
STAGECRAFT_HD float bias_act_value(float v, const float* bias, const Dims4& d, int64_t i, Act act,
                                   float relu6_max) {
  if (bias) v += bias[channel_at(d, i)];
  return activate(v, act, relu6_max);
}

/// y[i] = act(y[i] + bias[channel]) (bias may be null).
template <class T>
STAGECRAFT_HD void bias_act_at(T* y, const float* bias, const Dims4& d, int64_t i, Act act,
                               float relu6_max) {
  store(y, i, bias_act_value(load(y, i), bias, d, i, act, relu6_max));
}

/// v · scale[channel of offset i] + shift[channel] (inference batch norm).
STAGECRAFT_HD float scale_shift_value(float v, const float* scale, const float* shift, const Dims4& d,
                                      int64_t i) {
  const int64_t c = channel_at(d, i);
  return v * scale[c] + shift[c];
}

/// y[i] = x[i] · scale[channel] + shift[channel].
template <class T>
STAGECRAFT_HD void scale_shift_at(const T* x, T* y, const float* scale, const float* shift,
                                  const Dims4& d, int64_t i) {
  store(y, i, scale_shift_value(load(x, i), scale, shift, d, i));
}

/// y[i] = act(sum of srcs[k][i]) for k < count; `Srcs` indexes like an array of T pointers.
template <class T, class Srcs>
STAGECRAFT_HD void add_at(const Srcs& srcs, int count, T* y, int64_t i, Act act, float relu6_max) {
  float v = 0.f;
  for (int k = 0; k < count; ++k) v += load(srcs[k], i);
  store(y, i, activate(v, act, relu6_max));
}

/// Inputs of a quantised addition: pointers, element types and factors (src scale / dst scale).
template <int kMax>
struct ScaledInputs {
  const void* p[kMax];
  Elem elem[kMax];
  float factor[kMax];
};

/// y[i] = act(sum of factor[k] · srcs[k][i]), inputs of any element types, in y's units.
template <class T, int kMax>
STAGECRAFT_HD void add_scaled_at(const ScaledInputs<kMax>& in, int count, T* y, int64_t i, Act act,
                                 float relu6_max) {
  float v = 0.f;
  for (int k = 0; k < count; ++k) v += in.factor[k] * load_any(in.p[k], in.elem[k], i);
  store(y, i, activate(v, act, relu6_max));
}

// ---- Binary ops with NumPy broadcasting (thread i writes destination offset i) ----------------

/// The offset in `d` (its own layout) of the element that broadcasts to the destination
/// coordinates p: a dimension of size 1 repeats (NumPy; operands have the destination's rank, a
/// rank-2 tensor has H = W = 1).
STAGECRAFT_HD int64_t broadcast_offset(const Dims4& d, const Coords& p) {
  return offset(d, d.n == 1 ? 0 : p.n, d.c == 1 ? 0 : p.c, d.h == 1 ? 0 : p.h, d.w == 1 ? 0 : p.w);
}

/// What a binary kernel computes besides its operands: y = act(x OP o), or act(o OP x) when
/// `swap` (a constant first operand, or a broadcast first input read as the second).
struct BinaryParams {
  BinOp op = BinOp::kMul;
  bool swap = false;
  Act act = Act::kNone;
  float relu6_max = 6.f;
};

/// act(x OP o) (or act(o OP x)) for destination offset i, where x's value at i is given and o
/// (dims od, broadcast) is read.
template <class TO>
STAGECRAFT_HD float binary_with(float x, const TO* o, const Dims4& od, const Dims4& yd,
                                const BinaryParams& p, int64_t i) {
  const float b = load(o, broadcast_offset(od, coords_at(yd, i)));
  return activate(p.swap ? binary_value(b, x, p.op) : binary_value(x, b, p.op), p.act, p.relu6_max);
}

/// Element i of y = act(x OP o) with both operands broadcast to y's shape, each read in its own
/// layout (a constant operand is f32 in plain NCHW order whatever the tensors' type).
template <class TX, class TO, class TY>
STAGECRAFT_HD void binary_at(const TX* x, const Dims4& xd, const TO* o, const Dims4& od, TY* y,
                             const Dims4& yd, const BinaryParams& p, int64_t i) {
  store(y, i, binary_with(load(x, broadcast_offset(xd, coords_at(yd, i))), o, od, yd, p, i));
}

/// Whether two geometries name the same memory order element for element (x can then be read at
/// y's offsets: the packed binary kernel).
STAGECRAFT_HD bool same_dims(const Dims4& a, const Dims4& b) {
  return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w && a.nhwc == b.nhwc;
}

// ---- Pooling (thread i writes output offset i) ------------------------------------------------

/// A pooling window: kernel, stride, paddings (bottom/right ones may exceed top/left in ceil
/// mode) and mode.
struct PoolParams {
  int kh = 1, kw = 1, sh = 1, sw = 1, pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  PoolMode mode = PoolMode::kMax;
};

/// Output element i of a 2-D pooling with PyTorch's semantics: the window is clipped to the
/// padded input for the include-pad divisor and to the input for the values.
template <class T>
STAGECRAFT_HD void pool_at(const T* x, const Dims4& in, T* y, const Dims4& out, const PoolParams& p,
                           int64_t i) {
  const Coords o = coords_at(out, i);
  const int64_t hs = o.h * p.sh - p.pad_top, ws = o.w * p.sw - p.pad_left;
  const int64_t he = min64(hs + p.kh, in.h + p.pad_bottom), we = min64(ws + p.kw, in.w + p.pad_right);
  const int64_t h0 = max64(hs, 0), w0 = max64(ws, 0);
  const int64_t h1 = min64(he, in.h), w1 = min64(we, in.w);
  float acc = p.mode == PoolMode::kMax ? -FLT_MAX : 0.f;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t w = w0; w < w1; ++w) {
      const float v = load(x, offset(in, o.n, o.c, h, w));
      acc = p.mode == PoolMode::kMax ? fmaxf(acc, v) : acc + v;
    }
  if (p.mode == PoolMode::kAvgIncludePad) acc /= static_cast<float>((he - hs) * (we - ws));
  if (p.mode == PoolMode::kAvgExcludePad) acc /= static_cast<float>(max64((h1 - h0) * (w1 - w0), 1));
  store(y, i, acc);
}

/// The global poolings as reductions of an H×W plane: the value before the first element, how
/// an element is folded in, and the output from the folded value and the plane's size.
struct MeanReduction {
  static constexpr float kStart = 0.f;
  STAGECRAFT_HD static float fold(float acc, float v) { return acc + v; }
  STAGECRAFT_HD static float result(float acc, int64_t count) {
    return acc / static_cast<float>(count);
  }
};
struct MaxReduction {
  static constexpr float kStart = -FLT_MAX;
  STAGECRAFT_HD static float fold(float acc, float v) { return fmaxf(acc, v); }
  STAGECRAFT_HD static float result(float acc, int64_t) { return acc; }
};

/// Global pooling by reduction R into N×C×1×1 (the same memory order in NCHW and NHWC: offset
/// n·C + c): output i = (n, c). In NHWC neighbouring threads (channels) read neighbouring
/// addresses; NCHW inputs use plane_partial with one warp per plane instead.
template <class R, class T>
STAGECRAFT_HD void global_pool_at(const T* x, const Dims4& in, T* y, int64_t i) {
  const int64_t c = i % in.c, n = i / in.c;
  float acc = R::kStart;
  for (int64_t h = 0; h < in.h; ++h)
    for (int64_t w = 0; w < in.w; ++w) acc = R::fold(acc, load(x, offset(in, n, c, h, w)));
  store(y, i, R::result(acc, in.h * in.w));
}

template <class T>
STAGECRAFT_HD void global_avg_at(const T* x, const Dims4& in, T* y, int64_t i) {
  global_pool_at<MeanReduction>(x, in, y, i);
}

template <class T>
STAGECRAFT_HD void global_max_at(const T* x, const Dims4& in, T* y, int64_t i) {
  global_pool_at<MaxReduction>(x, in, y, i);
}

/// The part of the reduction R over the H×W plane `nc` (= n·C + c) of an NCHW tensor that lane
/// `lane` of `lanes` folds (R::kStart for a lane without elements): lanes read neighbouring
/// addresses.
template <class R, class T>
STAGECRAFT_HD float plane_partial(const T* x, const Dims4& in, int64_t nc, int lane, int lanes) {
  const int64_t hw = in.h * in.w;
  float acc = R::kStart;
  for (int64_t j = lane; j < hw; j += lanes) acc = R::fold(acc, load(x, nc * hw + j));
  return acc;
}

template <class T>
STAGECRAFT_HD float plane_partial_sum(const T* x, const Dims4& in, int64_t nc, int lane, int lanes) {
  return plane_partial<MeanReduction>(x, in, nc, lane, lanes);
}

template <class T>
STAGECRAFT_HD float plane_partial_max(const T* x, const Dims4& in, int64_t nc, int lane, int lanes) {
  return plane_partial<MaxReduction>(x, in, nc, lane, lanes);
}

// ---- Normalisations over one axis (one thread per normalised row) ----------------------------

/// Row i of a layer normalisation over the channels of each pixel (a row-major tensor: over its
/// last axis, as N = rows, C = the last axis): mean, then the centred squares (two passes: no
/// cancellation), then (x - mean) / sqrt(var + eps) · gamma[c] + beta[c]. i = n · H · W + pixel.
template <class T>
STAGECRAFT_HD void layer_norm_at(const T* x, T* y, const float* gamma, const float* beta, float eps,
                                 const Dims4& d, int64_t i) {
  const int64_t n = i / (d.h * d.w), p = i % (d.h * d.w), h = p / d.w, w = p % d.w;
  float mean = 0.f, var = 0.f;
  for (int64_t c = 0; c < d.c; ++c) mean += load(x, offset(d, n, c, h, w));
  mean /= static_cast<float>(d.c);
  for (int64_t c = 0; c < d.c; ++c) {
    const float v = load(x, offset(d, n, c, h, w)) - mean;
    var += v * v;
  }
  const float inv = 1.f / sqrtf(var / static_cast<float>(d.c) + eps);
  for (int64_t c = 0; c < d.c; ++c) {
    const int64_t at = offset(d, n, c, h, w);
    store(y, at, (load(x, at) - mean) * inv * gamma[c] + beta[c]);
  }
}

/// A softmax axis seen as [outer, extent, inner] in memory: each of the outer · inner rows is
/// normalised over its `extent` elements, `inner` apart (a row-major tensor's axis; the channels
/// of NCHW, inner = H · W, or of NHWC and N x C, inner = 1).
struct SoftmaxGeometry {
  int64_t outer = 1, extent = 1, inner = 1;
  /// Rows normalised (one thread each in the strided kernel).
  STAGECRAFT_HD int64_t rows() const { return outer * inner; }
};

/// Row r = (o, j) (j fastest: neighbouring threads read neighbouring addresses when inner > 1) of
/// a numerically stable softmax: the maximum subtracted before the exponentials.
template <class T>
STAGECRAFT_HD void softmax_row_at(const T* x, T* y, const SoftmaxGeometry& g, int64_t r) {
  const int64_t base = (r / g.inner) * g.extent * g.inner + r % g.inner;
  float m = -FLT_MAX;
  for (int64_t k = 0; k < g.extent; ++k) m = fmaxf(m, load(x, base + k * g.inner));
  float sum = 0.f;
  for (int64_t k = 0; k < g.extent; ++k) sum += expf(load(x, base + k * g.inner) - m);
  for (int64_t k = 0; k < g.extent; ++k) {
    const int64_t at = base + k * g.inner;
    store(y, at, expf(load(x, at) - m) / sum);
  }
}

}  // namespace stagecraft::executor::cuda
