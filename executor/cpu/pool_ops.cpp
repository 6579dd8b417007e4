// Pooling: max, average (with or without the padding counted), global average and max on oneDNN;
// f32 max pooling in the channel-innermost layouts (nhwc, nChw8c, nChw16c) on our own host kernel.
// oneDNN 2.6's jit:avx2 max pooling is 2.5-4x slower than ONNX Runtime's (measured here, AMD
// EPYC AVX2, 2 threads: 64x112x112 3x3/2 411 us against ORT's 149-170 us; inception_v3's first
// max pool 730 us against 170 us); ours reads each window as runs of contiguous channels, on AVX2
// CPUs separably (rows, then columns: 3x3/2 over 24x112x112 87 -> 48 us in a standalone
// interleaved comparison of the two loops, 2 threads).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>


#include "common/strings.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/host_simd.h"
#include "executor/cpu/ops.h"
#include "executor/op_rules.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;

// Window, stride and padding of a pooling op, and its algorithm.
struct Window {
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  graph::Hw kernel, stride;
  graph::Pads padding;
};

Window window_of(const KernelSpec& spec) {
  switch (spec.kind) {
    case graph::OpKind::kMaxPool: {
      const auto& a = std::get<graph::MaxPoolAttrs>(spec.attrs);
      return {dnnl::algorithm::pooling_max, a.kernel, a.stride, a.padding};
    }
    case graph::OpKind::kAvgPool: {
      const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
      return {a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                  : dnnl::algorithm::pooling_avg_exclude_padding,
              a.kernel, a.stride, a.padding};
    }
    default: {  // global average or max
      const graph::Shape& s = spec.srcs[0].shape;
      return {spec.kind == graph::OpKind::kGlobalMaxPool ? dnnl::algorithm::pooling_max
                                                         : dnnl::algorithm::pooling_avg_exclude_padding,
              graph::Hw{s[2], s[3]}, graph::Hw{1, 1}, graph::Pads{}};
    }
  }
}

// Right/bottom padding oneDNN needs beyond the op's own for this output size (ceil mode).
std::pair<int64_t, int64_t> extra_right_pad(const graph::Shape& in, const graph::Shape& out,
                                            const Window& w) {
  const int64_t need_b = (out[2] - 1) * w.stride.h + w.kernel.h - in[2] - w.padding.top;
  const int64_t need_r = (out[3] - 1) * w.stride.w + w.kernel.w - in[3] - w.padding.left;
  return {std::max<int64_t>(0, need_b - w.padding.bottom),
          std::max<int64_t>(0, need_r - w.padding.right)};
}

// ---- Our max pooling ----------------------------------------------------------------------
// Every pixel of nhwc, nChw8c and nChw16c holds a run of channels ("lanes": all C in nhwc, one
// block in the blocked layouts): an output run is the lane-wise max of the window's input runs.

bool host_max_pool(const KernelSpec& spec) {
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  const graph::Layout l = in.layout;
  return spec.kind == graph::OpKind::kMaxPool && in.dtype == graph::DataType::kF32 &&
         out.dtype == graph::DataType::kF32 && l == out.layout && in.shape.rank() == 4 &&
         (l == graph::Layout::kNHWC || l == graph::Layout::kNChw8c || l == graph::Layout::kNChw16c);
}

struct MaxPool {
  HostLayout src, dst;
  Window w;
  int64_t lanes = 0;   // channels at one pixel
  int64_t planes = 0;  // images x channel blocks (blocked), images (nhwc)
  int64_t src_plane = 0, dst_plane = 0;  // distance between two planes
};

// max that keeps a NaN of either side, as PyTorch's max pooling does; vectorises (compare, blend).
inline float nan_max(float acc, float v) { return (v > acc || v != v) ? v : acc; }

// One output run of `n` (<= kMax) lanes: the window [y0, y1) x [x0, x1) of `in`.
template <int64_t kMax>
inline __attribute__((always_inline)) void window_max(const float* in, int64_t row, int64_t lanes,
                                                     int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                                                     int64_t n, float* out) {
  float acc[kMax];
#pragma omp simd
  for (int64_t l = 0; l < kMax; ++l) acc[l] = -std::numeric_limits<float>::infinity();
  for (int64_t y = y0; y < y1; ++y) {
    for (int64_t x = x0; x < x1; ++x) {
      const float* v = in + (y * row + x) * lanes;
      if (n == kMax) {
#pragma omp simd
        for (int64_t l = 0; l < kMax; ++l) acc[l] = nan_max(acc[l], v[l]);
      } else {
        for (int64_t l = 0; l < n; ++l) acc[l] = nan_max(acc[l], v[l]);
      }
    }
  }
  if (n == kMax) {
#pragma omp simd
    for (int64_t l = 0; l < kMax; ++l) out[l] = acc[l];
  } else {
    for (int64_t l = 0; l < n; ++l) out[l] = acc[l];
  }
}

