// Reference semantics of every op kind (PyTorch's) as plain loops over logical NCHW / NC tensors.
// Inputs: a graph, its weights by op name, its input tensors. Outputs: the graph outputs.
// Complexity: each op's direct definition, e.g. O(N·O·(I/groups)·KH·KW·OH·OW) for a convolution.
// Sums are accumulated in double so that the reference is more accurate than what it checks.

#include "tests/executor/reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>

#include "common/random.h"
#include "common/strings.h"
#include "graph/activation_kinds.h"
#include "graph/errors.h"
#include "graph/shape_inference.h"

namespace stagecraft::executor::testing {

namespace {

using graph::Activation;
using graph::GraphError;
using graph::Op;
using graph::OpKind;
using graph::OpWeights;
using graph::Pads;
using graph::Shape;

// random_tensor draws 24-bit integers k and returns k / 2^23 - 1: uniform in [-1, 1) and exact
// in fp32, so no value rounds up to 1.
constexpr int kRandomBits = 24;
constexpr int kRandomDiscardedBits = 64 - kRandomBits;
constexpr double kRandomStep = 2.0 / static_cast<double>(int64_t{1} << kRandomBits);
constexpr double kRandomLow = -1.0;

// Upper clamp of ReLU6.
constexpr double kRelu6Max = 6.0;
// Sizes of a rank-4 tensor and the offset of one element in NCHW order.
struct Nchw {
  int64_t n;
  int64_t c;
  int64_t h;
  int64_t w;

