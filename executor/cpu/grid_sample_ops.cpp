// GridSample (ONNX, 2-D and 3-D) on our own host loop: f32 row-major tensors. Each output point
// reads its normalised coordinates from the grid, maps them to input coordinates (align_corners or
// not), applies the padding rule to coordinates outside the input (border: clamped; reflection:
// reflected by the input's edges), then interpolates: one tap per axis (nearest), two (linear) or
// four (cubic, Keys' kernel with a = -0.75); a tap outside the input reads 0 (zeros), the edge
// (border) or its reflection. The taps of the axes combine as a tensor product, which is what
// ONNX's axis-by-axis definition computes. Output points are spread over the threads; the channels
// of a point share its taps.
#include <algorithm>
#include <array>
#include <cmath>

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

void run(const HostGridSample& g, const float* x, const float* grid, float* y) {
  const auto& a = g.a;
  const int taps_per_axis = a.mode == 0 ? 1 : a.mode == 1 ? 2 : 4;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < g.batch * g.out_points; ++task) {
    const int64_t n = task / g.out_points, p = task % g.out_points;
    const float* coords = grid + task * g.axes;
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
    int64_t offset[kMaxTaps * kMaxTaps * kMaxTaps];
    double w[kMaxTaps * kMaxTaps * kMaxTaps];
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
    for (int64_t c = 0; c < g.channels; ++c) {
      const float* plane = x + (n * g.channels + c) * g.in_points;
      double sum = 0;
      for (int j = 0; j < count; ++j) sum += w[j] * static_cast<double>(plane[offset[j]]);
      y[(n * g.channels + c) * g.out_points + p] = static_cast<float>(sum);
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
