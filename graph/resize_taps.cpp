// The taps of one axis of a resize_nd, by the rules of ONNX's reference Resize: the output index
// y maps to a source coordinate x by the coordinate rule; the filter's coefficients come from the
// fraction r of x past the pixel on its left (r = 1 when x is whole, so that the taps lean left);
// the n taps are the n pixels nearest x, the left one on a tie; taps outside the input read the
// edge pixel, or weigh 0 with exclude_outside (the rest renormalised).
#include <algorithm>
#include <cmath>

#include "graph/op.h"

namespace stagecraft::graph {

namespace {

// Keys' cubic kernel at distance |x| with coefficient a.
double keys(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// The filter's coefficients at fraction r for a scale (antialias stretches them when it is < 1).
std::vector<double> coefficients(const ResizeNdAttrs& a, double r, double scale) {
  if (a.mode == 0) {  // nearest: one of the two pixels around x
    if (r == 1.0) return {0, 1};
    switch (a.nearest) {
      case 0: return {r <= 0.5 ? 1.0 : 0.0, r > 0.5 ? 1.0 : 0.0};  // round_prefer_floor
      case 1: return {r < 0.5 ? 1.0 : 0.0, r >= 0.5 ? 1.0 : 0.0};  // round_prefer_ceil
      case 2: return {1, 0};                                         // floor
      default: return {0, 1};                                        // ceil
    }
  }
  if (!a.antialias) {
    if (a.mode == 1) return {1 - r, r};
    return {keys(r + 1, a.cubic_a), keys(r, a.cubic_a), keys(1 - r, a.cubic_a), keys(2 - r, a.cubic_a)};
  }
  const double s = std::min(scale, 1.0);
  std::vector<double> c;
  if (a.mode == 1) {
    const auto start = static_cast<int64_t>(std::floor(-1 / s) + 1);
    for (int64_t i = start; i < start + 2 - 2 * start; ++i) c.push_back(std::clamp(1 - std::fabs((static_cast<double>(i) - r) * s), 0.0, 1.0));
  } else {
    const auto start = static_cast<int64_t>(std::floor(-2 / s) + 1);
    for (int64_t i = start; i < 2 - start; ++i) c.push_back(keys(s * (static_cast<double>(i) - r), a.cubic_a));
  }
  double sum = 0;
  for (double v : c) sum += v;
  for (double& v : c) v /= sum;
  return c;
}

// The source coordinate of output index y (ONNX's coordinate_transformation_mode); `outside` is
// set where tf_crop_and_resize's region leaves the input.
double source_coordinate(const ResizeNdAttrs& a, size_t axis, double y, int64_t in, int64_t out, bool* outside) {
  const double scale = a.scales[axis];
  const double in_d = static_cast<double>(in), out_float = scale * in_d;
  switch (a.transform) {
    case 1: {  // half_pixel_symmetric
      const double adjustment = static_cast<double>(out) / out_float;
      return in_d / 2 * (1 - adjustment) + (y + 0.5) / scale - 0.5;
    }
    case 2: return out_float == 1 ? -0.5 : (y + 0.5) / scale - 0.5;  // pytorch_half_pixel
    case 3: return out_float == 1 ? 0.0 : y * (in_d - 1) / (out_float - 1);  // align_corners
    case 4: return y / scale;  // asymmetric
    case 5: {  // tf_crop_and_resize
      const size_t rank = a.sizes.size();
      const double start = a.roi[axis], end = a.roi[rank + axis];
      const double x = (out_float == 1 ? (end - start) * (in_d - 1) / 2 : y * (end - start) * (in_d - 1) / (out_float - 1)) +
                       start * (in_d - 1);
      *outside = x < 0 || x > in_d - 1;
      return x;
    }
    default: return (y + 0.5) / scale - 0.5;  // half_pixel
  }
}

}  // namespace

ResizeTaps resize_taps(const ResizeNdAttrs& a, size_t axis, int64_t in) {
  ResizeTaps t;
  const int64_t out = a.sizes[axis];
  const size_t rank = a.sizes.size();
  const bool whole_region = a.transform != 5 || (std::fabs(a.roi[axis]) < 1e-9 && std::fabs(a.roi[rank + axis] - 1) < 1e-9);
  t.identity = std::fabs(a.scales[axis] - 1) < 1e-9 && out == in && whole_region;
  if (t.identity) return t;
  t.index.resize(static_cast<size_t>(out));
  t.weight.resize(static_cast<size_t>(out));
  t.outside.assign(static_cast<size_t>(out), false);
  for (int64_t y = 0; y < out; ++y) {
    bool outside = false;
    const double x = source_coordinate(a, axis, static_cast<double>(y), in, out, &outside);
    const double left = std::floor(x);
    std::vector<double> w = coefficients(a, x == left ? 1.0 : x - left, a.scales[axis]);
    const auto n = static_cast<int64_t>(w.size());
    // The n pixels nearest x, the left one on a tie (ONNX's reference, in its padded frame).
    const auto pad = (n + 1) / 2;
    const double padded = x + static_cast<double>(pad);
    const double p = std::floor(padded), frac = padded - p;
    const int64_t offset = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1) : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    const int64_t first = static_cast<int64_t>(p) + offset - pad;
    std::vector<int64_t> idx(static_cast<size_t>(n));
    double kept = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = first + j;
      if (a.exclude_outside && (i < 0 || i >= in)) w[static_cast<size_t>(j)] = 0;
      kept += w[static_cast<size_t>(j)];
      idx[static_cast<size_t>(j)] = std::clamp<int64_t>(i, 0, in - 1);
    }
    if (a.exclude_outside && kept != 0) {
      for (double& v : w) v /= kept;
    }
    t.index[static_cast<size_t>(y)] = std::move(idx);
    t.weight[static_cast<size_t>(y)] = std::move(w);
    t.outside[static_cast<size_t>(y)] = outside;
  }
  return t;
}

}  // namespace stagecraft::graph