// One output row of one plane, lanes processed in runs of kRun.
template <int64_t kRun>
inline __attribute__((always_inline)) void max_pool_row(const MaxPool& m, const float* in, float* out,
                                                       int64_t oy) {
  const Window& w = m.w;
  const int64_t y0 = oy * w.stride.h - w.padding.top;
  const int64_t ylo = std::max<int64_t>(0, y0), yhi = std::min(m.src.height, y0 + w.kernel.h);
  for (int64_t ox = 0; ox < m.dst.width; ++ox) {
    const int64_t x0 = ox * w.stride.w - w.padding.left;
    const int64_t xlo = std::max<int64_t>(0, x0), xhi = std::min(m.src.width, x0 + w.kernel.w);
    float* o = out + (oy * m.dst.width + ox) * m.lanes;
    for (int64_t l = 0; l < m.lanes; l += kRun) {
      window_max<kRun>(in + l, m.src.width, m.lanes, ylo, yhi, xlo, xhi, std::min(kRun, m.lanes - l),
                       o + l);
    }
  }
}

#ifdef STAGECRAFT_HOST_AVX2
// max of 8 lanes keeping a NaN of either side: vmaxps returns its second operand when either is
// NaN, so one of the two orders is the NaN, and OR-ing a NaN's bits into a number gives a NaN
// (all exponent bits, a non-zero fraction); without NaNs both orders are the max (of +0 and -0
// either zero).
__attribute__((target("avx2"))) inline __m256 nan_max8(__m256 a, __m256 b) {
  return _mm256_or_ps(_mm256_max_ps(a, b), _mm256_max_ps(b, a));
}

// One output row of one plane, lanes a multiple of 8, separably: the max over the window's rows
// for each input column the row needs (into `cols`), then over each window's columns. A 3x3/2
// window costs about 24 vector operations per output instead of 36.
__attribute__((target("avx2"))) void max_pool_row_avx2(const MaxPool& m, const float* in, float* out,
                                                      int64_t oy, float* cols) {
  const Window& w = m.w;
  const int64_t lanes = m.lanes, width = m.src.width;
  const int64_t y0 = oy * w.stride.h - w.padding.top;
  const int64_t ylo = std::max<int64_t>(0, y0), yhi = std::min(m.src.height, y0 + w.kernel.h);
  const int64_t xb = std::min(width, (m.dst.width - 1) * w.stride.w - w.padding.left + w.kernel.w);
  if (ylo >= yhi) {  // a window of padding only
    std::fill(out + oy * m.dst.width * lanes, out + (oy + 1) * m.dst.width * lanes,
              -std::numeric_limits<float>::infinity());
    return;
  }
  for (int64_t x = 0; x < xb; ++x) {  // the input columns the row's windows cover
    for (int64_t l = 0; l < lanes; l += 8) {
      const float* v = in + (ylo * width + x) * lanes + l;
      __m256 acc = _mm256_loadu_ps(v);
      for (int64_t y = ylo + 1; y < yhi; ++y) acc = nan_max8(acc, _mm256_loadu_ps(v + (y - ylo) * width * lanes));
      _mm256_storeu_ps(cols + x * lanes + l, acc);
    }
  }
  for (int64_t ox = 0; ox < m.dst.width; ++ox) {
    const int64_t x0 = ox * w.stride.w - w.padding.left;
    const int64_t xlo = std::max<int64_t>(0, x0), xhi = std::min(width, x0 + w.kernel.w);
    float* o = out + (oy * m.dst.width + ox) * lanes;
    for (int64_t l = 0; l < lanes; l += 8) {
      __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
      if (xlo < xhi) {
        acc = _mm256_loadu_ps(cols + xlo * lanes + l);
        for (int64_t x = xlo + 1; x < xhi; ++x) acc = nan_max8(acc, _mm256_loadu_ps(cols + x * lanes + l));
      }
      _mm256_storeu_ps(o + l, acc);
    }
  }
}


void run_max_pool_avx2(const MaxPool& m, const float* in, float* out) {
  const int64_t rows = m.planes * m.dst.height;
  const size_t col_floats = static_cast<size_t>(m.src.width * m.lanes);
#pragma omp parallel
  {
    std::vector<float> cols(col_floats);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < rows; ++t) {
      const int64_t p = t / m.dst.height, oy = t % m.dst.height;
      max_pool_row_avx2(m, in + p * m.src_plane, out + p * m.dst_plane, oy, cols.data());
    }
  }
}
#endif

