// GridSample (ONNX, 2-D and 3-D) on our own host loop: f32 row-major tensors. Each output point
// reads its normalised coordinates from the grid, maps them to input coordinates (align_corners or
// not), applies the padding rule to coordinates outside the input (border: clamped; reflection:
// reflected by the input's edges), then interpolates: one tap per axis (nearest), two (linear) or
// four (cubic, Keys' kernel with a = -0.75); a tap outside the input reads 0 (zeros), the edge
// (border) or its reflection. The taps of the axes combine as a tensor product, which is what
// ONNX's axis-by-axis definition computes. Tiles of 64 output points are spread over the threads;
// the channels of a point share its taps, found once per tile. Sampling of at most 4 taps a point
// (nearest, linear 2-D) runs in float, vectorised over the tile's points (linear 2-D with zeros
// outside: ONNX Runtime's arithmetic, the same values); cubic and 3-D linear sum in double.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr const char* kGridSampleImpl = "grid_sample host";
constexpr int kMaxAxes = 3;
constexpr int kMaxTaps = 4;

struct HostGridSample {
  graph::GridSampleAttrs a;
  int64_t batch = 0, channels = 0;
  int axes = 2;                      // spatial axes
  std::array<int64_t, kMaxAxes> in{};  // input extent per spatial axis (outermost first)
  int64_t in_points = 1, out_points = 1;
};

