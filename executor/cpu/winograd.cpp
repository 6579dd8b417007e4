// Winograd F(m x m, 3 x 3) convolutions on AVX2 + FMA (see winograd.h).
//
// Per run: the output is cut into tiles of m x m, tiles into blocks of kBlockTiles (a block's
// transformed input, alpha^2 x tiles x in-channels, stays in the core's L2 cache). For each block:
//   1. input transform: each tile's alpha x alpha x 8-channel patches -> V[xi][tile][in channel]
//   2. products, per chunk of output channels: M[xi][tile][out] = V[xi] (tiles x in) U[xi] (in x out)
//      on a register tile of 6 tiles x 16 output channels (12 accumulators)
//   3. output transform of the chunk: Y = A^T M A, + bias (+ residual), activation, stored.
// Work items are blocks (and, when there are fewer blocks than threads, chunks of output channels
// of a block); each thread has its own V and M in the workspace.
#include "executor/cpu/winograd.h"

#include <omp.h>

#include <algorithm>

#include "common/strings.h"
#include "executor/cpu/host_simd.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr int64_t kLanes = 8;       // channels per vector
constexpr int64_t kRows = 6;        // tiles per register tile
constexpr int64_t kPanel = 16;      // output channels per register tile (2 vectors)
constexpr int64_t kBlockTiles = 12; // tiles per block
constexpr int64_t kChunk = 64;      // output channels per product chunk

// G of F(m, 3): the weight transform, alpha x 3 (in double: weights are transformed once).
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output channels of panel `p` (16, the last one 8 when out-channels % 16 == 8).
int64_t panel_width(int64_t out_channels, int64_t p) {
  return std::min(kPanel, out_channels - p * kPanel);
}

}  // namespace

#ifdef STAGECRAFT_HOST_AVX2
namespace {

#define STAGECRAFT_AVX2_FMA __attribute__((target("avx2,fma")))

// ---- Transforms of 1-D columns of vectors (alpha in, alpha out / m out) --------------------

// B^T x of F(2, 3): alpha 4.
STAGECRAFT_AVX2_FMA inline void input_1d(const __m256 (&d)[4], __m256 (&t)[4]) {
  t[0] = _mm256_sub_ps(d[0], d[2]);
  t[1] = _mm256_add_ps(d[1], d[2]);
  t[2] = _mm256_sub_ps(d[2], d[1]);
  t[3] = _mm256_sub_ps(d[1], d[3]);
}

// B^T x of F(4, 3): alpha 6.
STAGECRAFT_AVX2_FMA inline void input_1d(const __m256 (&d)[6], __m256 (&t)[6]) {
  const __m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
  const __m256 d4_d2 = _mm256_sub_ps(d[4], d[2]);  // d4 - d2
  const __m256 d3_d1 = _mm256_sub_ps(d[3], d[1]);  // d3 - d1
  // t0 = 4 d0 - 5 d2 + d4
  t[0] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[2], _mm256_mul_ps(four, d[0])), d[4]);
  // t1 = -4 (d1 + d2) + d3 + d4 ; t2 = 4 (d1 - d2) - d3 + d4
  t[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
  t[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
  // t3 = 2 (d3 - d1) + d4 - d2 ; t4 = -2 (d3 - d1) + d4 - d2
  t[3] = _mm256_fmadd_ps(two, d3_d1, d4_d2);
  t[4] = _mm256_fnmadd_ps(two, d3_d1, d4_d2);
  // t5 = 4 d1 - 5 d3 + d5
  t[5] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[3], _mm256_mul_ps(four, d[1])), d[5]);
}

// A^T x of F(2, 3): 4 in, 2 out.
STAGECRAFT_AVX2_FMA inline void output_1d(const __m256 (&m)[4], __m256 (&y)[2]) {
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[1]), m[2]);
  y[1] = _mm256_sub_ps(_mm256_sub_ps(m[1], m[2]), m[3]);
}

// A^T x of F(4, 3): 6 in, 4 out.
STAGECRAFT_AVX2_FMA inline void output_1d(const __m256 (&m)[6], __m256 (&y)[4]) {
  const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f), eight = _mm256_set1_ps(8.0f);
  const __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
  const __m256 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
  y[1] = _mm256_fmadd_ps(two, d34, d12);
  y[2] = _mm256_fmadd_ps(four, s34, s12);
  y[3] = _mm256_add_ps(_mm256_fmadd_ps(eight, d34, d12), m[5]);
}

// ---- The products ---------------------------------------------------------------------------