// The window-by-window loop (lanes that are not a multiple of 8, or a CPU without AVX2), compiled
// for AVX2 and for the baseline and chosen at run time (host_has_avx2). Not target_clones: its
// ifunc resolvers (the OpenMP body's too) run during relocation, before ThreadSanitizer's runtime
// starts, and crashed every TSAN build before main (scripts/tsan.sh).
inline __attribute__((always_inline)) void max_pool_direct(const MaxPool& m, const float* in, float* out) {
  const int64_t rows = m.planes * m.dst.height;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t p = t / m.dst.height, oy = t % m.dst.height;
    const float* i = in + p * m.src_plane;
    float* o = out + p * m.dst_plane;
    if (m.lanes == 8) {
      max_pool_row<8>(m, i, o, oy);
    } else if (m.lanes == 16) {
      max_pool_row<16>(m, i, o, oy);
    } else {
      max_pool_row<32>(m, i, o, oy);
    }
  }
}

void run_max_pool_direct(const MaxPool& m, const float* in, float* out) { max_pool_direct(m, in, out); }

#ifdef STAGECRAFT_HOST_AVX2
__attribute__((target("avx2"))) void run_max_pool_direct_avx2(const MaxPool& m, const float* in, float* out) {
  max_pool_direct(m, in, out);
}
#endif

void run_max_pool(const MaxPool& m, const float* in, float* out) {
#ifdef STAGECRAFT_HOST_AVX2
  if (host_has_avx2()) {
    if (m.lanes % 8 == 0) {
      run_max_pool_avx2(m, in, out);
    } else {
      run_max_pool_direct_avx2(m, in, out);
    }
    return;
  }
#endif
  run_max_pool_direct(m, in, out);
}

std::shared_ptr<MaxPool> max_pool_of(const KernelSpec& spec, const Window& w) {
  auto m = std::make_shared<MaxPool>();
  m->src = host_layout(spec.srcs[0]);
  m->dst = host_layout(spec.dsts[0]);
  m->w = w;
  m->lanes = m->src.group();  // block, or all channels (nhwc)
  const bool blocked = m->src.block > 0;
  m->planes = m->src.images * (blocked ? m->src.padded_channels / m->src.block : 1);
  m->src_plane = blocked ? m->src.pixels * m->src.block : m->src.batch_stride;
  m->dst_plane = blocked ? m->dst.pixels * m->dst.block : m->dst.batch_stride;
  return m;
}

dnnl::pooling_v2_forward::primitive_desc pool_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const Window w = window_of(spec);
  const auto [extra_b, extra_r] = extra_right_pad(spec.srcs[0].shape, spec.dsts[0].shape, w);
  dnnl::pooling_v2_forward::desc d(
      dnnl::prop_kind::forward_inference, w.alg, md(spec.srcs[0]), md(spec.dsts[0]),
      {w.stride.h, w.stride.w}, {w.kernel.h, w.kernel.w}, {0, 0}, {w.padding.top, w.padding.left},
      {w.padding.bottom + extra_b, w.padding.right + extra_r});
  return {d, make_attr(), ctx.engine};
}

using PoolState = PdState<dnnl::pooling_v2_forward::primitive_desc>;

constexpr const char* kHostMaxPool = "max pool (ours)";

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (Support s = same_layout_support(spec); !s.runnable()) return s;
  if (host_max_pool(spec)) return described(kHostMaxPool, "", 0);
  if (spec.kind == graph::OpKind::kAvgPool) {
    const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
    if (a.ceil_mode && a.count_include_pad &&
        extra_right_pad(spec.srcs[0].shape, spec.dsts[0].shape, window_of(spec)) !=
            std::pair<int64_t, int64_t>{0, 0}) {
      return Support::unsupported(SupportReason::kAttributes,
                                  "average pooling with ceil_mode and count_include_pad whose last "
                                  "window passes the padding is not supported");
    }
  }
  auto pd = pool_pd(spec, ctx);
  return described(pd.impl_info_str(),
                   cat(graph::to_string(spec.kind), " in ", graph::to_string(spec.srcs[0].layout)),
                   workspace_of(pd), std::make_shared<PoolState>(pd));
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext&) {
  if (host_max_pool(spec)) {
    auto m = max_pool_of(spec, window_of(spec));
    return k.add_host_f32([m](const float* from, float* to) { run_max_pool(*m, from, to); },
                          kHostMaxPool);
  }
  const auto& pd = state_of<PoolState>(desc, spec).pd;
  k.add({dnnl::pooling_v2_forward(pd),
         {{DNNL_ARG_SRC, 0, md(spec.srcs[0])}, {DNNL_ARG_DST, dst_slot(0), md(spec.dsts[0])}}},
        scratch(pd));
  return pd.impl_info_str();
}

}  // namespace

const OpFamily kPoolingFamily{
    "pooling",
    {graph::OpKind::kMaxPool, graph::OpKind::kAvgPool, graph::OpKind::kGlobalAvgPool,
     graph::OpKind::kGlobalMaxPool},
    check,
    build};

}  // namespace stagecraft::executor::cpu