// ONNX's reflection of x into [lo, hi] (repeatedly, by the nearer edge).
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (x < lo) {
    const double dx = lo - x;
    const auto n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const auto n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

// Keys' cubic weights of the four taps around a point at fraction t past the second.
void cubic_weights(double t, double w[4]) {
  constexpr double a = -0.75;
  const auto far = [](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 <= x <= 2
  const auto near = [](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };      // x <= 1
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// The input elements output point `coords` reads: their offsets in a plane and weights; returns
// how many (taps outside the input, and taps of weight 0, are left out: 0 · inf would be NaN).
int point_taps(const HostGridSample& g, const float* coords, int64_t* offset, double* w) {
  const auto& a = g.a;
  const int taps_per_axis = a.mode == 0 ? 1 : a.mode == 1 ? 2 : 4;
  // Per spatial axis (outermost first): the taps' input indices (-1: reads 0) and weights.
  int64_t index[kMaxAxes][kMaxTaps];
  double weight[kMaxAxes][kMaxTaps];
  for (int d = 0; d < g.axes; ++d) {
    const auto size = static_cast<double>(g.in[static_cast<size_t>(d)]);
    const double c = coords[g.axes - 1 - d];  // the grid lists the innermost axis first
    double v = a.align_corners ? (c + 1) / 2 * (size - 1) : ((c + 1) * size - 1) / 2;
    if (a.mode == 0) v = std::nearbyint(v);  // half to even, as numpy's rint
    const double lo = a.align_corners ? 0.0 : -0.5, hi = a.align_corners ? size - 1 : size - 0.5;
    if (v < lo || v > hi) {
      if (a.padding == 1) v = std::clamp(v, 0.0, size - 1);
      if (a.padding == 2) v = reflect(v, lo, hi);
    }
    const auto last = static_cast<int64_t>(size) - 1;
    const auto fetch = [&](int64_t i) -> int64_t {  // the index a tap reads
      if (a.padding == 0) return i < 0 || i > last ? -1 : i;
      if (a.padding == 1) return std::clamp<int64_t>(i, 0, last);
      return static_cast<int64_t>(reflect(static_cast<double>(i), lo, hi));  // truncated, as ONNX's
    };
    if (a.mode == 0) {
      index[d][0] = fetch(static_cast<int64_t>(v));
      weight[d][0] = 1;
      continue;
    }
    const double base = std::floor(v), t = v - base;
    const auto i0 = static_cast<int64_t>(base);
    if (a.mode == 1) {
      index[d][0] = fetch(i0);
      index[d][1] = fetch(i0 + 1);
      weight[d][0] = 1 - t;
      weight[d][1] = t;
    } else {
      cubic_weights(t, weight[d]);
      for (int k = 0; k < 4; ++k) index[d][k] = fetch(i0 - 1 + k);
    }
  }
  // The tensor product of the axes' taps: offsets and weights of up to 4^3 input elements.
  int count = 0;
  int k[kMaxAxes] = {0, 0, 0};
  while (true) {
    int64_t at = 0;
    double product = 1;
    bool inside = true;
    for (int d = 0; d < g.axes; ++d) {
      const int64_t i = index[d][k[d]];
      inside = inside && i >= 0;
      at = at * g.in[static_cast<size_t>(d)] + std::max<int64_t>(i, 0);
      product *= weight[d][k[d]];
    }
    if (inside && product != 0) {
      offset[count] = at;
      w[count++] = product;
    }
    int d = g.axes - 1;
    while (d >= 0 && ++k[d] == taps_per_axis) k[d--] = 0;
    if (d < 0) break;
  }
  return count;
}

constexpr int64_t kTile = 64;

// The four taps of point `q` of a tile in linear 2-D sampling with zeros outside (the sampling of
// deformable convolutions and attention): point_taps() in float, without its general loops.
void linear_taps(const HostGridSample& g, const float* coords, int64_t q, int32_t (*offset)[kTile],
                 float (*weight)[kTile], uint32_t (*keep)[kTile]) {
  const auto h = static_cast<float>(g.in[0]), w = static_cast<float>(g.in[1]);
  const float vx = g.a.align_corners ? (coords[0] + 1) / 2 * (w - 1) : ((coords[0] + 1) * w - 1) / 2;
  const float vy = g.a.align_corners ? (coords[1] + 1) / 2 * (h - 1) : ((coords[1] + 1) * h - 1) / 2;
  const float fx = std::floor(vx), fy = std::floor(vy);
  const float tx = vx - fx, ty = vy - fy;
  // Beyond the image by more than a pixel (or NaN): no tap reads it.
  const bool near = fx >= -1 && fx <= w && fy >= -1 && fy <= h;
  const int32_t x0 = near ? static_cast<int32_t>(fx) : -2, y0 = near ? static_cast<int32_t>(fy) : -2;
  const int32_t cols = static_cast<int32_t>(g.in[1]), rows = static_cast<int32_t>(g.in[0]);
  for (int j = 0; j < 4; ++j) {
    const int32_t xi = x0 + (j & 1), yi = y0 + (j >> 1);
    const float wj = ((j & 1) ? tx : 1 - tx) * ((j >> 1) ? ty : 1 - ty);
    const bool inside = xi >= 0 && xi < cols && yi >= 0 && yi < rows;
    offset[j][q] = inside ? yi * cols + xi : 0;
    weight[j][q] = inside ? wj : 0.0f;
    keep[j][q] = inside ? ~0u : 0u;
  }
}

// Nearest and linear 2-D sampling (at most 4 taps a point), a tile at a time in float: each
// point's taps padded to 4 with weight 0 (reading element 0, selected away, so that an infinity
// there gives no NaN), the tile's taps stored tap-major so that the channel loop vectorises over
// points.
void run_few_taps(const HostGridSample& g, const float* x, const float* grid, float* y) {
  const bool linear_zeros = g.a.mode == 1 && g.a.padding == 0 && g.axes == 2;
  const int64_t tiles = (g.out_points + kTile - 1) / kTile;
#pragma omp parallel
  {
    alignas(64) int32_t offset[4][kTile];
    alignas(64) float weight[4][kTile];
    alignas(64) uint32_t keep[4][kTile];  // all ones for a tap that reads, 0 for padding
    int64_t at[kMaxTaps * kMaxTaps * kMaxTaps];
    double w[kMaxTaps * kMaxTaps * kMaxTaps];
#pragma omp for schedule(static)
    for (int64_t task = 0; task < g.batch * tiles; ++task) {
      const int64_t n = task / tiles, p0 = task % tiles * kTile;
      const int64_t points = std::min(kTile, g.out_points - p0);
      for (int64_t q = 0; q < points; ++q) {
        const float* coords = grid + (n * g.out_points + p0 + q) * g.axes;
        if (linear_zeros) {
          linear_taps(g, coords, q, offset, weight, keep);
          continue;
        }
        const int count = point_taps(g, coords, at, w);
        for (int j = 0; j < 4; ++j) {
          offset[j][q] = j < count ? static_cast<int32_t>(at[j]) : 0;
          weight[j][q] = j < count ? static_cast<float>(w[j]) : 0.0f;
          keep[j][q] = j < count ? ~0u : 0u;
        }
      }
      for (int64_t c = 0; c < g.channels; ++c) {
        const float* plane = x + (n * g.channels + c) * g.in_points;
        float* out = y + (n * g.channels + c) * g.out_points + p0;
#pragma omp simd
        for (int64_t q = 0; q < points; ++q) {
          float sum = 0.0f;
          for (int j = 0; j < 4; ++j) {
            // Branch-free: the mask zeroes what a left-out tap reads (element 0, maybe an infinity).
            const uint32_t bits = std::bit_cast<uint32_t>(plane[offset[j][q]]) & keep[j][q];
            sum += weight[j][q] * std::bit_cast<float>(bits);
          }
          out[q] = sum;
        }
      }
    }
  }
}

void run(const HostGridSample& g, const float* x, const float* grid, float* y) {
  const int taps_per_axis = g.a.mode == 0 ? 1 : g.a.mode == 1 ? 2 : 4;
  int most = 1;
  for (int d = 0; d < g.axes; ++d) most *= taps_per_axis;
  if (most <= 4 && g.in_points <= (int64_t{1} << 31)) return run_few_taps(g, x, grid, y);
  // Cubic and 3-D sampling: output points in tiles, each tile's taps found once, then each
  // channel's plane (in cache) read by the whole tile, whose outputs are consecutive; sums in double.
  const int64_t tiles = (g.out_points + kTile - 1) / kTile;
#pragma omp parallel
  {
    std::vector<int64_t> offset(static_cast<size_t>(kTile * most));
    std::vector<double> weight(static_cast<size_t>(kTile * most));
    std::array<int, kTile> count{};
#pragma omp for schedule(static)
    for (int64_t task = 0; task < g.batch * tiles; ++task) {
      const int64_t n = task / tiles, p0 = task % tiles * kTile;
      const int64_t points = std::min(kTile, g.out_points - p0);
      for (int64_t q = 0; q < points; ++q) {
        const auto at = static_cast<size_t>(q * most);
        count[static_cast<size_t>(q)] = point_taps(g, grid + (n * g.out_points + p0 + q) * g.axes, &offset[at], &weight[at]);
      }
      for (int64_t c = 0; c < g.channels; ++c) {
        const float* plane = x + (n * g.channels + c) * g.in_points;
        float* out = y + (n * g.channels + c) * g.out_points + p0;
        for (int64_t q = 0; q < points; ++q) {
          const int64_t* o = &offset[static_cast<size_t>(q * most)];
          const double* w = &weight[static_cast<size_t>(q * most)];
          double sum = 0;
          for (int j = 0; j < count[static_cast<size_t>(q)]; ++j) sum += w[j] * static_cast<double>(plane[o[j]]);
          out[q] = static_cast<float>(sum);
        }
      }
    }
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) { return host_row_major_desc(spec, kGridSampleImpl); }

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  auto g = std::make_shared<HostGridSample>();
  g->a = std::get<graph::GridSampleAttrs>(spec.attrs);
  const graph::Shape& x = spec.srcs[0].shape;
  g->batch = x[0];
  g->channels = x[1];
  g->axes = static_cast<int>(x.rank()) - 2;
  for (int d = 0; d < g->axes; ++d) {
    g->in[static_cast<size_t>(d)] = x[static_cast<size_t>(d) + 2];
    g->in_points *= x[static_cast<size_t>(d) + 2];
  }
  const graph::Shape& out = spec.dsts[0].shape;
  for (size_t d = 2; d < out.rank(); ++d) g->out_points *= out[d];
  k.add_host([g](const std::vector<void*>& data) {
    run(*g, static_cast<const float*>(data[0]), static_cast<const float*>(data[1]), static_cast<float*>(data[2]));
  }, {0, 1, dst_slot(0)}, kGridSampleImpl);
  return kGridSampleImpl;
}

}  // namespace

const OpFamily kGridSampleFamily{"grid_sample", {graph::OpKind::kGridSample}, check, build};

}  // namespace stagecraft::executor::cpu
