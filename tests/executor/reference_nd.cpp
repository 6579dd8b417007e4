// The reference's loops for ONNX ops of any rank (see reference.h): binary math and where with
// NumPy broadcasting, GridSample, pool_nd and resize_nd, each written out as ONNX defines it.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/strings.h"
#include "graph/errors.h"
#include "tests/executor/reference_detail.h"

namespace stagecraft::executor::testing::detail {

using graph::GraphError;
using graph::Op;
using graph::OpWeights;
using graph::Shape;

// a OP b with NumPy broadcasting (same rank; b's dimensions equal to a's or 1, or the other way),
// then the activation. With a constant, b is the constant (or a, with constant_first).
// ONNX's Where: condition ? x : y, the three broadcast as NumPy does (ranks aligned at the end).
// GridSample as ONNX defines it, one axis at a time: the value at coordinate v of the axis is the
// 1-D interpolation of the values of the sub-planes at its taps, each sampled the same way.
double grid_value(const float* data, const std::vector<int64_t>& dims, const std::vector<double>& v, size_t axis,
                  const graph::GridSampleAttrs& a) {
  if (axis == dims.size()) return *data;
  const int64_t size = dims[axis];
  int64_t plane = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) plane *= dims[d];
  const double lo = a.align_corners ? 0.0 : -0.5, hi = a.align_corners ? static_cast<double>(size - 1) : size - 0.5;
  const auto reflected = [&](double x) {
    while (x < lo || x > hi) x = x < lo ? 2 * lo - x : 2 * hi - x;  // mirror until inside
    return x;
  };
  const auto at = [&](int64_t i) -> double {  // the value of tap i, by the padding rule
    if (a.padding == 0 && (i < 0 || i >= size)) return 0.0;
    if (a.padding == 1) i = std::clamp<int64_t>(i, 0, size - 1);
    if (a.padding == 2) i = static_cast<int64_t>(reflected(static_cast<double>(i)));
    return grid_value(data + i * plane, dims, v, axis + 1, a);
  };
  double x = v[axis];
  if (a.mode == 0) x = std::nearbyint(x);
  if (x < lo || x > hi) {
    if (a.padding == 1) x = std::clamp(x, 0.0, static_cast<double>(size - 1));
    if (a.padding == 2) x = reflected(x);
  }
  if (a.mode == 0) return at(static_cast<int64_t>(x));
  const auto i0 = static_cast<int64_t>(std::floor(x));
  const double t = x - static_cast<double>(i0);
  if (a.mode == 1) return (1 - t) * at(i0) + t * at(i0 + 1);
  const double c = -0.75;  // Keys' kernel
  const auto kernel = [&](double s) {
    s = std::abs(s);
    return s <= 1 ? ((c + 2) * s - (c + 3)) * s * s + 1 : ((c * s - 5 * c) * s + 8 * c) * s - 4 * c;
  };
  double sum = 0;
  for (int k = -1; k <= 2; ++k) sum += kernel(t - k) * at(i0 + k);
  return sum;
}

// pool_nd as ONNX's MaxPool / AveragePool define it, written out: every output point visits every
// tap of its window (o * stride - pad_begin + j * dilation per axis), counting the taps inside
// the input and those inside the padded extent.
HostTensor pool_nd(const HostTensor& x, const graph::PoolNdAttrs& a) {
  const size_t axes = x.shape.rank() - 2;
  std::vector<int64_t> out = {x.shape[0], x.shape[1]};
  for (size_t d = 0; d < axes; ++d) out.push_back(graph::pool_nd_extent(a, d, x.shape[d + 2]));
  HostTensor y = zeros(Shape(out));
  int64_t in_plane = 1, out_plane = 1, taps = 1;
  for (size_t d = 0; d < axes; ++d) {
    in_plane *= x.shape[d + 2];
    out_plane *= out[d + 2];
    taps *= a.kernel[d];
  }
  for (int64_t plane = 0; plane < x.shape[0] * x.shape[1]; ++plane) {
    for (int64_t p = 0; p < out_plane; ++p) {
      std::vector<int64_t> o(axes);
      for (size_t d = axes, rest = static_cast<size_t>(p); d-- > 0;) {
        o[d] = static_cast<int64_t>(rest) % out[d + 2];
        rest /= static_cast<size_t>(out[d + 2]);
      }
      double sum = 0, best = -INFINITY;
      int64_t inside = 0, padded = 0;
      for (int64_t t = 0; t < taps; ++t) {
        int64_t offset = 0, rest = t;
        bool in = true, in_pad = true;
        for (size_t d = axes; d-- > 0;) {
          const int64_t j = rest % a.kernel[d];
          rest /= a.kernel[d];
          const int64_t at = o[d] * a.stride[d] - a.pad_begin[d] + j * a.dilation[d];
          in = in && at >= 0 && at < x.shape[d + 2];
          in_pad = in_pad && at >= -a.pad_begin[d] && at < x.shape[d + 2] + a.pad_end[d];
          int64_t step = 1;
          for (size_t e = d + 1; e < axes; ++e) step *= x.shape[e + 2];
          offset += at * step;
        }
        padded += in_pad ? 1 : 0;
        if (!in) continue;
        const double v = x.data[static_cast<size_t>(plane * in_plane + offset)];
        ++inside;
        sum += v;
        best = std::isnan(v) || std::isnan(best) ? NAN : std::max(best, v);
      }
      const int64_t divisor = a.count_include_pad ? padded : inside;
      y.data[static_cast<size_t>(plane * out_plane + p)] =
          static_cast<float>(a.max ? best : divisor > 0 ? sum / static_cast<double>(divisor) : 0.0);
    }
  }
  return y;
}

