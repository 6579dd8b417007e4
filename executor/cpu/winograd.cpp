// Winograd convolutions on AVX2 + FMA (see winograd.h): F(m x m, 3 x 3) and, for 1xK / Kx1
// kernels, F(m, K) along the kernel's long axis.
//
// Per run: the output is cut into tiles (m x m, or m along the axis), tiles into blocks (a block's
// transformed input, points x tiles x in-channels, stays in the core's L2 cache; points = alpha^2
// or alpha). For each block:
//   1. input transform: each tile's input patch of 8-channel vectors -> V[xi][tile][in channel]
//   2. products, per chunk of output channels: M[xi][tile][out] = V[xi] (tiles x in) U[xi] (in x out)
//      on a register tile of 6 tiles x 16 output channels (12 accumulators)
//   3. output transform of the chunk: Y = A^T M A (or A^T M), + bias (+ residual), activation.
// Work items are blocks (and, when there are fewer blocks than threads, chunks of output channels
// of a block); each thread has its own V and M in the workspace.
#include "executor/cpu/winograd.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "common/strings.h"
#include "executor/cpu/host_simd.h"
#include "executor/cpu/winograd_transforms.h"

namespace stagecraft::executor::cpu {

namespace {

constexpr int64_t kLanes = 8;       // channels per vector
constexpr int64_t kRows = 6;        // tiles per register tile
constexpr int64_t kPanel = 16;      // output channels per register tile (2 vectors)
constexpr int64_t kBlockTiles = 12;      // tiles per block at most (3x3)
constexpr int64_t kLineBlockTiles = 24;  // tiles per block at most (1-D: smaller tiles, more of them)
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

// Tiles per block: at most `largest`, the blocks an equal share per thread (a static schedule of
// 5 blocks of 12 on 2 threads would give one thread 36 tiles and the other 13; as 6 blocks of 9:
// 27 and 22). Up to two blocks' worth of tiles (or fewer blocks of `largest` than threads): one
// block of them all, and run_all splits the output channels instead, so that each thread reads
// only its share of the transformed weights, once. Inside a network's run these come from memory
// (a model's weights do not stay in the cache from one run to the next), and on small maps they
// are large beside the work done with them: at 14x14 (256->256, F(4x4), 16 tiles) two blocks of 8
// each read all 9.4 MB; one block split by channels took 748 instead of 932 us, at 7x7 (512->512,
// F(2x2)) 1058 instead of 1559 us (bench/winograd_vs_direct --cold, AMD EPYC, 2 threads).
int64_t balanced_block(int64_t tiles, int64_t threads, int64_t largest) {
  const int64_t natural = ceil_div(tiles, largest);
  if (tiles <= 2 * largest) return tiles;
  if (natural < threads) return largest;
  const int64_t blocks = ceil_div(natural, threads) * threads;
  return std::max<int64_t>(1, ceil_div(tiles, blocks));
}

int64_t taps_of(const WinogradProblem& p) { return std::max(p.kernel_h, p.kernel_w); }
bool is_line(const WinogradProblem& p) { return p.kernel_h == 1 || p.kernel_w == 1; }
int64_t max_line_alpha(int64_t taps) { return taps == 7 ? 10 : 8; }

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
  int64_t tiles_w, tiles;  // tiles per row of tiles, in all
  int64_t block, points;   // tiles per block; positions of a transformed tile (alpha^2 or alpha)
  const float* u;
  const float* bias;
  const float* bt;         // 1-D: B^T (alpha x alpha) and A^T (m x alpha)
  const float* at;
};

// dst[at] = act(y + bias (+ residual[at])).
STAGECRAFT_AVX2_FMA inline void store_output(const WinogradProblem& p, __m256 y, __m256 bias,
                                             const float* residual, float* dst, int64_t at) {
  __m256 v = _mm256_add_ps(y, bias);
  if (p.residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at));
  if (p.activation == graph::Activation::kRelu) {
    v = _mm256_max_ps(v, _mm256_setzero_ps());
  } else if (p.activation == graph::Activation::kRelu6) {
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(6.0f));
  }
  _mm256_storeu_ps(dst + at, v);
}

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
          store_output(p, y[b], bias, residual, dst, offset + ((y0 + a) * d.width + x0 + b) * d.pixel_stride);
        }
      }
    }
  }
}

// ---- 1-D tiles (1xK along W, Kx1 along H) ----------------------------------------------------