  explicit Nchw(const Shape& s) : n(s[0]), c(s[1]), h(s[2]), w(s[3]) {}
  size_t at(int64_t in, int64_t ic, int64_t ih, int64_t iw) const {
    return static_cast<size_t>(((in * c + ic) * h + ih) * w + iw);
  }
};

HostTensor zeros(Shape shape) {
  const auto numel = static_cast<size_t>(shape.numel());
  return HostTensor{std::move(shape), std::vector<float>(numel, 0.0f)};
}

double activate(double x, Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return std::max(x, 0.0);
    case Activation::kRelu6:
      return std::clamp(x, 0.0, kRelu6Max);
    case Activation::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Activation::kHardSigmoid:
      return std::clamp(x + 3.0, 0.0, kRelu6Max) / 6.0;
    case Activation::kHardSwish:
      return x * std::clamp(x + 3.0, 0.0, kRelu6Max) / 6.0;
    case Activation::kSilu:
      return x / (1.0 + std::exp(-x));
    case Activation::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kSqrt:
      return std::sqrt(x);
  }
  return x;
}

HostTensor activate_all(const HostTensor& src, Activation activation) {
  HostTensor dst = zeros(src.shape);
  for (size_t i = 0; i < src.data.size(); ++i) {
    dst.data[i] = static_cast<float>(activate(src.data[i], activation));
  }
  return dst;
}

// Constant padding of H and W; a negative amount crops that side. Used by Pad and, with zeros,
// by convolution, which then slides its window over the padded tensor without bounds checks.
HostTensor pad_constant(const HostTensor& src, const Pads& pads, float value) {
  const Nchw in(src.shape);
  HostTensor dst =
      zeros(Shape{in.n, in.c, in.h + pads.top + pads.bottom, in.w + pads.left + pads.right});
  const Nchw out(dst.shape);
  for (int64_t n = 0; n < out.n; ++n) {
    for (int64_t c = 0; c < out.c; ++c) {
      for (int64_t y = 0; y < out.h; ++y) {
        for (int64_t x = 0; x < out.w; ++x) {
          const int64_t iy = y - pads.top;
          const int64_t ix = x - pads.left;
          const bool inside = iy >= 0 && iy < in.h && ix >= 0 && ix < in.w;
          dst.data[out.at(n, c, y, x)] = inside ? src.data[in.at(n, c, iy, ix)] : value;
        }
      }
    }
  }
  return dst;
}

// With a residual: act(conv + bias + residual).
// ONNX's ConvTranspose by its definition: each input pixel scatters weight · x into the output
// (weights [out, in / groups, kh, kw]), in double.
HostTensor conv_transpose2d(const HostTensor& src, const graph::ConvTranspose2dAttrs& a, const OpWeights& w) {
  const Nchw in(src.shape);
  const auto extent = [](int64_t n, int64_t k, int64_t s, int64_t d, int64_t extra, int64_t before, int64_t after) {
    return s * (n - 1) + d * (k - 1) + 1 + extra - before - after;
  };
  const int64_t out_h = extent(in.h, a.kernel.h, a.stride.h, a.dilation.h, a.output_padding.h, a.padding.top, a.padding.bottom);
  const int64_t out_w = extent(in.w, a.kernel.w, a.stride.w, a.dilation.w, a.output_padding.w, a.padding.left, a.padding.right);
  const int64_t in_per = a.in_channels / a.groups, out_per = a.out_channels / a.groups;
  std::vector<double> acc(static_cast<size_t>(in.n * a.out_channels * out_h * out_w), 0.0);
  const auto at = [&](int64_t n, int64_t c, int64_t y, int64_t x) {
    return static_cast<size_t>(((n * a.out_channels + c) * out_h + y) * out_w + x);
  };
  for (int64_t n = 0; n < in.n; ++n)
    for (int64_t ic = 0; ic < in.c; ++ic) {
      const int64_t g = ic / in_per, j = ic % in_per;
      for (int64_t o = 0; o < out_per; ++o) {
        const int64_t oc = g * out_per + o;
        for (int64_t kh = 0; kh < a.kernel.h; ++kh)
          for (int64_t kw = 0; kw < a.kernel.w; ++kw) {
            const double weight = w.weight[static_cast<size_t>(((oc * in_per + j) * a.kernel.h + kh) * a.kernel.w + kw)];
            for (int64_t y = 0; y < in.h; ++y) {
              const int64_t oy = y * a.stride.h + kh * a.dilation.h - a.padding.top;
              if (oy < 0 || oy >= out_h) continue;
              for (int64_t x = 0; x < in.w; ++x) {
                const int64_t ox = x * a.stride.w + kw * a.dilation.w - a.padding.left;
                if (ox < 0 || ox >= out_w) continue;
                acc[at(n, oc, oy, ox)] += weight * src.data[in.at(n, ic, y, x)];
              }
            }
          }
      }
    }
  HostTensor dst = zeros(Shape{in.n, a.out_channels, out_h, out_w});
  for (int64_t n = 0; n < in.n; ++n)
    for (int64_t c = 0; c < a.out_channels; ++c)
      for (int64_t y = 0; y < out_h; ++y)
        for (int64_t x = 0; x < out_w; ++x) {
          const double b = a.bias ? w.bias[static_cast<size_t>(c)] : 0.0;
          dst.data[at(n, c, y, x)] = static_cast<float>(acc[at(n, c, y, x)] + b);
        }
  return dst;
}

HostTensor conv2d(const HostTensor& src, const graph::Conv2dAttrs& a, const OpWeights& w,
                  const HostTensor* residual = nullptr) {
  const Nchw in(src.shape);
  const int64_t out_h = graph::window_output_size(in.h, a.padding.top, a.padding.bottom, a.kernel.h,
                                                  a.stride.h, a.dilation.h, false);
  const int64_t out_w = graph::window_output_size(in.w, a.padding.left, a.padding.right, a.kernel.w,
                                                  a.stride.w, a.dilation.w, false);
  const HostTensor padded = pad_constant(src, a.padding, 0.0f);
  const Nchw p(padded.shape);
  HostTensor dst = zeros(Shape{in.n, a.out_channels, out_h, out_w});
  const Nchw out(dst.shape);
  const int64_t in_per_group = a.in_channels / a.groups;
  const int64_t out_per_group = a.out_channels / a.groups;
  std::vector<double> acc(static_cast<size_t>(out_h * out_w));
  for (int64_t n = 0; n < out.n; ++n) {
    for (int64_t oc = 0; oc < out.c; ++oc) {
      const int64_t group = oc / out_per_group;
      const double bias = a.bias ? w.bias[static_cast<size_t>(oc)] : 0.0;
      std::fill(acc.begin(), acc.end(), bias);
      for (int64_t j = 0; j < in_per_group; ++j) {
        const int64_t ic = group * in_per_group + j;
        for (int64_t kh = 0; kh < a.kernel.h; ++kh) {
          for (int64_t kw = 0; kw < a.kernel.w; ++kw) {
            const double weight = w.weight[static_cast<size_t>(
                ((oc * in_per_group + j) * a.kernel.h + kh) * a.kernel.w + kw)];
            for (int64_t y = 0; y < out_h; ++y) {
              const float* row = &padded.data[p.at(n, ic, y * a.stride.h + kh * a.dilation.h, 0)];
              double* acc_row = &acc[static_cast<size_t>(y * out_w)];
              for (int64_t x = 0; x < out_w; ++x) {
                acc_row[x] += weight * row[x * a.stride.w + kw * a.dilation.w];
              }
            }
          }
        }
      }
      for (int64_t y = 0; y < out_h; ++y) {
        for (int64_t x = 0; x < out_w; ++x) {
          double v = acc[static_cast<size_t>(y * out_w + x)];
          if (residual != nullptr) v += residual->data[out.at(n, oc, y, x)];
          dst.data[out.at(n, oc, y, x)] = static_cast<float>(activate(v, a.activation));
        }
      }
    }
  }
  return dst;
}

HostTensor batch_norm(const HostTensor& src, const graph::BatchNormAttrs& a, const OpWeights& w) {
  const Nchw in(src.shape);
  HostTensor dst = zeros(src.shape);
  for (int64_t n = 0; n < in.n; ++n) {
    for (int64_t c = 0; c < in.c; ++c) {
      const auto k = static_cast<size_t>(c);
      const double stddev = std::sqrt(static_cast<double>(w.var[k]) + a.eps);
      for (int64_t y = 0; y < in.h; ++y) {
        for (int64_t x = 0; x < in.w; ++x) {
          const size_t i = in.at(n, c, y, x);
          dst.data[i] = static_cast<float>(
              (src.data[i] - static_cast<double>(w.mean[k])) / stddev * w.gamma[k] + w.beta[k]);
        }
      }
    }
  }
  return dst;
}

// A tensor seen as [outer, extent of `axis`, inner].
struct AxisView {
  int64_t outer = 1, extent = 1, inner = 1;
  AxisView(const Shape& s, size_t axis) {
    for (size_t d = 0; d < s.rank(); ++d) (d < axis ? outer : d == axis ? extent : inner) *= s[d];
  }
};

// Layer normalisation over the channels of each pixel (rank 4) or over the last axis (rank 2:
// the features of a row; other ranks: a transformer's tokens), in double.
HostTensor layer_norm(const HostTensor& src, const graph::LayerNormAttrs& a, const OpWeights& w) {
  const AxisView v(src.shape, src.shape.rank() == 4 ? 1 : src.shape.rank() - 1);
  const int64_t n = v.outer, c = v.extent, pixels = v.inner;
  HostTensor dst = zeros(src.shape);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < pixels; ++p) {
      const auto at = [&](int64_t ch) { return static_cast<size_t>((i * c + ch) * pixels + p); };
      double mean = 0, var = 0;
      for (int64_t ch = 0; ch < c; ++ch) mean += src.data[at(ch)];
      mean /= static_cast<double>(c);
      for (int64_t ch = 0; ch < c; ++ch) var += (src.data[at(ch)] - mean) * (src.data[at(ch)] - mean);
      const double stddev = std::sqrt(var / static_cast<double>(c) + a.eps);
      for (int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<size_t>(ch);
        dst.data[at(ch)] = static_cast<float>((src.data[at(ch)] - mean) / stddev * w.gamma[k] + w.beta[k]);
      }
    }
  }
  return dst;
}

