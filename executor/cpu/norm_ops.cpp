// Layer normalisation over channels on the CPU: our own host kernel in every CPU layout (oneDNN's
// layer normalisation normalises the innermost dimension only, which is the channels in nhwc and
// nothing else). Pixels are taken in tiles; per tile the channel sums, then the centred squares
// (two passes: no cancellation), then the output are computed reading the channels in the
// layout's order, so the inner loops run over contiguous memory in nchw (pixels) and in nhwc and
// blocked layouts (channels of a pixel); where both layouts keep a pixel's channels together
// (nhwc, a row-major tensor's rows), pixel by pixel. Images × tiles are spread over the threads,
// each tile compiled for AVX2 + FMA where the CPU has them. On a 2-core AMD Zen 4, a [3136, 96]
// row-major layer norm (Swin-T's first stage) took 204 us before these paths, 102-128 after.
#include <algorithm>
#include <cmath>
#include <memory>

#include "common/strings.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/host_simd.h"
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

// Adds f(p, x) over the channels of each pixel p of a tile into acc[p][lane], reading each group
// of channels that sit together at a pixel contiguously. Each lane is a sum of its own, so the
// compiler vectorises the adds without reordering any one sum.
template <int kLanes, class T, class F>
void lane_sums(const HostLayout& g, const float* image, int64_t p0, int64_t count, T (*acc)[kLanes], F&& f) {
  const int64_t group = g.group();
  for (int64_t first = 0; first < g.channels; first += group) {
    const float* base = image + g.channel_offset(first);
    const int64_t width = std::min(group, g.channels - first), whole = width / kLanes * kLanes;
    for (int64_t p = 0; p < count; ++p) {
      const float* at = base + (p0 + p) * g.pixel_stride;
      T* a = acc[p];
      for (int64_t j = 0; j < whole; j += kLanes) {
        for (int l = 0; l < kLanes; ++l) a[l] += f(p, at[j + l]);
      }
      for (int64_t j = whole; j < width; ++j) a[j - whole] += f(p, at[j]);
    }
  }
}

template <int kLanes, class T>
double lane_total(const T* lanes) {
  double total = 0;
  for (int l = 0; l < kLanes; ++l) total += static_cast<double>(lanes[l]);
  return total;
}

// The output of a tile, channel group by group in the destination's layout; the source is read
// at the same logical element, wherever its layout keeps it (contiguously when the layouts match).
void normalise_tile(const LayerNorm& ln, const float* image, float* result, int64_t p0, int64_t count,
                    const float* mean, const float* inv_std) {
  const HostLayout &s = ln.src, &d = ln.dst;
  const int64_t group = d.group();
  const bool same = s.layout == d.layout && group > 1;
  for (int64_t first = 0; first < d.padded_channels; first += group) {
    const int64_t width = std::clamp<int64_t>(d.channels - first, 0, group);
    const float* gamma = ln.gamma.data() + first;
    const float* beta = ln.beta.data() + first;
    for (int64_t p = 0; p < count; ++p) {
      float* at = result + d.channel_offset(first) + (p0 + p) * d.pixel_stride;
      if (same) {
        const float* x = image + s.channel_offset(first) + (p0 + p) * s.pixel_stride;
        for (int64_t j = 0; j < width; ++j) at[j] = (x[j] - mean[p]) * inv_std[p] * gamma[j] + beta[j];
      } else {
        for (int64_t j = 0; j < width; ++j) {
          const float v = image[s.channel_offset(first + j) + (p0 + p) * s.pixel_stride];
          at[j] = (v - mean[p]) * inv_std[p] * gamma[j] + beta[j];
        }
      }
      std::fill(at + width, at + group, 0.0f);  // the padding lanes of a blocked destination
    }
  }
}

// Channels up to which a pixel's sums are kept in float lanes (each lane then sums at most 256
// values); above, in double: a row of 200k elements (GroupNorm(1, C) over a whole feature map)
// loses 1e-4 of its normalised values to float accumulation.
constexpr int64_t kFloatSumsUpTo = 4096;