// A 1-D tile: its first output (oy, ox) and the axis' step (dy, dx).
struct LineTile {
  int64_t oy, ox, dy, dx;
};

inline LineTile line_tile(const Geometry& g, int64_t t) {
  const int64_t ty = t / g.tiles_w, tx = t % g.tiles_w, m = g.p->tile;
  return g.p->kernel_h > 1 ? LineTile{ty * m, tx, 1, 0} : LineTile{ty, tx * m, 0, 1};
}

// Input transform of tiles [t0, t0 + n): alpha inputs along the axis -> B^T d.
template <int kA>
STAGECRAFT_AVX2_FMA void transform_inputs_line(const Geometry& g, const float* src, int64_t t0, int64_t n,
                                               float* v) {
  const WinogradProblem& p = *g.p;
  const HostLayout& s = p.src;
  const int64_t cin = s.channels, xi_stride = n * cin;
  for (int64_t i = 0; i < n; ++i) {
    const LineTile l = line_tile(g, t0 + i);
    const int64_t y0 = l.oy - p.pad_top, x0 = l.ox - p.pad_left;
    int64_t at[kA];
    bool valid[kA];
    for (int a = 0; a < kA; ++a) {
      const int64_t y = y0 + a * l.dy, x = x0 + a * l.dx;
      valid[a] = y >= 0 && y < s.height && x >= 0 && x < s.width;
      at[a] = (y * s.width + x) * s.pixel_stride;
    }
    for (int64_t c = 0; c < cin; c += kLanes) {
      const float* base = src + s.channel_offset(c);
      __m256 d[kA];
      for (int a = 0; a < kA; ++a) d[a] = valid[a] ? _mm256_loadu_ps(base + at[a]) : _mm256_setzero_ps();
      for (int r = 0; r < kA; ++r) {
        __m256 acc = _mm256_setzero_ps();
        for (int a = 0; a < kA; ++a) {
          acc = _mm256_fmadd_ps(_mm256_set1_ps(g.bt[r * kA + a]), d[a], acc);
        }
        _mm256_storeu_ps(v + r * xi_stride + i * cin + c, acc);
      }
    }
  }
}

// Output transform of tiles [t0, t0 + n), output channels [o0, o0 + width): A^T M along the axis.
template <int kA>
STAGECRAFT_AVX2_FMA void transform_outputs_line(const Geometry& g, const float* m, int64_t ldm, int64_t t0,
                                                int64_t n, int64_t o0, int64_t width, const float* residual,
                                                float* dst) {
  const WinogradProblem& p = *g.p;
  const HostLayout& d = p.dst;
  const int64_t xi_stride = n * ldm;
  for (int64_t i = 0; i < n; ++i) {
    const LineTile l = line_tile(g, t0 + i);
    const int64_t count = std::min<int64_t>(p.tile, l.dy ? d.height - l.oy : d.width - l.ox);
    for (int64_t o = 0; o < width; o += kLanes) {
      __m256 col[kA];
      for (int a = 0; a < kA; ++a) col[a] = _mm256_loadu_ps(m + a * xi_stride + i * ldm + o);
      const int64_t channel = o0 + o;
      const __m256 bias = _mm256_loadu_ps(g.bias + channel);
      const int64_t offset = d.channel_offset(channel);
      for (int64_t r = 0; r < count; ++r) {
        __m256 y = _mm256_setzero_ps();
        for (int a = 0; a < kA; ++a) {
          y = _mm256_fmadd_ps(_mm256_set1_ps(g.at[r * kA + a]), col[a], y);
        }
        store_output(p, y, bias, residual, dst, offset + ((l.oy + r * l.dy) * d.width + l.ox + r * l.dx) * d.pixel_stride);
      }
    }
  }
}

// ---- Blocks and threads -----------------------------------------------------------------------

using InputTransform = void (*)(const Geometry&, const float*, int64_t, int64_t, float*);
using OutputTransform = void (*)(const Geometry&, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 const float*, float*);
struct Transforms {
  InputTransform input;
  OutputTransform output;
};