// A window of a pooling op in padded input coordinates, clipped to the padded input (a window that
// ceil mode lets stick out past the padding counts only its part inside it).
struct Window {
  int64_t y0, y1, x0, x1;
  int64_t count() const { return (y1 - y0) * (x1 - x0); }
  Window clipped(const Nchw& in) const {
    return {std::max<int64_t>(y0, 0), std::min(y1, in.h), std::max<int64_t>(x0, 0), std::min(x1, in.w)};
  }
};

// Every output element of a 2-D pooling: reduce(n, c, window) gives its value.
template <class Attrs, class Reduce>
HostTensor pool(const HostTensor& src, const Attrs& a, Reduce reduce) {
  const Nchw in(src.shape);
  const Pads& pad = a.padding;
  const int64_t out_h =
      graph::window_output_size(in.h, pad.top, pad.bottom, a.kernel.h, a.stride.h, 1, a.ceil_mode);
  const int64_t out_w =
      graph::window_output_size(in.w, pad.left, pad.right, a.kernel.w, a.stride.w, 1, a.ceil_mode);
  HostTensor dst = zeros(Shape{in.n, in.c, out_h, out_w});
  const Nchw out(dst.shape);
  for (int64_t n = 0; n < out.n; ++n) {
    for (int64_t c = 0; c < out.c; ++c) {
      for (int64_t y = 0; y < out_h; ++y) {
        for (int64_t x = 0; x < out_w; ++x) {
          const int64_t y0 = y * a.stride.h - pad.top;
          const int64_t x0 = x * a.stride.w - pad.left;
          const Window w{y0, std::min(y0 + a.kernel.h, in.h + pad.bottom), x0,
                         std::min(x0 + a.kernel.w, in.w + pad.right)};
          dst.data[out.at(n, c, y, x)] = reduce(in, n, c, w);
        }
      }
    }
  }
  return dst;
}

// Max over the real input elements of each window: padding is never selected.
HostTensor max_pool(const HostTensor& src, const graph::MaxPoolAttrs& a) {
  return pool(src, a, [&](const Nchw& in, int64_t n, int64_t c, const Window& padded) {
    const Window w = padded.clipped(in);
    float best = -std::numeric_limits<float>::infinity();
    for (int64_t iy = w.y0; iy < w.y1; ++iy) {
      for (int64_t ix = w.x0; ix < w.x1; ++ix) {
        const float v = src.data[in.at(n, c, iy, ix)];
        if (v > best || std::isnan(v)) best = v;  // NaN propagates, as in PyTorch
      }
    }
    return best;
  });
}

// PyTorch's divisor: with count_include_pad the window clipped to the padded input; without, the
// number of real input elements in the window.
HostTensor avg_pool(const HostTensor& src, const graph::AvgPoolAttrs& a) {
  return pool(src, a, [&](const Nchw& in, int64_t n, int64_t c, const Window& padded) {
    const Window w = padded.clipped(in);
    double sum = 0.0;
    for (int64_t iy = w.y0; iy < w.y1; ++iy) {
      for (int64_t ix = w.x0; ix < w.x1; ++ix) sum += src.data[in.at(n, c, iy, ix)];
    }
    const int64_t divisor = a.count_include_pad ? padded.count() : w.count();
    assert(divisor > 0);
    return static_cast<float>(sum / static_cast<double>(divisor));
  });
}

HostTensor global_avg_pool(const HostTensor& src) {
  const Nchw in(src.shape);
  HostTensor dst = zeros(Shape{in.n, in.c, 1, 1});
  for (int64_t n = 0; n < in.n; ++n) {
    for (int64_t c = 0; c < in.c; ++c) {
      double sum = 0.0;
      for (int64_t y = 0; y < in.h; ++y) {
        for (int64_t x = 0; x < in.w; ++x) sum += src.data[in.at(n, c, y, x)];
      }
      dst.data[static_cast<size_t>(n * in.c + c)] =
          static_cast<float>(sum / static_cast<double>(in.h * in.w));
    }
  }
  return dst;
}

