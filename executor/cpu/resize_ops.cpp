// Resize (nearest, bilinear and bicubic resampling of H and W) on the CPU: our own host kernel in every
// CPU layout (oneDNN's resampling maps nearest coordinates with half-pixel centres, not the floor
// rule PyTorch exports). Per destination row and column the source indices and weights are
// computed once when the kernel is built; images x channels are spread over the threads.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

using graph::OpKind;
using graph::ResizeAttrs;

// Source positions of one axis: per destination index, two source indices and the second's weight.
struct Axis {
  std::vector<int64_t> first, second;
  std::vector<float> weight;
};

Axis axis_of(int64_t in, int64_t out, double scale, bool linear, bool align_corners) {
  Axis a;
  for (int64_t y = 0; y < out; ++y) {
    if (!linear) {  // floor(y / scale)
      const auto s = std::min(in - 1, static_cast<int64_t>(std::floor(static_cast<double>(y) / scale)));
      a.first.push_back(s);
      a.second.push_back(s);
      a.weight.push_back(0);
      continue;
    }
    // align_corners: y · (in - 1) / (in · scale - 1), ONNX's rule (the resized length is in · scale,
    // the output size when the model gives sizes; 0 where that length is 1).
    const double resized = static_cast<double>(in) * scale;
    const double src = align_corners ? (out > 1 && std::abs(resized - 1.0) > 1e-9
                                            ? static_cast<double>(y) * static_cast<double>(in - 1) / (resized - 1.0)
                                            : 0.0)
                                     : std::max(0.0, (static_cast<double>(y) + 0.5) / scale - 0.5);  // half pixel
    const int64_t y0 = std::min(in - 1, static_cast<int64_t>(std::floor(src)));
    a.first.push_back(y0);
    a.second.push_back(std::min(in - 1, y0 + 1));
    a.weight.push_back(y0 == in - 1 ? 0.0f : static_cast<float>(src - static_cast<double>(y0)));
  }
  return a;
}

// Bicubic: per destination index the 4 source indices around the half-pixel coordinate (edges
// repeated) and Keys' weights (a = -0.75, PyTorch's bicubic).
struct CubicAxis {
  std::vector<int64_t> index;  // 4 per destination index
  std::vector<float> weight;   // 4 per destination index
};

CubicAxis cubic_axis_of(int64_t in, int64_t out, double scale) {
  constexpr double a = -0.75;
  const auto keys = [](double d) {
    d = std::fabs(d);
    return d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : d < 2 ? ((a * d - 5 * a) * d + 8 * a) * d - 4 * a : 0.0;
  };
  CubicAxis c;
  for (int64_t y = 0; y < out; ++y) {
    const double src = (static_cast<double>(y) + 0.5) / scale - 0.5;
    const auto y0 = static_cast<int64_t>(std::floor(src));
    for (int64_t i = y0 - 1; i <= y0 + 2; ++i) {
      c.index.push_back(std::clamp<int64_t>(i, 0, in - 1));
      c.weight.push_back(static_cast<float>(keys(src - static_cast<double>(i))));
    }
  }
  return c;
}

struct Resize {
  HostLayout src, dst;
  Axis rows, cols;
  CubicAxis cubic_rows, cubic_cols;  // bicubic (rows and cols unused then)
  bool cubic = false;
  bool linear = false;  // else nearest: copies (a weight of 0 would turn an infinity into NaN)
};

// Blocked layouts in and out (nChw8c / nChw16c, one block size): the lanes of a channel block side
// by side, the same taps for every lane (contiguous, vectorised), instead of one channel at a time
// through strided loads and stores. Bilinear keeps the two source rows interpolated along W for
// the next output rows (an upsample by 8 reads each pair 8 times; the same operations in the same
// order as one output at a time). The padding lanes of the last block are written 0.
template <int64_t B>
void run_resize_blocked(const Resize& r, const float* in, float* out) {
  const HostLayout &s = r.src, &d = r.dst;
  const int64_t blocks = d.padded_channels / B;
#pragma omp parallel
  {
    std::vector<float> h0(static_cast<size_t>(r.linear ? d.width * B : 0)), h1(h0.size());
    int64_t held_block = -1, held0 = -1, held1 = -1;  // the source rows in h0, h1 (of block held_block)
    const auto along_w = [&](const float* row, float* h) {
      for (int64_t x = 0; x < d.width; ++x) {
        const int64_t x0 = r.cols.first[static_cast<size_t>(x)] * B, x1 = r.cols.second[static_cast<size_t>(x)] * B;
        const float wx = r.cols.weight[static_cast<size_t>(x)];
        for (int64_t l = 0; l < B; ++l) h[x * B + l] = row[x0 + l] + wx * (row[x1 + l] - row[x0 + l]);
      }
    };
#pragma omp for collapse(2) schedule(static)
    for (int64_t nb = 0; nb < d.images * blocks; ++nb) {
      for (int64_t y = 0; y < d.height; ++y) {
        const int64_t n = nb / blocks, b = nb % blocks, lanes = std::min(B, d.channels - b * B);
        const float* ib = in + n * s.batch_stride + b * s.pixels * B;
        const int64_t s0 = r.rows.first[static_cast<size_t>(y)], s1 = r.rows.second[static_cast<size_t>(y)];
        float* orow = out + n * d.batch_stride + b * d.pixels * B + y * d.width * B;
        if (!r.linear) {
          const float* row0 = ib + s0 * s.width * B;
          for (int64_t x = 0; x < d.width; ++x) {
            const float* from = row0 + r.cols.first[static_cast<size_t>(x)] * B;
            for (int64_t l = 0; l < B; ++l) orow[x * B + l] = l < lanes ? from[l] : 0.0f;
          }
          continue;
        }
        if (nb != held_block) held_block = nb, held0 = held1 = -1;
        if (s0 != held0 && s0 == held1) std::swap(h0, h1), std::swap(held0, held1);
        if (s0 != held0) along_w(ib + s0 * s.width * B, h0.data()), held0 = s0;
        if (s1 != held1) along_w(ib + s1 * s.width * B, h1.data()), held1 = s1;
        const float wy = r.rows.weight[static_cast<size_t>(y)];
        for (int64_t x = 0; x < d.width; ++x) {
          for (int64_t l = 0; l < B; ++l) {
            const float top = h0[static_cast<size_t>(x * B + l)], bottom = h1[static_cast<size_t>(x * B + l)];
            orow[x * B + l] = l < lanes ? top + wy * (bottom - top) : 0.0f;
          }
        }
      }
    }
  }
}