// Tiles [t0, t0 + n), output channels [o_begin, o_end) (multiples of 16, o_end may be the end).
STAGECRAFT_AVX2_FMA void run_block(const Geometry& g, Transforms tr, const float* src, const float* residual,
                                   float* dst, int64_t t0, int64_t n, int64_t o_begin, int64_t o_end, float* v,
                                   float* m) {
  const WinogradProblem& p = *g.p;
  const int64_t cin = p.src.channels, cout = p.dst.channels;
  tr.input(g, src, t0, n, v);
  for (int64_t c0 = o_begin; c0 < o_end; c0 += kChunk) {
    const int64_t c1 = std::min(o_end, c0 + kChunk), width = c1 - c0;
    for (int64_t xi = 0; xi < g.points; ++xi) {
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
    tr.output(g, m, width, t0, n, c0, width, residual, dst);
  }
}

void run_all(const Geometry& g, Transforms tr, const float* src, const float* residual, float* dst,
             float* workspace, size_t per_thread) {
  const WinogradProblem& p = *g.p;
  const int64_t cout = p.dst.channels;
  const int64_t blocks = ceil_div(g.tiles, g.block);
  // Fewer blocks than threads (one block of a small map): split the output channels too (each
  // part transforms its block's inputs).
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
      const int64_t t0 = block * g.block, n = std::min(g.block, g.tiles - t0);
      const int64_t o_begin = part * panels_per * kPanel;
      const int64_t o_end = std::min(cout, (part + 1) * panels_per * kPanel);
      if (o_begin >= o_end) continue;
      float* v = workspace + static_cast<size_t>(omp_get_thread_num()) * per_thread;
      float* m = v + g.points * g.block * p.src.channels;
      run_block(g, tr, s, r, d, t0, n, o_begin, o_end, v, m);
    }
  }
}