HostTensor add(const std::vector<const HostTensor*>& srcs, const graph::AddAttrs& a) {
  HostTensor dst = zeros(srcs[0]->shape);
  for (size_t i = 0; i < dst.data.size(); ++i) {
    double sum = 0.0;
    for (const HostTensor* src : srcs) sum += src->data[i];
    dst.data[i] = static_cast<float>(activate(sum, a.activation));
  }
  return dst;
}

HostTensor global_max_pool(const HostTensor& src) {
  const Nchw in(src.shape);
  HostTensor dst = zeros(Shape{in.n, in.c, 1, 1});
  for (int64_t n = 0; n < in.n; ++n) {
    for (int64_t c = 0; c < in.c; ++c) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t y = 0; y < in.h; ++y) {
        for (int64_t x = 0; x < in.w; ++x) m = std::max(m, src.data[in.at(n, c, y, x)]);
      }
      dst.data[static_cast<size_t>(n * in.c + c)] = m;
    }
  }
  return dst;
}

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

// ShuffleNet's channel shuffle: out channel k * groups + g is in channel g * (C / groups) + k.
HostTensor channel_shuffle(const HostTensor& src, int64_t groups) {
  const Nchw in(src.shape);
  HostTensor dst = zeros(src.shape);
  const int64_t per = in.c / groups, plane = in.h * in.w;
  for (int64_t n = 0; n < in.n; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t k = 0; k < per; ++k) {
        const auto from = src.data.begin() + static_cast<ptrdiff_t>(in.at(n, g * per + k, 0, 0));
        std::copy(from, from + plane, dst.data.begin() + static_cast<ptrdiff_t>(in.at(n, k * groups + g, 0, 0)));
      }
    }
  }
  return dst;
}

// ONNX Resize as PyTorch exports it, written from the ONNX formulas: nearest = asymmetric
// coordinates (x / scale) rounded down; linear = half-pixel coordinates ((x + 0.5) / scale - 0.5),
// clamped into the source, interpolated between the two neighbours per axis.
// Keys' cubic convolution kernel with a = -0.75 (PyTorch's bicubic) at distance d.
double keys_cubic(double d) {
  constexpr double a = -0.75;
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

HostTensor resize(const HostTensor& src, const graph::ResizeAttrs& a) {
  const Nchw in(src.shape);
  const Shape out_shape{in.n, in.c, a.size.h, a.size.w};
  const Nchw out(out_shape);
  HostTensor dst = zeros(out_shape);
  if (a.cubic) {  // the 4 x 4 pixels around the half-pixel coordinate, edges repeated
    for (int64_t n = 0; n < in.n; ++n)
      for (int64_t c = 0; c < in.c; ++c)
        for (int64_t y = 0; y < out.h; ++y)
          for (int64_t x = 0; x < out.w; ++x) {
            const double sy = (static_cast<double>(y) + 0.5) / a.scale_h - 0.5;
            const double sx = (static_cast<double>(x) + 0.5) / a.scale_w - 0.5;
            const auto y0 = static_cast<int64_t>(std::floor(sy)), x0 = static_cast<int64_t>(std::floor(sx));
            double sum = 0;
            for (int64_t i = y0 - 1; i <= y0 + 2; ++i)
              for (int64_t j = x0 - 1; j <= x0 + 2; ++j) {
                const int64_t h = std::clamp<int64_t>(i, 0, in.h - 1), w = std::clamp<int64_t>(j, 0, in.w - 1);
                sum += keys_cubic(sy - static_cast<double>(i)) * keys_cubic(sx - static_cast<double>(j)) *
                       static_cast<double>(src.data[static_cast<size_t>(in.at(n, c, h, w))]);
              }
            dst.data[static_cast<size_t>(out.at(n, c, y, x))] = static_cast<float>(sum);
          }
    return dst;
  }
  auto coordinate = [&](int64_t y, double scale, int64_t size, int64_t out_size, int64_t* lo, int64_t* hi, double* frac) {
    if (!a.linear) {
      *lo = *hi = std::min<int64_t>(size - 1, static_cast<int64_t>(std::floor(static_cast<double>(y) / scale)));
      *frac = 0;
      return;
    }
    const double original =
        a.align_corners ? (out_size > 1 && std::abs(static_cast<double>(size) * scale - 1.0) > 1e-9
                               ? static_cast<double>(y) * static_cast<double>(size - 1) / (static_cast<double>(size) * scale - 1.0)
                               : 0.0)
                        : std::clamp((static_cast<double>(y) + 0.5) / scale - 0.5, 0.0, static_cast<double>(size - 1));
    *lo = static_cast<int64_t>(std::floor(original));
    *hi = std::min<int64_t>(*lo + 1, size - 1);
    *frac = original - static_cast<double>(*lo);
  };
  for (int64_t n = 0; n < in.n; ++n) {
    for (int64_t c = 0; c < in.c; ++c) {
      for (int64_t y = 0; y < out.h; ++y) {
        int64_t y0, y1;
        double fy;
        coordinate(y, a.scale_h, in.h, out.h, &y0, &y1, &fy);
        for (int64_t x = 0; x < out.w; ++x) {
          int64_t x0, x1;
          double fx;
          coordinate(x, a.scale_w, in.w, out.w, &x0, &x1, &fx);
          auto v = [&](int64_t h, int64_t w) { return static_cast<double>(src.data[static_cast<size_t>(in.at(n, c, h, w))]); };
          const double top = v(y0, x0) * (1 - fx) + v(y0, x1) * fx;
          const double bottom = v(y1, x0) * (1 - fx) + v(y1, x1) * fx;
          dst.data[static_cast<size_t>(out.at(n, c, y, x))] = static_cast<float>(top * (1 - fy) + bottom * fy);
        }
      }
    }
  }
  return dst;
}

// Channels [begin, end) of a rank-4 tensor: per batch item, one contiguous block.
HostTensor channel_slice(const HostTensor& src, int64_t begin, int64_t end) {
  const Nchw in(src.shape);
  HostTensor dst = zeros(Shape{in.n, end - begin, in.h, in.w});
  const int64_t plane = in.h * in.w;
  auto out = dst.data.begin();
  for (int64_t n = 0; n < in.n; ++n) {
    const auto first = src.data.begin() + static_cast<ptrdiff_t>(in.at(n, begin, 0, 0));
    out = std::copy(first, first + (end - begin) * plane, out);
  }
  return dst;
}

// Inputs side by side along channels: per batch item, each input's block in input order.
HostTensor concat(const std::vector<const HostTensor*>& srcs) {
  Shape shape = srcs[0]->shape;
  shape[1] = 0;
  for (const HostTensor* src : srcs) shape[1] += src->shape[1];
  HostTensor dst = zeros(shape);
  const int64_t batch = shape[0];
  auto out = dst.data.begin();
  for (int64_t n = 0; n < batch; ++n) {
    for (const HostTensor* src : srcs) {
      const int64_t block = src->shape.numel() / batch;
      const auto first = src->data.begin() + static_cast<ptrdiff_t>(n * block);
      out = std::copy(first, first + block, out);
    }
  }
  return dst;
}

std::vector<HostTensor> split(const HostTensor& src, const graph::SplitAttrs& a) {
  std::vector<HostTensor> dsts;
  int64_t begin = 0;
  for (int64_t size : a.sizes) {
    dsts.push_back(channel_slice(src, begin, begin + size));
    begin += size;
  }
  return dsts;
}

HostTensor flatten(const HostTensor& src) {
  const int64_t batch = src.shape[0];
  return HostTensor{Shape{batch, src.shape.numel() / batch}, src.data};
}

// Over the last axis (the rows of a rank-2 matrix, or of a row-major tensor of higher rank).
HostTensor linear(const HostTensor& src, const graph::LinearAttrs& a, const OpWeights& w) {
  const int64_t batch = src.shape.numel() / a.in_features;
  std::vector<int64_t> out_dims = src.shape.dims();
  out_dims.back() = a.out_features;
  HostTensor dst = zeros(Shape(out_dims));
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t o = 0; o < a.out_features; ++o) {
      double sum = a.bias ? w.bias[static_cast<size_t>(o)] : 0.0;
      for (int64_t i = 0; i < a.in_features; ++i) {
        sum += static_cast<double>(src.data[static_cast<size_t>(n * a.in_features + i)]) *
               w.weight[static_cast<size_t>(o * a.in_features + i)];
      }
      dst.data[static_cast<size_t>(n * a.out_features + o)] =
          static_cast<float>(activate(sum, a.activation));
    }
  }
  return dst;
}

