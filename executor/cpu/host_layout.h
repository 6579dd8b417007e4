#pragma once
// Internal to the CPU backend: where an element of a 4-D tensor sits in each CPU layout, for our
// own host kernels (channel gather, resize). Every layout places element (n, c, p), p = h * W + w,
// at  n * batch_stride + channel_offset(c) + p * pixel_stride.

#include <cstdint>

#include "graph/types.h"

namespace stagecraft::executor::cpu {

struct HostLayout {
  int64_t images = 0, channels = 0, padded_channels = 0, height = 0, width = 0, pixels = 0;
  int64_t batch_stride = 0, pixel_stride = 0;
  int64_t block = 0;  ///< channel block of a blocked layout, 0 otherwise
  graph::Layout layout = graph::Layout::kNCHW;

  int64_t channel_offset(int64_t c) const {
    switch (layout) {
      case graph::Layout::kNCHW:
        return c * pixels;
      case graph::Layout::kNHWC:
        return c;
      default:
        return c / block * pixels * block + c % block;
    }
  }
  /// Channels that sit together at one pixel (a group), and the distance between two groups.
  int64_t group() const {
    return layout == graph::Layout::kNCHW ? 1 : layout == graph::Layout::kNHWC ? channels : block;
  }
  int64_t group_stride() const { return layout == graph::Layout::kNCHW ? pixels : pixels * group(); }
};

/// Calls fn(n, c, plane) for every image n and real channel c of `dst` (plane: the channel's
/// first element in `out`; its pixels pixel_stride apart), spread over the OpenMP threads; the
/// padding lanes of a blocked layout are zeroed instead.
template <class F>
void for_each_plane(const HostLayout& dst, float* out, F&& fn) {
  const int64_t planes = dst.images * dst.padded_channels;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < planes; ++t) {
    const int64_t n = t / dst.padded_channels, c = t % dst.padded_channels;
    float* o = out + n * dst.batch_stride + dst.channel_offset(c);
    if (c >= dst.channels) {
      for (int64_t p = 0; p < dst.pixels; ++p) o[p * dst.pixel_stride] = 0.0f;
      continue;
    }
    fn(n, c, o);
  }
}

/// Whether our host kernels know the layout (nchw, nhwc, nChw8c, nChw16c).
inline bool host_layout_known(graph::Layout l) {
  return l == graph::Layout::kNCHW || l == graph::Layout::kNHWC || l == graph::Layout::kNChw8c ||
         l == graph::Layout::kNChw16c;
}

/// Whether our host kernels know the layout of `d`: host_layout_known, or a rank-4 row-major
/// tensor (the bytes of nchw).
inline bool host_layout_known(const graph::TensorDesc& d) {
  return host_layout_known(d.layout) || (d.layout == graph::Layout::kRowMajor && d.shape.rank() == 4);
}

/// The geometry of a rank-4 tensor in a known layout (row-major: nchw).
inline HostLayout host_layout(const graph::TensorDesc& d) {
  HostLayout g;
  g.layout = d.layout == graph::Layout::kRowMajor ? graph::Layout::kNCHW : d.layout;
  g.images = d.shape[0];
  g.channels = d.shape[1];
  g.height = d.shape[2];
  g.width = d.shape[3];
  g.pixels = g.height * g.width;
  g.block = graph::channel_block(d.layout);
  g.padded_channels = g.block > 0 ? (g.channels + g.block - 1) / g.block * g.block : g.channels;
  g.batch_stride = g.padded_channels * g.pixels;
  g.pixel_stride = g.layout == graph::Layout::kNCHW ? 1 : g.layout == graph::Layout::kNHWC ? g.channels : g.block;
  return g;
}

}  // namespace stagecraft::executor::cpu