// c[r][0..8*kNv) = sum_k a[r * lda + k] * b[k * 8 * kNv + ...] for r < kR (c overwritten).
template <int kR, int kNv>
STAGECRAFT_AVX2_FMA inline void product_tile(const float* a, int64_t lda, const float* b, int64_t depth,
                                             float* c, int64_t ldc) {
  __m256 acc[kR][kNv];
#pragma GCC unroll 6
  for (int r = 0; r < kR; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < kNv; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    __m256 bv[kNv];
#pragma GCC unroll 2
    for (int j = 0; j < kNv; ++j) bv[j] = _mm256_loadu_ps(b + k * kLanes * kNv + j * kLanes);
#pragma GCC unroll 6
    for (int r = 0; r < kR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 2
      for (int j = 0; j < kNv; ++j) acc[r][j] = _mm256_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < kR; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < kNv; ++j) _mm256_storeu_ps(c + r * ldc + j * kLanes, acc[r][j]);
}

template <int kNv>
STAGECRAFT_AVX2_FMA void product_rows(int64_t rows, const float* a, int64_t lda, const float* b,
                                      int64_t depth, float* c, int64_t ldc) {
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) product_tile<kRows, kNv>(a + r * lda, lda, b, depth, c + r * ldc, ldc);
  switch (rows - r) {
    case 1: product_tile<1, kNv>(a + r * lda, lda, b, depth, c + r * ldc, ldc); break;
    case 2: product_tile<2, kNv>(a + r * lda, lda, b, depth, c + r * ldc, ldc); break;
    case 3: product_tile<3, kNv>(a + r * lda, lda, b, depth, c + r * ldc, ldc); break;
    case 4: product_tile<4, kNv>(a + r * lda, lda, b, depth, c + r * ldc, ldc); break;
    case 5: product_tile<5, kNv>(a + r * lda, lda, b, depth, c + r * ldc, ldc); break;
    default: break;
  }
}

// ---- One block of tiles ----------------------------------------------------------------------

struct Geometry {
  const WinogradProblem* p;
  int64_t tiles_w, tiles;
  const float* u;
  const float* bias;
};

// Input transform of tiles [t0, t0 + n) into v (V[xi][tile][in channel]).
template <int kM>
STAGECRAFT_AVX2_FMA void transform_inputs(const Geometry& g, const float* src, int64_t t0, int64_t n, float* v) {
  constexpr int kA = kM + 2;
  const WinogradProblem& p = *g.p;
  const HostLayout& s = p.src;
  const int64_t cin = s.channels, xi_stride = n * cin;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = t0 + i, ty = t / g.tiles_w, tx = t % g.tiles_w;
    const int64_t y0 = ty * kM - p.pad_top, x0 = tx * kM - p.pad_left;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + kA <= s.height && x0 + kA <= s.width;
    for (int64_t c = 0; c < cin; c += kLanes) {
      const float* base = src + s.channel_offset(c);
      __m256 d[kA][kA];
      for (int a = 0; a < kA; ++a) {
        for (int b = 0; b < kA; ++b) {
          const int64_t y = y0 + a, x = x0 + b;
          d[a][b] = inside || (y >= 0 && y < s.height && x >= 0 && x < s.width)
                        ? _mm256_loadu_ps(base + (y * s.width + x) * s.pixel_stride)
                        : _mm256_setzero_ps();
        }
      }
      // columns: t[.][b] = B^T d[.][b]; rows: v[a][.] = B^T t[a][.]
      __m256 t1[kA][kA];
      for (int b = 0; b < kA; ++b) {
        __m256 col[kA], out[kA];
        for (int a = 0; a < kA; ++a) col[a] = d[a][b];
        input_1d(col, out);
        for (int a = 0; a < kA; ++a) t1[a][b] = out[a];
      }
      for (int a = 0; a < kA; ++a) {
        __m256 out[kA];
        input_1d(t1[a], out);
        for (int b = 0; b < kA; ++b) _mm256_storeu_ps(v + (a * kA + b) * xi_stride + i * cin + c, out[b]);
      }
    }
  }
}