// Softmax of each row, shifted by the row's maximum so that exp never overflows.
// Softmax over one axis (1: the features of a row, the channels of a pixel).
HostTensor softmax(const HostTensor& src, int64_t axis) {
  const AxisView v(src.shape, static_cast<size_t>(axis));
  const int64_t rows = v.outer, cols = v.extent, pixels = v.inner;
  HostTensor dst = zeros(src.shape);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < pixels; ++p) {
      const auto at = [&](int64_t c) { return static_cast<size_t>((r * cols + c) * pixels + p); };
      double row_max = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < cols; ++c) row_max = std::max<double>(row_max, src.data[at(c)]);
      double sum = 0.0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(src.data[at(c)] - row_max);
      for (int64_t c = 0; c < cols; ++c) dst.data[at(c)] = static_cast<float>(std::exp(src.data[at(c)] - row_max) / sum);
    }
  }
  return dst;
}

// ONNX MatMul of tensors of equal rank >= 3, batch dimensions broadcast, in double.
HostTensor matmul(const HostTensor& a, const HostTensor& b) {
  const size_t r = a.shape.rank();
  const int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  std::vector<int64_t> dims(r);
  for (size_t d = 0; d + 2 < r; ++d) dims[d] = std::max(a.shape[d], b.shape[d]);
  dims[r - 2] = m;
  dims[r - 1] = n;
  HostTensor y = zeros(Shape(dims));
  const int64_t batches = y.shape.numel() / (m * n);
  for (int64_t bi = 0; bi < batches; ++bi) {
    // The batch's offsets in a and b (broadcast dimensions of size 1 repeat).
    int64_t rest = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t d = r - 2; d-- > 0;) {
      const int64_t c = rest % dims[d];
      rest /= dims[d];
      oa += (a.shape[d] == 1 ? 0 : c) * sa;
      ob += (b.shape[d] == 1 ? 0 : c) * sb;
      sa *= a.shape[d];
      sb *= b.shape[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t t = 0; t < k; ++t)
          sum += static_cast<double>(a.data[static_cast<size_t>(oa * m * k + i * k + t)]) *
                 b.data[static_cast<size_t>(ob * k * n + t * n + j)];
        y.data[static_cast<size_t>((bi * m + i) * n + j)] = static_cast<float>(sum);
      }
  }
  return y;
}