// resize_nd: every output point as the tensor product of its axes' taps (graph::resize_taps
// gives ONNX's per-axis rules), not pass by pass as the kernel does.
HostTensor resize_nd(const HostTensor& x, const graph::ResizeNdAttrs& a) {
  const size_t rank = x.shape.rank();
  std::vector<graph::ResizeTaps> taps;
  for (size_t d = 0; d < rank; ++d) {
    taps.push_back(graph::resize_taps(a, d, x.shape[d]));
    if (taps.back().identity) {  // one tap of weight 1 per index
      for (int64_t i = 0; i < x.shape[d]; ++i) {
        taps.back().index.push_back({i});
        taps.back().weight.push_back({1.0});
        taps.back().outside.push_back(false);
      }
    }
  }
  HostTensor y = zeros(Shape(a.sizes));
  std::vector<int64_t> o(rank, 0), k(rank, 0);
  for (size_t p = 0; p < y.data.size(); ++p) {
    for (size_t d = rank, rest = p; d-- > 0;) {
      o[d] = static_cast<int64_t>(rest % static_cast<size_t>(a.sizes[d]));
      rest /= static_cast<size_t>(a.sizes[d]);
    }
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) outside = outside || taps[d].outside[static_cast<size_t>(o[d])];
    if (outside) {
      y.data[p] = static_cast<float>(a.extrapolation);
      continue;
    }
    double sum = 0;
    std::fill(k.begin(), k.end(), 0);
    while (true) {
      double w = 1;
      int64_t at = 0;
      for (size_t d = 0; d < rank; ++d) {
        const auto od = static_cast<size_t>(o[d]), kd = static_cast<size_t>(k[d]);
        w *= taps[d].weight[od][kd];
        at = at * x.shape[d] + taps[d].index[od][kd];
      }
      sum += w * x.data[static_cast<size_t>(at)];
      size_t d = rank;
      while (d-- > 0) {
        if (static_cast<size_t>(++k[d]) < taps[d].index[static_cast<size_t>(o[d])].size()) break;
        k[d] = 0;
      }
      if (d == static_cast<size_t>(-1)) break;
    }
    y.data[p] = static_cast<float>(sum);
  }
  return y;
}

HostTensor grid_sample(const HostTensor& x, const HostTensor& grid, const graph::GridSampleAttrs& a) {
  const size_t axes = x.shape.rank() - 2;
  std::vector<int64_t> out = {x.shape[0], x.shape[1]}, dims;
  for (size_t d = 1; d + 1 < grid.shape.rank(); ++d) out.push_back(grid.shape[d]);
  for (size_t d = 2; d < x.shape.rank(); ++d) dims.push_back(x.shape[d]);
  HostTensor y = zeros(Shape(out));
  int64_t points = 1, plane = 1;
  for (size_t d = 2; d < out.size(); ++d) points *= out[static_cast<size_t>(d)];
  for (int64_t d : dims) plane *= d;
  for (int64_t n = 0; n < x.shape[0]; ++n) {
    for (int64_t p = 0; p < points; ++p) {
      std::vector<double> v(axes);
      for (size_t d = 0; d < axes; ++d) {
        const double c = grid.data[static_cast<size_t>((n * points + p) * static_cast<int64_t>(axes)) + axes - 1 - d];
        const auto size = static_cast<double>(dims[d]);
        v[d] = a.align_corners ? (c + 1) / 2 * (size - 1) : ((c + 1) * size - 1) / 2;
      }
      for (int64_t ch = 0; ch < x.shape[1]; ++ch) {
        y.data[static_cast<size_t>((n * x.shape[1] + ch) * points + p)] = static_cast<float>(
            grid_value(x.data.data() + (n * x.shape[1] + ch) * plane, dims, v, 0, a));
      }
    }
  }
  return y;
}