// Tile `t` (image t / tiles, pixels from t % tiles * kTile) of the layer norm, with sums in
// kLanes lanes of type T.
template <int kLanes, class T>
void normalise_tile_in(const LayerNorm& ln, const float* in, float* out, int64_t t, int64_t tiles) {
  const HostLayout &s = ln.src, &d = ln.dst;
  const double inv_c = 1.0 / static_cast<double>(s.channels);
  const int64_t n = t / tiles, p0 = t % tiles * kTile, count = std::min(kTile, s.pixels - p0);
  const float* image = in + n * s.batch_stride;
  T acc[kTile][kLanes] = {};
  lane_sums<kLanes>(s, image, p0, count, acc, [](int64_t, float v) { return static_cast<T>(v); });
  T mean[kTile];
  float mean_f[kTile];
  for (int64_t p = 0; p < count; ++p) {
    mean[p] = static_cast<T>(lane_total<kLanes>(acc[p]) * inv_c);
    mean_f[p] = static_cast<float>(mean[p]);
    std::fill(acc[p], acc[p] + kLanes, T(0));
  }
  lane_sums<kLanes>(s, image, p0, count, acc, [&](int64_t p, float v) {
    const T c = static_cast<T>(v) - mean[p];
    return c * c;
  });
  float inv_std[kTile];
  for (int64_t p = 0; p < count; ++p) {
    inv_std[p] = static_cast<float>(1.0 / std::sqrt(lane_total<kLanes>(acc[p]) * inv_c + ln.eps));
  }
  normalise_tile(ln, image, out + n * d.batch_stride, p0, count, mean_f, inv_std);
}

// The tile where source and destination keep each pixel's channels together (nhwc, a row-major
// tensor's rows): pixel by pixel, the channels' sum in kRowLanes float lanes, then the centred
// squares, then the output, each a pass over the pixel's contiguous channels (in L1).
constexpr int kRowLanes = 16;
// The lanes' total by pairwise halving.
inline float tree_sum(float (&lanes)[kRowLanes]) {
  for (int width = kRowLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}
void normalise_rows(const LayerNorm& ln, const float* in, float* out, int64_t t, int64_t tiles) {
  const HostLayout &s = ln.src, &d = ln.dst;
  const int64_t c = s.channels, whole = c / kRowLanes * kRowLanes;
  const double inv_c = 1.0 / static_cast<double>(c);
  const int64_t n = t / tiles, p0 = t % tiles * kTile, count = std::min(kTile, s.pixels - p0);
  const float* gamma = ln.gamma.data();
  const float* beta = ln.beta.data();
  for (int64_t p = p0; p < p0 + count; ++p) {
    const float* x = in + n * s.batch_stride + p * s.pixel_stride;
    float* y = out + n * d.batch_stride + p * d.pixel_stride;
    float lanes[kRowLanes] = {};
    for (int64_t j = 0; j < whole; j += kRowLanes)
      for (int l = 0; l < kRowLanes; ++l) lanes[l] += x[j + l];
    float sum = tree_sum(lanes);
    for (int64_t j = whole; j < c; ++j) sum += x[j];
    const float mean = static_cast<float>(sum * inv_c);
    float squares[kRowLanes] = {};
    for (int64_t j = 0; j < whole; j += kRowLanes) {
      for (int l = 0; l < kRowLanes; ++l) {
        const float centred = x[j + l] - mean;
        squares[l] += centred * centred;
      }
    }
    float var = tree_sum(squares);
    for (int64_t j = whole; j < c; ++j) var += (x[j] - mean) * (x[j] - mean);
    const float inv_std = static_cast<float>(1.0 / std::sqrt(var * inv_c + ln.eps));
    for (int64_t j = 0; j < c; ++j) y[j] = (x[j] - mean) * inv_std * gamma[j] + beta[j];
  }
}

void normalise_tile_of(const LayerNorm& ln, const float* in, float* out, int64_t t, int64_t tiles) {
  const bool rows = ln.src.layout == graph::Layout::kNHWC && ln.dst.layout == graph::Layout::kNHWC;
  if (rows && ln.src.channels <= kFloatSumsUpTo) {
    normalise_rows(ln, in, out, t, tiles);
  } else if (ln.src.channels <= kFloatSumsUpTo) {
    normalise_tile_in<16, float>(ln, in, out, t, tiles);
  } else {
    normalise_tile_in<8, double>(ln, in, out, t, tiles);
  }
}

#ifdef STAGECRAFT_HOST_AVX2
// The same tile with every call inlined and compiled for AVX2 + FMA (four doubles, eight floats
// per operation instead of SSE2's two and four).
__attribute__((target("avx2,fma"), flatten)) void normalise_tile_avx2(const LayerNorm& ln, const float* in,
                                                                      float* out, int64_t t, int64_t tiles) {
  normalise_tile_of(ln, in, out, t, tiles);
}
#endif

void run_layer_norm(const LayerNorm& ln, const float* in, float* out) {
  const HostLayout& s = ln.src;
  const int64_t tiles = (s.pixels + kTile - 1) / kTile;
  auto* tile = &normalise_tile_of;
#ifdef STAGECRAFT_HOST_AVX2
  if (host_has_avx2()) tile = &normalise_tile_avx2;
#endif
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < s.images * tiles; ++t) tile(ln, in, out, t, tiles);
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