// Output dimension i is input dimension perm[i].
HostTensor transpose(const HostTensor& x, const std::vector<int64_t>& perm) {
  const size_t r = x.shape.rank();
  std::vector<int64_t> in_strides(r, 1), dims(r);
  for (size_t d = r; d-- > 1;) in_strides[d - 1] = in_strides[d] * x.shape[d];
  for (size_t d = 0; d < r; ++d) dims[d] = x.shape[static_cast<size_t>(perm[d])];
  HostTensor y = zeros(Shape(dims));
  for (int64_t i = 0; i < y.shape.numel(); ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = r; d-- > 0;) {
      offset += rest % dims[d] * in_strides[static_cast<size_t>(perm[d])];
      rest /= dims[d];
    }
    y.data[static_cast<size_t>(i)] = x.data[static_cast<size_t>(offset)];
  }
  return y;
}

const OpWeights& weights_of(const graph::WeightStore& weights, const Op& op) {
  const OpWeights* w = weights.find(op.name);
  if (!w) throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): no weights"));
  return *w;
}

// The outputs of one op from its inputs (in slot order).
std::vector<HostTensor> evaluate(const Op& op, const std::vector<const HostTensor*>& srcs,
                                 const graph::WeightStore& weights) {
  const HostTensor& x = *srcs[0];
  switch (op.kind) {
    case OpKind::kConvTranspose2d:
      return {conv_transpose2d(x, op.attrs_as<graph::ConvTranspose2dAttrs>(), weights_of(weights, op))};
    case OpKind::kConv2d:
      return {conv2d(x, op.attrs_as<graph::Conv2dAttrs>(), weights_of(weights, op),
                     srcs.size() > 1 ? srcs[1] : nullptr)};
    case OpKind::kBatchNorm: {
      const auto& a = op.attrs_as<graph::BatchNormAttrs>();
      return {activate_all(batch_norm(x, a, weights_of(weights, op)), a.activation)};
    }
    case OpKind::kMaxPool:
      return {max_pool(x, op.attrs_as<graph::MaxPoolAttrs>())};
    case OpKind::kAvgPool:
      return {avg_pool(x, op.attrs_as<graph::AvgPoolAttrs>())};
    case OpKind::kGlobalAvgPool:
      return {global_avg_pool(x)};
    case OpKind::kAdd:
      return {add(srcs, op.attrs_as<graph::AddAttrs>())};
    case OpKind::kConcat:
      return {concat(srcs)};
    case OpKind::kSplit:
      return split(x, op.attrs_as<graph::SplitAttrs>());
    case OpKind::kSlice: {
      const auto& a = op.attrs_as<graph::SliceAttrs>();
      return {channel_slice(x, a.begin, a.end)};
    }
    case OpKind::kIdentity:
      return {x};
    case OpKind::kScale: {
      HostTensor y = x;
      const double factor = op.attrs_as<graph::ScaleAttrs>().factor;
      for (float& v : y.data) v = static_cast<float>(v * factor);
      return {y};
    }
    case OpKind::kPad: {
      const auto& a = op.attrs_as<graph::PadAttrs>();
      if (a.reflect) {
        const Nchw in(x.shape);
        HostTensor y = zeros(Shape{in.n, in.c, in.h + a.pads.top + a.pads.bottom, in.w + a.pads.left + a.pads.right});
        const Nchw out(y.shape);
        const auto mirror = [](int64_t i, int64_t size) { return i < 0 ? -i : i >= size ? 2 * (size - 1) - i : i; };
        for (int64_t n = 0; n < out.n; ++n)
          for (int64_t c = 0; c < out.c; ++c)
            for (int64_t r = 0; r < out.h; ++r)
              for (int64_t col = 0; col < out.w; ++col)
                y.data[out.at(n, c, r, col)] =
                    x.data[in.at(n, c, mirror(r - a.pads.top, in.h), mirror(col - a.pads.left, in.w))];
        return {y};
      }
      return {pad_constant(x, a.pads, static_cast<float>(a.value))};
    }
    case OpKind::kFlatten:
      return {flatten(x)};
    case OpKind::kLinear:
      return {linear(x, op.attrs_as<graph::LinearAttrs>(), weights_of(weights, op))};
    case OpKind::kSoftmax: {
      const auto& a = op.attrs_as<graph::SoftmaxAttrs>();
      if (a.hard) {  // 1 at the first largest element of each line along the axis
        HostTensor y = x;
        int64_t inner = 1;
        for (size_t d = static_cast<size_t>(a.axis) + 1; d < x.shape.rank(); ++d) inner *= x.shape[d];
        const int64_t n = x.shape[static_cast<size_t>(a.axis)];
        for (int64_t o = 0; o < x.shape.numel() / (n * inner); ++o) {
          for (int64_t j = 0; j < inner; ++j) {
            int64_t best = 0;
            for (int64_t k = 1; k < n; ++k) {
              if (x.data[static_cast<size_t>((o * n + k) * inner + j)] > x.data[static_cast<size_t>((o * n + best) * inner + j)]) best = k;
            }
            for (int64_t k = 0; k < n; ++k) y.data[static_cast<size_t>((o * n + k) * inner + j)] = k == best ? 1.0f : 0.0f;
          }
        }
        return {y};
      }
      HostTensor y = softmax(x, a.axis);
      if (a.log) {  // log of the double-precision softmax: the reference's accuracy is enough here
        for (float& v : y.data) v = static_cast<float>(std::log(static_cast<double>(v)));
      }
      return {y};
    }
    case OpKind::kClip: {
      const auto& a = op.attrs_as<graph::ClipAttrs>();
      HostTensor y = x;
      for (float& v : y.data) v = static_cast<float>(std::clamp(static_cast<double>(v), a.min, a.max));
      return {y};
    }
    case OpKind::kHardSigmoid: {
      const auto& a = op.attrs_as<graph::HardSigmoidAttrs>();
      HostTensor y = x;
      for (float& v : y.data) v = static_cast<float>(std::clamp(a.alpha * v + a.beta, 0.0, 1.0));
      return {y};
    }
    STAGECRAFT_PLAIN_ACTIVATION_KINDS:
      return {activate_all(x, graph::activation_of_kind(op.kind))};
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceSum:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd: {
      const auto& axes = op.attrs_as<graph::ReduceAttrs>().axes;
      Shape out_shape = x.shape;
      for (int64_t a : axes) out_shape[static_cast<size_t>(a)] = 1;
      const bool max = op.kind == OpKind::kReduceMax, min = op.kind == OpKind::kReduceMin;
      const bool prod = op.kind == OpKind::kReduceProd;
      std::vector<double> acc(static_cast<size_t>(out_shape.numel()), max ? -1e300 : min ? 1e300 : prod ? 1.0 : 0.0);
      const size_t rank = x.shape.rank();
      for (int64_t i = 0; i < x.shape.numel(); ++i) {
        // The output element of input element i: its coordinates with the reduced ones at 0.
        int64_t rest = i, at = 0, stride = 1;
        for (size_t d = rank; d-- > 0;) {
          const int64_t coord = rest % x.shape[d];
          rest /= x.shape[d];
          at += (out_shape[d] == 1 ? 0 : coord) * stride;
          stride *= out_shape[d];
        }
        double& a = acc[static_cast<size_t>(at)];
        const double v = x.data[static_cast<size_t>(i)];
        a = max ? std::max(a, v) : min ? std::min(a, v) : prod ? a * v : a + v;
      }
      const double count = static_cast<double>(x.shape.numel() / out_shape.numel());
      HostTensor y = zeros(out_shape);
      for (size_t i = 0; i < acc.size(); ++i) {
        y.data[i] = static_cast<float>(op.kind == OpKind::kReduceMean ? acc[i] / count : acc[i]);
      }
      return {y};
    }
    case OpKind::kSpaceToDepth: {
      const int64_t b = op.attrs_as<graph::SpaceToDepthAttrs>().block;
      const Nchw in(x.shape);
      HostTensor y = zeros(Shape{in.n, in.c * b * b, in.h / b, in.w / b});
      const Nchw out(y.shape);
      for (int64_t n = 0; n < out.n; ++n)
        for (int64_t oc = 0; oc < out.c; ++oc)
          for (int64_t r = 0; r < out.h; ++r)
            for (int64_t col = 0; col < out.w; ++col) {
              const int64_t patch = oc / in.c, c = oc % in.c;
              y.data[out.at(n, oc, r, col)] = x.data[in.at(n, c, r * b + patch / b, col * b + patch % b)];
            }
      return {y};
    }
    case OpKind::kLayerNorm:
      return {layer_norm(x, op.attrs_as<graph::LayerNormAttrs>(), weights_of(weights, op))};
    case OpKind::kBinary:
      return {binary(srcs, op.attrs_as<graph::BinaryAttrs>(), weights, op)};
    case OpKind::kWhere:
      return {where(srcs, op.attrs_as<graph::WhereAttrs>(), weights, op)};
    case OpKind::kGridSample:
      return {grid_sample(x, *srcs[1], op.attrs_as<graph::GridSampleAttrs>())};
    case OpKind::kPoolNd:
      return {pool_nd(x, op.attrs_as<graph::PoolNdAttrs>())};
    case OpKind::kResizeNd:
      return {resize_nd(x, op.attrs_as<graph::ResizeNdAttrs>())};
    case OpKind::kGlobalMaxPool:
      return {global_max_pool(x)};
    case OpKind::kReshape: {
      const auto& a = op.attrs_as<graph::ReshapeAttrs>();
      std::vector<int64_t> dims;
      if (!a.full) dims.push_back(x.shape[0]);
      dims.insert(dims.end(), a.dims.begin(), a.dims.end());
      return {HostTensor{Shape(dims), x.data}};  // plain order is unchanged
    }
    case OpKind::kMatMul:
      return {matmul(x, *srcs[1])};
    case OpKind::kTranspose:
      return {transpose(x, op.attrs_as<graph::TransposeAttrs>().perm)};
    case OpKind::kNarrow: {
      const auto& a = op.attrs_as<graph::NarrowAttrs>();
      const AxisView v(x.shape, static_cast<size_t>(a.axis));
      Shape out = x.shape;
      out[static_cast<size_t>(a.axis)] = a.end - a.begin;
      HostTensor y = zeros(out);
      size_t k = 0;
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t e = a.begin; e < a.end; ++e)
          for (int64_t i = 0; i < v.inner; ++i) y.data[k++] = x.data[static_cast<size_t>((o * v.extent + e) * v.inner + i)];
      return {y};
    }
    case OpKind::kConcatConstant: {
      const auto& a = op.attrs_as<graph::ConcatConstantAttrs>();
      const std::vector<float>& c = weights_of(weights, op).weight;
      const AxisView v(x.shape, static_cast<size_t>(a.axis));
      const int64_t per_sample = v.outer / x.shape[0];  // the constant's rows before the axis
      Shape out = x.shape;
      out[static_cast<size_t>(a.axis)] += a.count;
      HostTensor y = zeros(out);
      size_t k = 0;
      for (int64_t o = 0; o < v.outer; ++o) {
        const auto input = [&] {
          for (int64_t e = 0; e < v.extent * v.inner; ++e) y.data[k++] = x.data[static_cast<size_t>(o * v.extent * v.inner + e)];
        };
        const auto constant = [&] {
          for (int64_t e = 0; e < a.count * v.inner; ++e) y.data[k++] = c[static_cast<size_t>((o % per_sample) * a.count * v.inner + e)];
        };
        if (a.before) constant(), input();
        else input(), constant();
      }
      return {y};
    }
    case OpKind::kChannelShuffle:  // of the concatenation of its inputs
      return {channel_shuffle(srcs.size() == 1 ? x : concat(srcs), op.attrs_as<graph::ChannelShuffleAttrs>().groups)};
    case OpKind::kResize:
      return {resize(x, op.attrs_as<graph::ResizeAttrs>())};
    case OpKind::kLeakyRelu: {
      const double alpha = op.attrs_as<graph::LeakyReluAttrs>().alpha;
      HostTensor y = x;
      for (float& v : y.data) v = v >= 0 ? v : static_cast<float>(alpha * v);
      return {y};
    }
    case OpKind::kLrn: {  // ONNX's definition, in double
      const auto& a = op.attrs_as<graph::LrnAttrs>();
      const int64_t n = x.shape[0], c = x.shape[1], hw = x.shape[2] * x.shape[3];
      const int64_t before = (a.size - 1) / 2, after = a.size - 1 - before;
      HostTensor y = x;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t p = 0; p < hw; ++p) {
            double sum = 0;
            for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
              const double v = x.data[static_cast<size_t>((b * c + k) * hw + p)];
              sum += v * v;
            }
            const auto i = static_cast<size_t>((b * c + ch) * hw + p);
            y.data[i] = static_cast<float>(x.data[i] / std::pow(a.bias + a.alpha / static_cast<double>(a.size) * sum, a.beta));
          }
        }
      }
      return {y};
    }
    case OpKind::kUnary: {
      const auto& a = op.attrs_as<graph::UnaryAttrs>();
      HostTensor y = x;
      for (float& v : y.data) v = graph::apply_unary(a, v);
      return {y};
    }
  }
  throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): no reference"));
}

}  // namespace