void run_cubic(const Resize& r, const float* in, float* out) {
  const int64_t sps = r.src.pixel_stride, dps = r.dst.pixel_stride;
  for_each_plane(r.dst, out, [&](int64_t n, int64_t c, float* o) {
    const float* i = in + n * r.src.batch_stride + r.src.channel_offset(c);
    for (int64_t y = 0; y < r.dst.height; ++y) {
      const int64_t* ry = &r.cubic_rows.index[static_cast<size_t>(4 * y)];
      const float* wy = &r.cubic_rows.weight[static_cast<size_t>(4 * y)];
      float* orow = o + y * r.dst.width * dps;
      for (int64_t x = 0; x < r.dst.width; ++x) {
        const int64_t* rx = &r.cubic_cols.index[static_cast<size_t>(4 * x)];
        const float* wx = &r.cubic_cols.weight[static_cast<size_t>(4 * x)];
        float sum = 0;
        for (int t = 0; t < 4; ++t) {
          const float* row = i + ry[t] * r.src.width * sps;
          sum += wy[t] * (wx[0] * row[rx[0] * sps] + wx[1] * row[rx[1] * sps] + wx[2] * row[rx[2] * sps] +
                          wx[3] * row[rx[3] * sps]);
        }
        orow[x * dps] = sum;
      }
    }
  });
}

void run_resize(const Resize& r, const float* in, float* out) {
  if (r.src.block == r.dst.block && r.src.layout == r.dst.layout && r.dst.block == 16) return run_resize_blocked<16>(r, in, out);
  if (r.src.block == r.dst.block && r.src.layout == r.dst.layout && r.dst.block == 8) return run_resize_blocked<8>(r, in, out);
  const int64_t sps = r.src.pixel_stride, dps = r.dst.pixel_stride;
  for_each_plane(r.dst, out, [&](int64_t n, int64_t c, float* o) {
    const float* i = in + n * r.src.batch_stride + r.src.channel_offset(c);
    for (int64_t y = 0; y < r.dst.height; ++y) {
      const float* row0 = i + r.rows.first[static_cast<size_t>(y)] * r.src.width * sps;
      const float* row1 = i + r.rows.second[static_cast<size_t>(y)] * r.src.width * sps;
      const float wy = r.rows.weight[static_cast<size_t>(y)];
      float* orow = o + y * r.dst.width * dps;
      for (int64_t x = 0; x < r.dst.width; ++x) {
        const int64_t x0 = r.cols.first[static_cast<size_t>(x)] * sps, x1 = r.cols.second[static_cast<size_t>(x)] * sps;
        const float wx = r.cols.weight[static_cast<size_t>(x)];
        if (!r.linear) {
          orow[x * dps] = row0[x0];
          continue;
        }
        const float top = row0[x0] + wx * (row0[x1] - row0[x0]);
        const float bottom = row1[x0] + wx * (row1[x1] - row1[x0]);
        orow[x * dps] = top + wy * (bottom - top);
      }
    }
  });
}

// The implementation name of a resize.
const char* resize_name(const ResizeAttrs& a) {
  return a.cubic ? "resize bicubic" : a.linear ? "resize bilinear" : "resize nearest";
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  return host_kernel_desc(spec, resize_name(std::get<ResizeAttrs>(spec.attrs)));
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  const auto& a = std::get<ResizeAttrs>(spec.attrs);
  auto r = std::make_shared<Resize>();
  r->src = host_layout(spec.srcs[0]);
  r->dst = host_layout(spec.dsts[0]);
  r->cubic = a.cubic;
  r->linear = a.linear;
  if (a.cubic) {
    r->cubic_rows = cubic_axis_of(r->src.height, r->dst.height, a.scale_h);
    r->cubic_cols = cubic_axis_of(r->src.width, r->dst.width, a.scale_w);
  } else {
    r->rows = axis_of(r->src.height, r->dst.height, a.scale_h, a.linear, a.align_corners);
    r->cols = axis_of(r->src.width, r->dst.width, a.scale_w, a.linear, a.align_corners);
  }
  k.add_host([r](const std::vector<void*>& data) {
    const auto* in = static_cast<const float*>(data[0]);
    auto* out = static_cast<float*>(data[1]);
    if (r->cubic) run_cubic(*r, in, out);
    else run_resize(*r, in, out);
  }, {0, dst_slot(0)}, resize_name(a));
  return resize_name(a);
}

}  // namespace

const OpFamily kResizeFamily{"resize", {OpKind::kResize}, check, build};

}  // namespace stagecraft::executor::cpu
