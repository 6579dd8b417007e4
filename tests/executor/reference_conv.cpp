// The reference's loops for the convolutions' ops on logical NCHW tensors (see reference.h):
// padding, convolution and its transpose, batch and layer normalisation, the pools, add, the
// channel ops (shuffle, slice, concat) and PyTorch's resizes.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "common/strings.h"
#include "graph/errors.h"
#include "graph/shape_inference.h"
#include "tests/executor/reference_detail.h"

namespace stagecraft::executor::testing::detail {

using graph::Activation;
using graph::GraphError;
using graph::OpWeights;
using graph::Pads;
using graph::Shape;

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
                  const HostTensor* residual) {
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

}  // namespace stagecraft::executor::testing::detail