Transforms transforms_of(const WinogradProblem& p, int64_t alpha) {
  if (!is_line(p)) {
    return p.tile == 2 ? Transforms{transform_inputs<2>, transform_outputs<2>}
                       : Transforms{transform_inputs<4>, transform_outputs<4>};
  }
  switch (alpha) {
    case 4: return {transform_inputs_line<4>, transform_outputs_line<4>};
    case 5: return {transform_inputs_line<5>, transform_outputs_line<5>};
    case 6: return {transform_inputs_line<6>, transform_outputs_line<6>};
    case 7: return {transform_inputs_line<7>, transform_outputs_line<7>};
    case 8: return {transform_inputs_line<8>, transform_outputs_line<8>};
    case 9: return {transform_inputs_line<9>, transform_outputs_line<9>};
    default: return {transform_inputs_line<10>, transform_outputs_line<10>};
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
  const int64_t taps = taps_of(p);
  const bool square = p.kernel_h == 3 && p.kernel_w == 3 && (p.tile == 2 || p.tile == 4);
  const bool line = is_line(p) && (taps == 3 || taps == 5 || taps == 7) && p.tile >= 2 &&
                    p.tile + taps - 1 <= max_line_alpha(taps);
  return cpu && (square || line) && whole_groups(p.src) && whole_groups(p.dst) && act && p.threads >= 1 &&
         p.src.images == p.dst.images;
#else
  (void)p;
  return false;
#endif
}

int winograd_1d_tile(int taps, int64_t length) {
  int best = 2;
  int64_t best_cost = -1;
  for (int m = 2; m + taps - 1 <= max_line_alpha(taps); ++m) {
    const int64_t cost = ceil_div(length, m) * (m + taps - 1);
    if (best_cost < 0 || cost < best_cost) {
      best = m;
      best_cost = cost;
    }
  }
  return best;
}

namespace {

// How a problem is cut into tiles: alpha inputs per tile side (or along the line), points
// transformed per tile, tiles along H and W, tiles per block.
struct Tiling {
  int64_t alpha = 0, points = 0, tiles_h = 0, tiles_w = 0, block_tiles = 0;
};

Tiling tiling_of(const WinogradProblem& p) {
  const int64_t m = p.tile;
  Tiling t;
  if (is_line(p)) {  // F(m, K) along H (Kx1) or W (1xK)
    t.alpha = m + taps_of(p) - 1;
    t.points = t.alpha;
    t.tiles_h = p.kernel_h > 1 ? ceil_div(p.dst.height, m) : p.dst.height;
    t.tiles_w = p.kernel_w > 1 ? ceil_div(p.dst.width, m) : p.dst.width;
    t.block_tiles = balanced_block(t.tiles_h * t.tiles_w, p.threads, kLineBlockTiles);
  } else {
    t.alpha = m + 2;
    t.points = t.alpha * t.alpha;
    t.tiles_h = ceil_div(p.dst.height, m);
    t.tiles_w = ceil_div(p.dst.width, m);
    t.block_tiles = balanced_block(t.tiles_h * t.tiles_w, p.threads, kBlockTiles);
  }
  return t;
}

}  // namespace

size_t winograd_workspace_bytes(const WinogradProblem& p) {
  const Tiling t = tiling_of(p);
  const size_t v = static_cast<size_t>(t.points * t.block_tiles * p.src.channels);
  const size_t m = static_cast<size_t>(t.points * t.block_tiles * kChunk);
  return static_cast<size_t>(p.threads) * (v + m) * sizeof(float);
}

std::string winograd_name(const WinogradProblem& p) {
  const std::string tile = p.kernel_h == 1 ? cat("1x", p.tile) : p.kernel_w == 1 ? cat(p.tile, "x1")
                                                                                : cat(p.tile, "x", p.tile);
  return cat("winograd F(", tile, ",", p.kernel_h, "x", p.kernel_w, ") (ours)",
             p.residual ? " (residual post-op)" : "");
}

WinogradConv::WinogradConv(const WinogradProblem& p, const std::vector<float>& weights,
                           const std::vector<float>& bias)
    : p_(p) {
  const int64_t m = p.tile, cin = p.src.channels, cout = p.dst.channels;
  bias_ = bias.empty() ? std::vector<float>(static_cast<size_t>(cout), 0.0f) : bias;
  const Tiling tiling = tiling_of(p);
  alpha_ = tiling.alpha;
  points_ = tiling.points;
  tiles_h_ = tiling.tiles_h;
  tiles_w_ = tiling.tiles_w;
  block_tiles_ = tiling.block_tiles;
  u_ = host_allocate_constant(static_cast<size_t>(points_ * cin * cout) * sizeof(float));
  const auto pack = [&](int64_t xi, int64_t o, int64_t i, double value) {
    const int64_t panel = o / kPanel, lane = o % kPanel, width = panel_width(cout, panel);
    u()[xi * cin * cout + panel * kPanel * cin + i * width + lane] = static_cast<float>(value);
  };
  if (is_line(p)) {
    // U[xi] = (G g)[xi] per (out, in).
    const int64_t taps = taps_of(p);
    const LineTransforms t = line_transforms(m, taps);
    bt_.assign(t.bt.begin(), t.bt.end());
    at_.assign(t.at.begin(), t.at.end());
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t i = 0; i < cin; ++i) {
        const float* g = weights.data() + (o * cin + i) * taps;
        for (int64_t xi = 0; xi < alpha_; ++xi) {
          double value = 0.0;
          for (int64_t k = 0; k < taps; ++k) value += t.g[static_cast<size_t>(xi * taps + k)] * g[k];
          pack(xi, o, i, value);
        }
      }
    }
    return;
  }
  // U[xi] = G g G^T per (out, in), packed as U[xi][panel][in][panel lanes].
  const double* gm = m == 2 ? &kG2[0][0] : &kG4[0][0];
  for (int64_t o = 0; o < cout; ++o) {
    for (int64_t i = 0; i < cin; ++i) {
      const float* g = weights.data() + (o * cin + i) * 9;
      double gg[6][3];  // G g
      for (int64_t a = 0; a < alpha_; ++a)
        for (int64_t c = 0; c < 3; ++c)
          gg[a][c] = gm[a * 3] * g[c] + gm[a * 3 + 1] * g[3 + c] + gm[a * 3 + 2] * g[6 + c];
      for (int64_t a = 0; a < alpha_; ++a) {
        for (int64_t b = 0; b < alpha_; ++b) {
          pack(a * alpha_ + b, o, i, gg[a][0] * gm[b * 3] + gg[a][1] * gm[b * 3 + 1] + gg[a][2] * gm[b * 3 + 2]);
        }
      }
    }
  }
}

size_t WinogradConv::workspace_bytes() const { return winograd_workspace_bytes(p_); }

void WinogradConv::run(const float* src, const float* residual, float* dst, void* workspace) const {
#ifdef STAGECRAFT_HOST_AVX2
  const Geometry g{&p_, tiles_w_, tiles_h_ * tiles_w_, block_tiles_, points_,
                   u(), bias_.data(), bt_.data(), at_.data()};
  const size_t per_thread = workspace_bytes() / sizeof(float) / static_cast<size_t>(p_.threads);
  run_all(g, transforms_of(p_, alpha_), src, residual, dst, static_cast<float*>(workspace), per_thread);
#else
  (void)src, (void)residual, (void)dst, (void)workspace;
#endif
}

std::string WinogradConv::name() const { return winograd_name(p_); }

}  // namespace stagecraft::executor::cpu