HostTensor where(const std::vector<const HostTensor*>& srcs, const graph::WhereAttrs& a, const graph::WeightStore& weights,
                 const Op& op) {
  const OpWeights* w = weights.find(op.name);
  const bool constant[3] = {a.condition_constant, a.x_constant, a.y_constant};
  const std::vector<int64_t>* shapes[3] = {&a.condition_shape, &a.x_shape, &a.y_shape};
  std::vector<HostTensor> operands;
  size_t next = 0;
  for (int i = 0; i < 3; ++i) {
    if (!constant[i]) {
      operands.push_back(*srcs.at(next++));
      continue;
    }
    if (!w) throw GraphError(cat("op '", op.name, "' (where): no constants"));
    operands.push_back(HostTensor{Shape(*shapes[i]), i == 0 ? w->gamma : i == 1 ? w->weight : w->bias});
  }
  size_t rank = 0;
  for (const auto& t : operands) rank = std::max(rank, t.shape.rank());
  std::vector<int64_t> out(rank, 1);
  std::vector<std::vector<int64_t>> dims;
  for (const auto& t : operands) {
    std::vector<int64_t> d = t.shape.dims();
    d.insert(d.begin(), rank - d.size(), 1);
    for (size_t k = 0; k < rank; ++k) out[k] = std::max(out[k], d[k]);
    dims.push_back(d);
  }
  HostTensor y = zeros(Shape(out));
  std::vector<int64_t> coord(rank);
  for (int64_t i = 0; i < y.shape.numel(); ++i) {
    int64_t rest = i;
    for (size_t k = rank; k-- > 0;) {
      coord[k] = rest % out[k];
      rest /= out[k];
    }
    float v[3];
    for (size_t o = 0; o < 3; ++o) {
      int64_t offset = 0;
      for (size_t k = 0; k < rank; ++k) offset = offset * dims[o][k] + (dims[o][k] == 1 ? 0 : coord[k]);
      v[o] = operands[o].data[static_cast<size_t>(offset)];
    }
    y.data[static_cast<size_t>(i)] = v[0] != 0 ? v[1] : v[2];
  }
  return y;
}

HostTensor binary(const std::vector<const HostTensor*>& srcs, const graph::BinaryAttrs& a,
                  const graph::WeightStore& weights, const Op& op) {
  HostTensor constant;
  const HostTensor* first = srcs[0];
  const HostTensor* second = srcs.size() > 1 ? srcs[1] : nullptr;
  if (!a.constant.empty()) {
    const OpWeights* w = weights.find(op.name);
    if (!w) throw GraphError(cat("op '", op.name, "' (binary): no constant"));
    constant = HostTensor{Shape(graph::constant_shape(a, first->shape.rank())), w->weight};
    second = &constant;
    if (a.constant_first) std::swap(first, second);
  }
  const size_t rank = first->shape.rank();
  std::vector<int64_t> out_dims(rank);
  for (size_t d = 0; d < rank; ++d) out_dims[d] = std::max(first->shape[d], second->shape[d]);
  HostTensor dst = zeros(Shape(out_dims));
  const auto index = [&](const Shape& s, int64_t flat) {
    int64_t offset = 0, stride = 1, rest = flat;
    std::vector<int64_t> coord(rank);
    for (size_t d = rank; d-- > 0;) {
      coord[d] = rest % out_dims[d];
      rest /= out_dims[d];
    }
    for (size_t d = rank; d-- > 0;) {
      offset += (s[d] == 1 ? 0 : coord[d]) * stride;
      stride *= s[d];
    }
    return static_cast<size_t>(offset);
  };
  for (int64_t i = 0; i < dst.shape.numel(); ++i) {
    const double x = first->data[index(first->shape, i)];
    const double y = second->data[index(second->shape, i)];
    double r = 0;
    switch (a.op) {
      case graph::BinaryOp::kAdd: r = x + y; break;
      case graph::BinaryOp::kSub: r = x - y; break;
      case graph::BinaryOp::kMul: r = x * y; break;
      case graph::BinaryOp::kDiv: r = x / y; break;
      case graph::BinaryOp::kPow: r = std::pow(x, y); break;
      case graph::BinaryOp::kMax: r = std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); break;
      case graph::BinaryOp::kMin: r = std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); break;
      case graph::BinaryOp::kMod: r = std::fmod(x, y); break;
      case graph::BinaryOp::kEqual: r = x == y; break;
      case graph::BinaryOp::kLess: r = x < y; break;
      case graph::BinaryOp::kLessEqual: r = x <= y; break;
      case graph::BinaryOp::kGreater: r = x > y; break;
      case graph::BinaryOp::kGreaterEqual: r = x >= y; break;
      case graph::BinaryOp::kAnd: r = x != 0 && y != 0; break;
      case graph::BinaryOp::kOr: r = x != 0 || y != 0; break;
      case graph::BinaryOp::kXor: r = (x != 0) != (y != 0); break;
    }
    dst.data[static_cast<size_t>(i)] = static_cast<float>(activate(r, a.activation));
  }
  return dst;
}