// Output transform of tiles [t0, t0 + n), output channels [o0, o0 + width) from m
// (M[xi][tile][o - o0], row length ldm).
template <int kM>
STAGECRAFT_AVX2_FMA void transform_outputs(const Geometry& g, const float* m, int64_t ldm, int64_t t0,
                                           int64_t n, int64_t o0, int64_t width, const float* residual,
                                           float* dst) {
  constexpr int kA = kM + 2;
  const WinogradProblem& p = *g.p;
  const HostLayout& d = p.dst;
  const int64_t xi_stride = n * ldm;
  const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(6.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = t0 + i, ty = t / g.tiles_w, tx = t % g.tiles_w;
    const int64_t y0 = ty * kM, x0 = tx * kM;
    const int64_t rows = std::min<int64_t>(kM, d.height - y0), cols = std::min<int64_t>(kM, d.width - x0);
    for (int64_t o = 0; o < width; o += kLanes) {
      __m256 t1[kM][kA];  // A^T over the first index
      for (int b = 0; b < kA; ++b) {
        __m256 col[kA], out[kM];
        for (int a = 0; a < kA; ++a) col[a] = _mm256_loadu_ps(m + (a * kA + b) * xi_stride + i * ldm + o);
        output_1d(col, out);
        for (int a = 0; a < kM; ++a) t1[a][b] = out[a];
      }
      const int64_t channel = o0 + o;
      const __m256 bias = _mm256_loadu_ps(g.bias + channel);
      const int64_t offset = d.channel_offset(channel);
      for (int a = 0; a < rows; ++a) {
        __m256 y[kM];
        output_1d(t1[a], y);
        for (int b = 0; b < cols; ++b) {
          const int64_t at = offset + ((y0 + a) * d.width + x0 + b) * d.pixel_stride;
          __m256 v = _mm256_add_ps(y[b], bias);
          if (p.residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at));
          if (p.activation == graph::Activation::kRelu) {
            v = _mm256_max_ps(v, zero);
          } else if (p.activation == graph::Activation::kRelu6) {
            v = _mm256_min_ps(_mm256_max_ps(v, zero), six);
          }
          _mm256_storeu_ps(dst + at, v);
        }
      }
    }
  }
}

// Tiles [t0, t0 + n), output channels [o_begin, o_end) (multiples of 16, o_end may be the end).
template <int kM>
STAGECRAFT_AVX2_FMA void run_block(const Geometry& g, const float* src, const float* residual, float* dst,
                                   int64_t t0, int64_t n, int64_t o_begin, int64_t o_end, float* v,
                                   float* m) {
  constexpr int kA = kM + 2;
  const WinogradProblem& p = *g.p;
  const int64_t cin = p.src.channels, cout = p.dst.channels;
  transform_inputs<kM>(g, src, t0, n, v);
  for (int64_t c0 = o_begin; c0 < o_end; c0 += kChunk) {
    const int64_t c1 = std::min(o_end, c0 + kChunk), width = c1 - c0;
    for (int64_t xi = 0; xi < kA * kA; ++xi) {
      const float* a = v + xi * n * cin;
      float* c = m + xi * n * width;
      for (int64_t o = c0; o < c1; o += kPanel) {
        const float* b = g.u + xi * cin * cout + o * cin;
        if (panel_width(cout, o / kPanel) == kPanel) {
          product_rows<2>(n, a, cin, b, cin, c + (o - c0), width);
        } else {
          product_rows<1>(n, a, cin, b, cin, c + (o - c0), width);
        }
      }
    }
    transform_outputs<kM>(g, m, width, t0, n, c0, width, residual, dst);
  }
}

template <int kM>
void run_all(const Geometry& g, const float* src, const float* residual, float* dst, float* workspace,
             size_t per_thread) {
  const WinogradProblem& p = *g.p;
  const int64_t cout = p.dst.channels;
  const int64_t blocks = ceil_div(g.tiles, kBlockTiles);
  // Fewer blocks than threads: split the output channels too (each part transforms its block).
  const int64_t panels = ceil_div(cout, kPanel);
  const int64_t splits = blocks >= p.threads ? 1 : std::min(panels, ceil_div(p.threads, blocks));
  const int64_t panels_per = ceil_div(panels, splits);
  const int64_t items = blocks * splits;
  for (int64_t image = 0; image < p.src.images; ++image) {
    const float* s = src + image * p.src.batch_stride;
    const float* r = residual ? residual + image * p.dst.batch_stride : nullptr;
    float* d = dst + image * p.dst.batch_stride;
#pragma omp parallel for num_threads(p.threads) schedule(static)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t block = item / splits, part = item % splits;
      const int64_t t0 = block * kBlockTiles, n = std::min(kBlockTiles, g.tiles - t0);
      const int64_t o_begin = part * panels_per * kPanel;
      const int64_t o_end = std::min(cout, (part + 1) * panels_per * kPanel);
      if (o_begin >= o_end) continue;
      float* v = workspace + static_cast<size_t>(omp_get_thread_num()) * per_thread;
      float* m = v + (kM + 2) * (kM + 2) * kBlockTiles * p.src.channels;
      run_block<kM>(g, s, r, d, t0, n, o_begin, o_end, v, m);
    }
  }
}

}  // namespace
#endif  // STAGECRAFT_HOST_AVX2

