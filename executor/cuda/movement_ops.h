#pragma once
// What each thread of the CUDA backend's data-movement kernels computes (copies of channel
// windows, pad, channel shuffle, resize, reshape, type conversion, requantisation, byte-row
// copies): the same contract as element_ops.h (thread i writes destination offset i), shared by
// kernels.cu and the host tests (tests/cuda/test_element_ops.cpp). Internal to executor/cuda/.

#include "executor/cuda/element_ops.h"

namespace stagecraft::executor::cuda {

// ---- Data movement (thread i writes destination offset i) -----------------------------------

/// Element i of copying channels [src_c0, src_c0 + channels) of src to [dst_c0, ...) of dst
/// (N, H, W shared; layouts may differ): i indexes the window in the destination's layout.
template <class T>
STAGECRAFT_HD void copy_channels_at(const T* src, const Dims4& sd, int64_t src_c0, T* dst,
                                    const Dims4& dd, int64_t dst_c0, int64_t channels, int64_t i) {
  Dims4 window = dd;
  window.c = channels;
  const Coords p = coords_at(window, i);
  store(dst, offset(dd, p.n, dst_c0 + p.c, p.h, p.w), load(src, offset(sd, p.n, src_c0 + p.c, p.h, p.w)));
}

/// Element i of constant padding (negative amounts crop); `value` is in dst's units.
template <class T>
STAGECRAFT_HD void pad_at(const T* x, const Dims4& in, T* y, const Dims4& out, int64_t top,
                          int64_t left, float value, int64_t i) {
  const Coords o = coords_at(out, i);
  const int64_t h = o.h - top, w = o.w - left;
  const bool inside = h >= 0 && h < in.h && w >= 0 && w < in.w;
  store(y, i, inside ? load(x, offset(in, o.n, o.c, h, w)) : value);
}

/// Element i of reflect padding (pads >= 0 and smaller than the side they extend).
template <class T>
STAGECRAFT_HD void reflect_pad_at(const T* x, const Dims4& in, T* y, const Dims4& out, int64_t top,
                                  int64_t left, int64_t i) {
  const Coords o = coords_at(out, i);
  int64_t h = o.h - top, w = o.w - left;
  h = h < 0 ? -h : h >= in.h ? 2 * (in.h - 1) - h : h;
  w = w < 0 ? -w : w >= in.w ? 2 * (in.w - 1) - w : w;
  store(y, i, load(x, offset(in, o.n, o.c, h, w)));
}

/// Element i of space to depth: output channel (bh · block + bw) · C + c at (h, w) is input
/// channel c at (h · block + bh, w · block + bw).
template <class T>
STAGECRAFT_HD void space_to_depth_at(const T* x, const Dims4& in, T* y, const Dims4& out, int64_t block,
                                     int64_t i) {
  const Coords o = coords_at(out, i);
  const int64_t patch = o.c / in.c, c = o.c % in.c;
  store(y, i, load(x, offset(in, o.n, c, o.h * block + patch / block, o.w * block + patch % block)));
}

/// Element i of a reduction over the dimensions that are 1 in `out` (and not in `in`).
template <class T>
STAGECRAFT_HD void reduce_at(const T* x, const Dims4& in, T* y, const Dims4& out, ReduceMode mode, int64_t i) {
  const Coords o = coords_at(out, i);
  const int64_t cs = out.c == in.c ? 1 : in.c, hs = out.h == in.h ? 1 : in.h, ws = out.w == in.w ? 1 : in.w;
  float acc = mode == ReduceMode::kMax ? -3.4e38f : 0.f;
  for (int64_t c = 0; c < cs; ++c)
    for (int64_t h = 0; h < hs; ++h)
      for (int64_t w = 0; w < ws; ++w) {
        const float v = load(x, offset(in, o.n, cs == 1 ? o.c : c, hs == 1 ? o.h : h, ws == 1 ? o.w : w));
        acc = mode == ReduceMode::kMax ? (v > acc ? v : acc) : acc + v;
      }
  if (mode == ReduceMode::kMean) acc /= static_cast<float>(cs * hs * ws);
  store(y, i, acc);
}

/// The input channel that channel shuffle (ShuffleNet, `groups` groups of C / groups channels)
/// moves to output channel oc: output channel k · groups + g is input channel g · (C / groups) + k.
STAGECRAFT_HD int64_t shuffled_channel(int64_t oc, int64_t channels, int64_t groups) {
  return (oc % groups) * (channels / groups) + oc / groups;
}

/// Element i of a channel shuffle from src to dst (same shape, each in its own layout).
template <class T>
STAGECRAFT_HD void channel_shuffle_at(const T* src, const Dims4& sd, T* dst, const Dims4& dd,
                                      int64_t groups, int64_t i) {
  const Coords p = coords_at(dd, i);
  store(dst, i, load(src, offset(sd, p.n, shuffled_channel(p.c, dd.c, groups), p.h, p.w)));
}

/// One axis of a resize: destination index y reads source indices `first` and `second`, the
/// second with `weight` (graph::ResizeAttrs: nearest floor(y / scale); linear at half-pixel
/// centres (y + 0.5) / scale - 0.5, clamped to the source).
struct ResizeTap {
  int64_t first = 0, second = 0;
  float weight = 0;
};

STAGECRAFT_HD ResizeTap resize_tap(int64_t y, int64_t in, double scale, bool linear) {
  ResizeTap t;
  if (!linear) {
    t.first = t.second = min64(in - 1, static_cast<int64_t>(static_cast<double>(y) / scale));  // y, scale > 0
    return t;
  }
  double src = (static_cast<double>(y) + 0.5) / scale - 0.5;
  if (src < 0) src = 0;
  t.first = min64(in - 1, static_cast<int64_t>(src));  // src >= 0: truncation is floor
  t.second = min64(in - 1, t.first + 1);
  t.weight = t.first == in - 1 ? 0.0f : static_cast<float>(src - static_cast<double>(t.first));
  return t;
}

/// Element i of a bilinear or nearest resize from src to dst (each in its own layout).
template <class T>
STAGECRAFT_HD void resize_at(const T* src, const Dims4& sd, T* dst, const Dims4& dd, double scale_h,
                             double scale_w, bool linear, int64_t i) {
  const Coords p = coords_at(dd, i);
  const ResizeTap ty = resize_tap(p.h, sd.h, scale_h, linear), tx = resize_tap(p.w, sd.w, scale_w, linear);
  const float a = load(src, offset(sd, p.n, p.c, ty.first, tx.first));
  const float b = load(src, offset(sd, p.n, p.c, ty.first, tx.second));
  const float c = load(src, offset(sd, p.n, p.c, ty.second, tx.first));
  const float d = load(src, offset(sd, p.n, p.c, ty.second, tx.second));
  const float top = a + tx.weight * (b - a), bottom = c + tx.weight * (d - c);
  store(dst, i, top + ty.weight * (bottom - top));
}

/// Whether a tensor's memory order is its plain (NCHW, or N×C) order: NCHW, or NHWC where a
/// pixel or a channel is all there is.
STAGECRAFT_HD bool plain_order(const Dims4& d) { return !d.nhwc || d.c == 1 || d.h * d.w == 1; }

/// Element i of a reshape that keeps the batch: the elements in plain order do not move, so
/// destination offset i is plain index p of dst's shape, read at plain index p of src's shape
/// (rank 2 or 4 either side, each in its own layout).
template <class T>
STAGECRAFT_HD void reshape_at(const T* src, const Dims4& sd, T* dst, const Dims4& dd, int64_t i) {
  const Coords p = coords_at(dd, i);
  Dims4 plain_src = sd;
  plain_src.nhwc = false;
  const Coords q = coords_at(plain_src, ((p.n * dd.c + p.c) * dd.h + p.h) * dd.w + p.w);
  store(dst, i, load(src, offset(sd, q.n, q.c, q.h, q.w)));
}

/// Element i of dst = factor · src between element types and layouts of the same N, H, W; dst
/// may have more channels than src (an int8 convolution's padded input): those are zero.
template <class TS, class TD>
STAGECRAFT_HD void convert_at(const TS* src, const Dims4& sd, TD* dst, const Dims4& dd, float factor,
                              int64_t i) {
  const Coords p = coords_at(dd, i);
  store(dst, i, p.c < sd.c ? load(src, offset(sd, p.n, p.c, p.h, p.w)) * factor : 0.f);
}

/// Element i of the epilogue of an int8 convolution: y = act((acc + bias[k]) · scale[k]) where acc
/// is NHWC f32 with acc_dims.c >= y's channels (padded); bias may be null.
template <class T>
STAGECRAFT_HD void requantize_at(const float* acc, const Dims4& acc_dims, const float* bias,
                                 const float* scale, Act act, float relu6_max, T* y,
                                 const Dims4& y_dims, int64_t i) {
  const Coords p = coords_at(y_dims, i);
  float v = acc[offset(acc_dims, p.n, p.c, p.h, p.w)];
  if (bias) v += bias[p.c];
  store(y, i, activate(v * scale[p.c], act, relu6_max));
}

// ---- Same-layout channel copies as strided rows of bytes, vectorised ------------------------

/// A same-layout channel-window copy seen as `rows` rows of `row_units` units each (NHWC: one row
/// per pixel; NCHW: one row per image), in the widest unit (16, 8, 4, 2 or 1 bytes) that divides
/// every size, stride, offset and both addresses. unit == 0: not such a copy (layouts differ).
struct RowsCopy {
  int unit = 0;                              ///< bytes per unit
  int64_t rows = 0, row_units = 0;           ///< rows, units per row
  int64_t src_stride = 0, dst_stride = 0;    ///< units from one row start to the next
  int64_t src_offset = 0, dst_offset = 0;    ///< units before the first row
  /// Units copied in all (one thread each).
  int64_t units() const { return rows * row_units; }
};

/// The strided-rows form of copying `channels` channels from src (from channel src_c0) to dst
/// (from dst_c0) with `bytes` per element, at addresses src_addr and dst_addr.
inline RowsCopy plan_rows_copy(int bytes, const Dims4& sd, int64_t src_c0, uintptr_t src_addr,
                               const Dims4& dd, int64_t dst_c0, uintptr_t dst_addr,
                               int64_t channels) {
  RowsCopy r;
  if (sd.nhwc != dd.nhwc) return r;
  const int64_t plane = sd.nhwc ? 1 : sd.h * sd.w;  // elements per channel inside a row
  const int64_t rows = sd.nhwc ? sd.n * sd.h * sd.w : sd.n;
  const int64_t row_bytes = channels * plane * bytes;
  const int64_t src_stride = sd.c * plane * bytes, dst_stride = dd.c * plane * bytes;
  const int64_t src_offset = src_c0 * plane * bytes, dst_offset = dst_c0 * plane * bytes;
  for (int unit : {16, 8, 4, 2, 1}) {
    const auto fits = [unit](int64_t v) { return v % unit == 0; };
    if (fits(row_bytes) && fits(src_stride) && fits(dst_stride) && fits(src_offset) &&
        fits(dst_offset) && src_addr % static_cast<uintptr_t>(unit) == 0 &&
        dst_addr % static_cast<uintptr_t>(unit) == 0) {
      r.unit = unit;
      r.rows = rows;
      r.row_units = row_bytes / unit;
      r.src_stride = src_stride / unit;
      r.dst_stride = dst_stride / unit;
      r.src_offset = src_offset / unit;
      r.dst_offset = dst_offset / unit;
      return r;
    }
  }
  return r;
}

/// A channel shuffle of an NCHW tensor seen as whole channel planes (rows of H·W elements) moved
/// in the widest unit (16, 8, 4, 2 or 1 bytes) that divides a plane and both addresses.
struct ShufflePlanes {
  int unit = 0;              ///< bytes per unit
  int64_t planes = 0;        ///< N · C destination planes
  int64_t channels = 0;      ///< C
  int64_t groups = 1;        ///< shuffle groups
  int64_t plane_units = 0;   ///< units per plane
  /// Units copied in all (one thread each).
  STAGECRAFT_HD int64_t units() const { return planes * plane_units; }
};

/// The plane form of shuffling an NCHW tensor of dims d (`bytes` per element) between src_addr and
/// dst_addr. unit == 0: not NCHW in both (the element kernel runs).
inline ShufflePlanes plan_shuffle_planes(int bytes, const Dims4& sd, uintptr_t src_addr,
                                         const Dims4& dd, uintptr_t dst_addr, int64_t groups) {
  ShufflePlanes r;
  if (sd.nhwc || dd.nhwc) return r;
  const int64_t plane_bytes = sd.h * sd.w * bytes;
  for (int unit : {16, 8, 4, 2, 1}) {
    if (plane_bytes % unit == 0 && src_addr % static_cast<uintptr_t>(unit) == 0 &&
        dst_addr % static_cast<uintptr_t>(unit) == 0) {
      r.unit = unit;
      r.planes = dd.n * dd.c;
      r.channels = dd.c;
      r.groups = groups;
      r.plane_units = plane_bytes / unit;
      return r;
    }
  }
  return r;
}

/// Unit i of a plane-wise channel shuffle: neighbouring threads copy neighbouring units of a plane.
template <class U>
STAGECRAFT_HD void shuffle_planes_at(const U* src, U* dst, const ShufflePlanes& r, int64_t i) {
  const int64_t plane = i / r.plane_units, k = i % r.plane_units;
  const int64_t n = plane / r.channels, oc = plane % r.channels;
  dst[i] = src[(n * r.channels + shuffled_channel(oc, r.channels, r.groups)) * r.plane_units + k];
}

/// Units of 16, 8, 4, 2 and 1 bytes for RowsCopy (aligned: one vector load and store each).
struct alignas(16) Bytes16 {
  uint32_t v[4];
};
struct alignas(8) Bytes8 {
  uint32_t v[2];
};

/// Unit i of a strided-rows copy: neighbouring threads copy neighbouring units.
template <class U>
STAGECRAFT_HD void rows_copy_at(const U* src, U* dst, const RowsCopy& r, int64_t i) {
  const int64_t row = i / r.row_units, k = i % r.row_units;
  dst[r.dst_offset + row * r.dst_stride + k] = src[r.src_offset + row * r.src_stride + k];
}

// ---- Row-major tensors of any rank (transformers; thread i writes destination offset i) -------

/// The most dimensions of a row-major tensor that the own kernels index.
inline constexpr int kMaxRank = 8;

/// A strided view of a source read in the destination's row-major order: destination element i
/// has coordinates (i_0, ..., i_{rank-1}) over `dims` and reads src[base + sum of i_k · strides[k]]
/// (a transpose: the source's strides permuted; a narrow: the source's strides from an offset).
struct StridedView {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t base = 0;
  /// Number of destination elements.
  STAGECRAFT_HD int64_t numel() const {
    int64_t n = 1;
    for (int k = 0; k < rank; ++k) n *= dims[k];
    return n;
  }
};

/// The source offset that destination element i reads.
STAGECRAFT_HD int64_t strided_offset(const StridedView& v, int64_t i) {
  int64_t at = v.base;
  for (int k = v.rank - 1; k >= 0; --k) {
    at += (i % v.dims[k]) * v.strides[k];
    i /= v.dims[k];
  }
  return at;
}

/// Element i of a transpose or a narrow: dst[i] = src[strided_offset(v, i)].
template <class T>
STAGECRAFT_HD void gather_at(const T* src, const StridedView& v, T* dst, int64_t i) {
  store(dst, i, load(src, strided_offset(v, i)));
}

/// A concat_constant seen around its axis: the destination is [outer, in_extent + count, inner]
/// (outer: the dimensions before the axis, batch included; inner: those after it); the constant
/// is one sample's block, [per_sample, count, inner], repeated for every sample.
struct ConcatConstantParams {
  int64_t outer = 1, per_sample = 1, in_extent = 0, count = 0, inner = 1;
  bool before = true;  ///< the constant comes first along the axis
  /// Number of destination elements.
  STAGECRAFT_HD int64_t numel() const { return outer * (in_extent + count) * inner; }
};

/// Element i of a concat_constant: from the input or from the (f32) constant.
template <class T>
STAGECRAFT_HD void concat_constant_at(const T* src, const float* constant, T* dst,
                                      const ConcatConstantParams& p, int64_t i) {
  const int64_t extent = p.in_extent + p.count;
  const int64_t r = i % p.inner, a = (i / p.inner) % extent, o = i / (p.inner * extent);
  const int64_t a_in = p.before ? a - p.count : a;
  if (a_in >= 0 && a_in < p.in_extent) {
    store(dst, i, load(src, (o * p.in_extent + a_in) * p.inner + r));
  } else {
    const int64_t a_c = p.before ? a : a - p.in_extent;
    store(dst, i, constant[((o % p.per_sample) * p.count + a_c) * p.inner + r]);
  }
}

}  // namespace stagecraft::executor::cuda
