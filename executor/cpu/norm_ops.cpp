// Layer normalisation over channels on the CPU: our own host kernel in every CPU layout (oneDNN's
// layer normalisation normalises the innermost dimension only, which is the channels in nhwc and
// nothing else). Pixels are taken in tiles; per tile the channel sums, then the centred squares
// (two passes: no cancellation), then the output are computed reading the channels in the
// layout's order, so the inner loops run over contiguous memory in nchw (pixels) and in nhwc and
// blocked layouts (channels of a pixel). Images × tiles are spread over the threads.
#include <algorithm>
#include <cmath>
#include <memory>

#include "common/strings.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

using graph::OpKind;

constexpr int64_t kTile = 64;  // pixels normalised together

struct LayerNorm {
  HostLayout src, dst;
  std::vector<float> gamma, beta;
  float eps = 1e-5f;
};

// The geometry of a rank-2 [N, C] tensor, or of a row-major one normalised over its last axis,
// as a rank-4 one of one pixel per row (channels contiguous).
HostLayout geometry(const graph::TensorDesc& d) {
  if (graph::takes_layouts(d)) return host_layout(d);
  graph::TensorDesc as4 = d;
  const int64_t c = d.shape[d.shape.rank() - 1];
  as4.shape = graph::Shape{d.shape.numel() / c, c, 1, 1};
  as4.layout = graph::Layout::kNHWC;
  return host_layout(as4);
}

// Adds f(channel c, its value at each pixel of the tile) over the channels of a tile, reading in
// the layout's order: acc[p] += f(c, x[c][p]).
template <class F>
void over_channels(const HostLayout& g, const float* image, int64_t p0, int64_t count, F&& f) {
  const int64_t group = g.group();
  for (int64_t first = 0; first < g.channels; first += group) {
    const float* base = image + g.channel_offset(first);
    const int64_t width = std::min(group, g.channels - first);
    for (int64_t p = 0; p < count; ++p) {
      const float* at = base + (p0 + p) * g.pixel_stride;
      for (int64_t j = 0; j < width; ++j) f(p, first + j, at[j]);
    }
  }
}

void run_layer_norm(const LayerNorm& ln, const float* in, float* out) {
  const HostLayout &s = ln.src, &d = ln.dst;
  const int64_t tiles = (s.pixels + kTile - 1) / kTile;
  const double inv_c = 1.0 / static_cast<double>(s.channels);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < s.images * tiles; ++t) {
    const int64_t n = t / tiles, p0 = t % tiles * kTile, count = std::min(kTile, s.pixels - p0);
    const float* image = in + n * s.batch_stride;
    float* result = out + n * d.batch_stride;
    // Sums in double: a row of 200k elements (GroupNorm(1, C) over a whole feature map) loses
    // 1e-4 of its normalised values to float accumulation.
    double sum[kTile] = {}, var[kTile] = {};
    over_channels(s, image, p0, count, [&](int64_t p, int64_t, float v) { sum[p] += v; });
    float mean[kTile];
    for (int64_t p = 0; p < count; ++p) mean[p] = static_cast<float>(sum[p] * inv_c);
    over_channels(s, image, p0, count, [&](int64_t p, int64_t, float v) {
      const double c = static_cast<double>(v) - sum[p] * inv_c;
      var[p] += c * c;
    });
    float inv_std[kTile];
    for (int64_t p = 0; p < count; ++p) inv_std[p] = static_cast<float>(1.0 / std::sqrt(var[p] * inv_c + ln.eps));
    // The output, channel group by group in the destination's layout (the source is read at the
    // same logical element, wherever its layout keeps it).
    const int64_t group = d.group();
    for (int64_t first = 0; first < d.padded_channels; first += group) {
      for (int64_t p = 0; p < count; ++p) {
        float* at = result + d.channel_offset(first) + (p0 + p) * d.pixel_stride;
        for (int64_t j = 0; j < group; ++j) {
          const int64_t c = first + j;
          if (c >= d.channels) {  // the padding lanes of a blocked destination
            at[j] = 0.0f;
            continue;
          }
          const float v = image[s.channel_offset(c) + (p0 + p) * s.pixel_stride];
          at[j] = (v - mean[p]) * inv_std[p] * ln.gamma[static_cast<size_t>(c)] + ln.beta[static_cast<size_t>(c)];
        }
      }
    }
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  return host_kernel_desc(spec, "layer_norm host", /*rank2=*/true);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  auto ln = std::make_shared<LayerNorm>();
  ln->src = geometry(spec.srcs[0]);
  ln->dst = geometry(spec.dsts[0]);
  ln->gamma = spec.weights->gamma;
  ln->beta = spec.weights->beta;
  ln->eps = static_cast<float>(std::get<graph::LayerNormAttrs>(spec.attrs).eps);
  return k.add_host_f32([ln](const float* from, float* to) { run_layer_norm(*ln, from, to); },
                        "layer_norm host");
}

}  // namespace

const OpFamily kNormalisationFamily{"normalisation", {OpKind::kLayerNorm}, check, build};

}  // namespace stagecraft::executor::cpu