bool winograd_supported(const WinogradProblem& p) {
#ifdef STAGECRAFT_HOST_AVX2
  static const bool cpu = host_has_avx2() && __builtin_cpu_supports("fma");
  const auto whole_groups = [](const HostLayout& l) {
    if (l.layout == graph::Layout::kNHWC) return l.channels % kLanes == 0;
    return (l.block == 8 || l.block == 16) && l.channels % l.block == 0;
  };
  const bool act = p.activation == graph::Activation::kNone ||
                   p.activation == graph::Activation::kRelu ||
                   p.activation == graph::Activation::kRelu6;
  return cpu && (p.tile == 2 || p.tile == 4) && whole_groups(p.src) && whole_groups(p.dst) && act &&
         p.threads >= 1 && p.src.images == p.dst.images;
#else
  (void)p;
  return false;
#endif
}

WinogradConv::WinogradConv(const WinogradProblem& p, const std::vector<float>& weights,
                           const std::vector<float>& bias)
    : p_(p) {
  const int64_t m = p.tile, cin = p.src.channels, cout = p.dst.channels;
  alpha_ = m + 2;
  tiles_h_ = ceil_div(p.dst.height, m);
  tiles_w_ = ceil_div(p.dst.width, m);
  bias_ = bias.empty() ? std::vector<float>(static_cast<size_t>(cout), 0.0f) : bias;
  // U[xi] = G g G^T per (out, in), packed as U[xi][panel][in][panel lanes].
  u_.assign(static_cast<size_t>(alpha_ * alpha_ * cin * cout), 0.0f);
  const double* gm = m == 2 ? &kG2[0][0] : &kG4[0][0];
  for (int64_t o = 0; o < cout; ++o) {
    const int64_t panel = o / kPanel, lane = o % kPanel, width = panel_width(cout, panel);
    for (int64_t i = 0; i < cin; ++i) {
      const float* g = weights.data() + (o * cin + i) * 9;
      double gg[6][3];  // G g
      for (int64_t a = 0; a < alpha_; ++a)
        for (int64_t c = 0; c < 3; ++c)
          gg[a][c] = gm[a * 3] * g[c] + gm[a * 3 + 1] * g[3 + c] + gm[a * 3 + 2] * g[6 + c];
      for (int64_t a = 0; a < alpha_; ++a) {
        for (int64_t b = 0; b < alpha_; ++b) {
          const double value = gg[a][0] * gm[b * 3] + gg[a][1] * gm[b * 3 + 1] + gg[a][2] * gm[b * 3 + 2];
          const int64_t xi = a * alpha_ + b;
          u_[static_cast<size_t>(xi * cin * cout + panel * kPanel * cin + i * width + lane)] =
              static_cast<float>(value);
        }
      }
    }
  }
}

size_t WinogradConv::workspace_bytes() const {
  const size_t v = static_cast<size_t>(alpha_ * alpha_ * kBlockTiles * p_.src.channels);
  const size_t m = static_cast<size_t>(alpha_ * alpha_ * kBlockTiles * kChunk);
  return static_cast<size_t>(p_.threads) * (v + m) * sizeof(float);
}

void WinogradConv::run(const float* src, const float* residual, float* dst, void* workspace) const {
#ifdef STAGECRAFT_HOST_AVX2
  const Geometry g{&p_, tiles_w_, tiles_h_ * tiles_w_, u_.data(), bias_.data()};
  const size_t per_thread = workspace_bytes() / sizeof(float) / static_cast<size_t>(p_.threads);
  float* ws = static_cast<float*>(workspace);
  if (p_.tile == 2) {
    run_all<2>(g, src, residual, dst, ws, per_thread);
  } else {
    run_all<4>(g, src, residual, dst, ws, per_thread);
  }
#else
  (void)src, (void)residual, (void)dst, (void)workspace;
#endif
}

std::string WinogradConv::name() const {
  return cat("winograd F(", p_.tile, "x", p_.tile, ",3x3) (ours)", p_.residual ? " (residual post-op)" : "");
}

}  // namespace stagecraft::executor::cpu