HostTensor random_tensor(const graph::Shape& shape, uint64_t seed) {
  SplitMix64 rng(seed);
  HostTensor t = zeros(shape);
  for (float& v : t.data) {
    const auto k = static_cast<double>(rng.next() >> kRandomDiscardedBits);
    v = static_cast<float>(kRandomLow + k * kRandomStep);
  }
  return t;
}

std::vector<HostTensor> reference_run(const graph::Graph& graph, const graph::WeightStore& weights,
                                      const std::vector<HostTensor>& inputs) {
  graph::check_weights(graph, weights);
  const std::vector<graph::ValueId>& graph_inputs = graph.inputs();
  if (inputs.size() != graph_inputs.size()) {
    throw GraphError(cat("run graph '", graph.name(), "': it has ", graph_inputs.size(),
                         " input(s), got ", inputs.size()));
  }
  std::vector<HostTensor> values(graph.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const graph::Value& value = graph.value(graph_inputs[i]);
    const HostTensor& src = inputs[i];
    if (src.shape != value.desc.shape ||
        src.data.size() != static_cast<size_t>(src.shape.numel())) {
      throw GraphError(cat("run graph '", graph.name(), "': input '", value.name, "' is ",
                           src.shape.to_string(), " with ", src.data.size(), " values, expected ",
                           value.desc.shape.to_string()));
    }
    values[static_cast<size_t>(value.id)] = src;
  }
  for (graph::OpId id : graph.topological_order()) {
    const Op& op = graph.op(id);
    std::vector<const HostTensor*> srcs;
    for (graph::ValueId v : op.inputs) srcs.push_back(&values[static_cast<size_t>(v)]);
    std::vector<HostTensor> dsts = evaluate(op, srcs, weights);
    assert(dsts.size() == op.outputs.size());
    for (size_t i = 0; i < dsts.size(); ++i) {
      const graph::Value& value = graph.value(op.outputs[i]);
      if (dsts[i].shape != value.desc.shape) {
        throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): reference output ", i,
                             " is ", dsts[i].shape.to_string(), " but the graph says ",
                             value.desc.shape.to_string()));
      }
      values[static_cast<size_t>(value.id)] = std::move(dsts[i]);
    }
  }
  std::vector<HostTensor> outputs;
  for (graph::ValueId v : graph.outputs()) outputs.push_back(values[static_cast<size_t>(v)]);
  return outputs;
}

double max_relative_error(const HostTensor& got, const HostTensor& want) {
  // The executor's definition; kept under this name for the reference's own tests.
  if (got.data.size() != static_cast<size_t>(got.shape.numel())) {
    return std::numeric_limits<double>::infinity();
  }
  return relative_error(got, want);
}

}  // namespace stagecraft::executor::testing