// top_k by selection: the j-th output is the best element not yet taken, found by a scan (the
// larger, NaN above every number, or the smaller; the lower index among equals).
std::vector<HostTensor> top_k(const HostTensor& x, const graph::TopKAttrs& a) {
  const AxisView v(x.shape, static_cast<size_t>(a.axis));
  std::vector<int64_t> out = x.shape.dims();
  out[static_cast<size_t>(a.axis)] = a.k;
  HostTensor values = zeros(graph::Shape(out)), indices = zeros(graph::Shape(out));
  const auto better = [&](float p, float q) {  // p strictly before q
    if (!a.ordered_nan) return a.largest ? p > q : p < q;  // false with a NaN: the first stays
    if (std::isnan(p) || std::isnan(q)) return std::isnan(p) && !std::isnan(q) ? a.largest : !std::isnan(p) && std::isnan(q) && !a.largest;
    return a.largest ? p > q : p < q;
  };
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      std::vector<bool> taken(static_cast<size_t>(v.extent), false);
      for (int64_t j = 0; j < a.k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < v.extent; ++e) {
          if (taken[static_cast<size_t>(e)]) continue;
          const float val = x.data[static_cast<size_t>((o * v.extent + e) * v.inner + i)];
          if (best < 0 || better(val, x.data[static_cast<size_t>((o * v.extent + best) * v.inner + i)])) best = e;
        }
        taken[static_cast<size_t>(best)] = true;
        const auto at = static_cast<size_t>((o * a.k + j) * v.inner + i);
        values.data[at] = x.data[static_cast<size_t>((o * v.extent + best) * v.inner + i)];
        indices.data[at] = static_cast<float>(best);
      }
    }
  return {values, indices};
}

// gather_elements by its definition: the index tensor's coordinates, the axis's replaced by the
// index (negative from the end); NaN for an index outside the axis or not an integer.
HostTensor gather_elements(const HostTensor& x, const HostTensor& indices, const graph::GatherElementsAttrs& a) {
  HostTensor y = zeros(indices.shape);
  const size_t rank = x.shape.rank();
  for (int64_t p = 0; p < indices.shape.numel(); ++p) {
    std::vector<int64_t> c(rank);
    int64_t rest = p;
    for (size_t d = rank; d-- > 0;) {
      c[d] = rest % indices.shape[d];
      rest /= indices.shape[d];
    }
    const int64_t extent = x.shape[static_cast<size_t>(a.axis)];
    const float f = indices.data[static_cast<size_t>(p)];
    int64_t j = std::isfinite(f) && std::floor(f) == f ? static_cast<int64_t>(f) : extent;  // not an index: outside
    if (j < 0) j += extent;
    if (j < 0 || j >= extent) {
      y.data[static_cast<size_t>(p)] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    c[static_cast<size_t>(a.axis)] = j;
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) at = at * x.shape[d] + c[d];
    y.data[static_cast<size_t>(p)] = x.data[static_cast<size_t>(at)];
  }
  return y;
}

}  // namespace stagecraft::executor::testing::detail
