// The CUDA backend's kernels for row-major tensors (transformers) without a GPU: the per-element
// bodies of executor/cuda/element_ops.h and movement_ops.h (what each thread of kernels.cu and
// tensor_kernels.cu computes) run on the host over every thread index with the parameters the
// builders derive (op_params.h), in f32 and through a host f16 storage type, and are compared with
// the CPU backend on the same op and random data; the cuBLAS arguments of a matmul (sizes, leading
// dimensions, strides, batch counts and offsets of broadcast groups) are checked by computing the
// matmul from them with a column-major GEMM on the host. These tests run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/half.h"
#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cuda/element_ops.h"
#include "executor/cuda/movement_ops.h"
#include "executor/cuda/op_params.h"
#include "support/kernels.h"
#include "support/models.h"
#include "support/compare.h"

namespace stagecraft::executor::cuda {
namespace {

using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::Shape;
using graph::TensorDesc;
using stagecraft::testing::kernel_spec;
using Floats = std::vector<float>;

// ---- f16 storage on the host: the bodies' unqualified load/store find these by argument-dependent
// lookup, as they find __half's under nvcc -------------------------------------------------------

struct Half {
  uint16_t bits = 0;
};
float load(const Half* p, int64_t i) { return half_to_float(p[i].bits); }
void store(Half* p, int64_t i, float v) { p[i].bits = float_to_half(v); }

std::vector<Half> to_half(const Floats& x) {
  std::vector<Half> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i].bits = float_to_half(x[i]);
  return h;
}
Floats from_half(const std::vector<Half>& h) {
  Floats x(h.size());
  for (size_t i = 0; i < h.size(); ++i) x[i] = half_to_float(h[i].bits);
  return x;
}
// x rounded to f16 values (the CPU then computes in f32 on what the f16 kernel reads).
Floats rounded(const Floats& x) { return from_half(to_half(x)); }

// ---- The CPU backend on the same op --------------------------------------------------------------

Backend& cpu() { return stagecraft::testing::cpu_backend(); }

TensorDesc desc(Shape shape, Layout layout = Layout::kRowMajor) {
  TensorDesc d = graph::make_desc(std::move(shape), DataType::kF32);
  d.layout = layout;
  return d;
}

Floats random_floats(int64_t n, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Floats x(static_cast<size_t>(n));
  for (float& v : x) v = u(rng);
  return x;
}

Floats random_of(const TensorDesc& d, uint32_t seed) { return random_floats(d.shape.numel(), seed); }

// Runs `spec` on the CPU backend (f32 tensors): destination 0.
Floats run_cpu(const KernelSpec& spec, const std::vector<Floats>& srcs) {
  return stagecraft::testing::run_f32_kernel(cpu(), spec, srcs);
}

// The largest |got - want| relative to max(1, max |want|); infinity on a NaN or a size mismatch.
double relative_difference(const Floats& got, const Floats& want) {
  double scale = 1;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  return stagecraft::testing::max_abs_error(got, want) / scale;
}

// Runs body(src, dst, i) for every thread index i < threads, in f32 and in f16 storage, into a
// destination of `size` elements (zeros first); the f32 result and the f16 one (converted back to
// f32) are returned.
template <class Body>
std::pair<Floats, Floats> run_body(const Floats& x, int64_t threads, size_t size, Body body) {
  Floats y32(size);
  for (int64_t i = 0; i < threads; ++i) body(x.data(), y32.data(), i);
  const std::vector<Half> xh = to_half(x);
  std::vector<Half> yh(size);
  for (int64_t i = 0; i < threads; ++i) body(xh.data(), yh.data(), i);
  return {y32, from_half(yh)};
}

// run_body with one thread per destination element (n of them).
template <class Body>
std::pair<Floats, Floats> run_body(const Floats& x, int64_t n, Body body) {
  return run_body(x, n, static_cast<size_t>(n), body);
}

// The f32 and f16 results of run_body against the CPU backend's on x and on x rounded to f16
// values: relative differences below `tolerance` and `half_tolerance`.
void expect_matches_cpu(const KernelSpec& spec, const Floats& x, const std::pair<Floats, Floats>& got,
                        double tolerance, double half_tolerance, const std::string& what) {
  EXPECT_LT(relative_difference(got.first, run_cpu(spec, {x})), tolerance) << what;
  EXPECT_LT(relative_difference(got.second, run_cpu(spec, {rounded(x)})), half_tolerance) << what << " in f16";
}

// ---- Transpose, narrow, concat_constant -----------------------------------------------------------

TEST(CudaRowMajorOps, TransposeAndNarrowMatchTheCpu) {
  struct Case {
    Shape in;
    std::vector<int64_t> perm;  // a transpose, or empty: a narrow
    graph::NarrowAttrs narrow;
  };
  const Case cases[] = {
      {{2, 5, 7}, {0, 2, 1}, {}},
      {{2, 3, 4, 5}, {0, 2, 1, 3}, {}},
      {{2, 3, 4, 5}, {3, 0, 2, 1}, {}},
      {{2, 3, 2, 3, 2}, {4, 0, 3, 1, 2}, {}},
      {{1, 2, 3, 2, 2, 3, 2, 2}, {7, 6, 5, 4, 3, 2, 1, 0}, {}},  // kMaxRank
      {{2, 6, 5}, {}, {2, 1, 4}},
      {{2, 6, 5}, {}, {1, 2, 5}},
      {{3, 4, 5, 2}, {}, {0, 1, 3}},
      {{2, 9, 4}, {}, {1, 0, 1}},
  };
  for (const Case& c : cases) {
    const bool transpose = !c.perm.empty();
    Shape out = c.in;
    if (transpose) {
      for (size_t k = 0; k < c.perm.size(); ++k) out[k] = c.in[static_cast<size_t>(c.perm[k])];
    } else {
      out[static_cast<size_t>(c.narrow.axis)] = c.narrow.end - c.narrow.begin;
    }
    const KernelSpec spec = transpose ? kernel_spec(OpKind::kTranspose, graph::TransposeAttrs{c.perm}, {desc(c.in)},
                                                  {desc(out)})
                                      : kernel_spec(OpKind::kNarrow, c.narrow, {desc(c.in)}, {desc(out)});
    const Floats x = random_of(spec.srcs[0], 3);
    const Floats want = run_cpu(spec, {x});
    const StridedView v = gather_view(spec);
    ASSERT_EQ(v.numel(), out.numel());
    const auto [got, got_half] =
        run_body(x, v.numel(), [&](const auto* src, auto* dst, int64_t i) { gather_at(src, v, dst, i); });
    const std::string what = cat(graph::to_string(spec.kind), " of ", c.in.to_string(), " to ", out.to_string());
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(got_half, rounded(want)) << what << " in f16";
  }
}

TEST(CudaRowMajorOps, ConcatConstantMatchesTheCpu) {
  struct Case {
    Shape in;
    graph::ConcatConstantAttrs attrs;
  };
  const Case cases[] = {
      {{2, 5, 6}, {1, 1, true}},   // a class token before the tokens
      {{2, 5, 6}, {1, 2, false}},  // after them
      {{3, 4, 5}, {2, 3, true}},   // along the last axis
      {{2, 3, 4, 5}, {2, 2, false}},
  };
  for (const Case& c : cases) {
    Shape out = c.in;
    out[static_cast<size_t>(c.attrs.axis)] += c.attrs.count;
    Shape block = c.in;
    block[0] = 1;
    block[static_cast<size_t>(c.attrs.axis)] = c.attrs.count;
    graph::OpWeights w;
    w.weight = random_floats(block.numel(), 5);
    const KernelSpec spec = kernel_spec(OpKind::kConcatConstant, c.attrs, {desc(c.in)}, {desc(out)}, &w);
    const Floats x = random_of(spec.srcs[0], 4);
    const Floats want = run_cpu(spec, {x});
    const ConcatConstantParams p = concat_constant_params(spec);
    ASSERT_EQ(p.numel(), out.numel());
    ASSERT_EQ(p.per_sample * p.count * p.inner, block.numel());
    const auto [got, got_half] = run_body(x, p.numel(), [&](const auto* src, auto* dst, int64_t i) {
      concat_constant_at(src, w.weight.data(), dst, p, i);
    });
    const std::string what = cat(c.in.to_string(), " axis ", c.attrs.axis, c.attrs.before ? " before" : " after");
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(got_half, rounded(want)) << what << " in f16";
  }
}

// ---- Softmax over any axis, layer norm over the last one --------------------------------------------

TEST(CudaRowMajorOps, SoftmaxOverAnyAxisMatchesTheCpu) {
  struct Case {
    Shape shape;
    Layout layout;
    int64_t axis;
  };
  const Case cases[] = {
      {{2, 7, 9}, Layout::kRowMajor, 2},  // attention scores over their keys: contiguous rows
      {{2, 7, 9}, Layout::kRowMajor, 1},  // strided rows
      {{2, 7, 9}, Layout::kRowMajor, 0},
      {{2, 3, 5, 6}, Layout::kRowMajor, 3},
      {{2, 3, 5, 6}, Layout::kRowMajor, 2},
      {{4, 10}, Layout::kNC, 1},
      {{2, 6, 3, 4}, Layout::kNCHW, 1},  // the channels of rank-4 tensors in both CUDA layouts
      {{2, 6, 3, 4}, Layout::kNHWC, 1},
  };
  for (const Case& c : cases) {
    const TensorDesc d = desc(c.shape, c.layout);
    const KernelSpec spec = kernel_spec(OpKind::kSoftmax, graph::SoftmaxAttrs{c.axis}, {d}, {d});
    const Floats x = random_of(d, 6);
    const SoftmaxGeometry g = softmax_geometry(d, c.axis);
    ASSERT_EQ(g.outer * g.extent * g.inner, c.shape.numel());
    // Each row writes only its own elements: run the rows, not the elements.
    const auto got = run_body(x, g.rows(), x.size(), [&](const auto* src, auto* dst, int64_t r) {
      softmax_row_at(src, dst, g, r);
    });
    expect_matches_cpu(spec, x, got, 1e-6, 2e-3,
                       cat(c.shape.to_string(), " ", graph::to_string(c.layout), " axis ", c.axis));
  }
}

TEST(CudaRowMajorOps, LayerNormOverTheLastAxisMatchesTheCpu) {
  struct Case {
    Shape shape;
    Layout layout;
  };
  const Case cases[] = {{{2, 7, 12}, Layout::kRowMajor},
                        {{2, 3, 4, 10}, Layout::kRowMajor},
                        {{5, 16}, Layout::kNC},
                        {{2, 6, 3, 4}, Layout::kNCHW},  // rank 4 in a CUDA layout: the channels
                        {{2, 6, 3, 4}, Layout::kNHWC}};
  for (const Case& c : cases) {
    const TensorDesc d = desc(c.shape, c.layout);
    const Dims4 g = norm_dims(d);
    graph::OpWeights w;
    w.gamma = random_floats(g.c, 7, 0.5f, 1.5f);
    w.beta = random_floats(g.c, 8);
    graph::LayerNormAttrs a;
    a.eps = 1e-5;
    const KernelSpec spec = kernel_spec(OpKind::kLayerNorm, a, {d}, {d}, &w);
    const Floats x = random_of(d, 9);
    const auto eps = static_cast<float>(a.eps);
    // One thread per pixel (row) normalises its channels.
    const auto got = run_body(x, g.n * g.h * g.w, x.size(), [&](const auto* src, auto* dst, int64_t i) {
      layer_norm_at(src, dst, w.gamma.data(), w.beta.data(), eps, g, i);
    });
    expect_matches_cpu(spec, x, got, 1e-5, 5e-3, cat(c.shape.to_string(), " ", graph::to_string(c.layout)));
  }
}

TEST(CudaRowMajorOps, ReductionsOfRowMajorTensorsMatchTheCpu) {
  struct Case {
    OpKind kind;
    ReduceMode mode;
    Shape in;
    std::vector<int64_t> axes;
  };
  const Case cases[] = {{OpKind::kReduceMean, ReduceMode::kMean, {2, 5, 6}, {1}},  // the mean over the tokens
                        {OpKind::kReduceMax, ReduceMode::kMax, {2, 5, 6}, {2}},
                        {OpKind::kReduceSum, ReduceMode::kSum, {2, 3, 4, 5}, {1, 3}},
                        {OpKind::kReduceMean, ReduceMode::kMean, {2, 3, 4, 5}, {2, 3}}};
  for (const Case& c : cases) {
    Shape out = c.in;
    for (int64_t a : c.axes) out[static_cast<size_t>(a)] = 1;
    graph::ReduceAttrs a;
    a.axes = c.axes;
    const KernelSpec spec = kernel_spec(c.kind, a, {desc(c.in)}, {desc(out)});
    Dims4 from, to;
    ASSERT_TRUE(reduce_dims(spec.srcs[0], spec.dsts[0], &from, &to)) << c.in.to_string();
    ASSERT_EQ(to.numel(), out.numel());
    const Floats x = random_of(spec.srcs[0], 17);
    const auto got = run_body(
        x, to.numel(), [&](const auto* src, auto* dst, int64_t i) { reduce_at(src, from, dst, to, c.mode, i); });
    expect_matches_cpu(spec, x, got, 1e-6, 2e-3,
                       cat(graph::to_string(c.kind), " of ", c.in.to_string(), " to ", out.to_string()));
  }
  // Five alternating runs, or a reduced first one of four, are refused (the kernel keeps N).
  Dims4 from, to;
  EXPECT_FALSE(reduce_dims(desc({2, 3, 4, 5, 6}), desc({2, 1, 4, 1, 6}), &from, &to));
  EXPECT_FALSE(reduce_dims(desc({2, 3, 4, 5}), desc({1, 3, 1, 5}), &from, &to));
}

// ---- Binary ops with NumPy broadcasting of any rank ------------------------------------------------

graph::BinaryAttrs binary(graph::BinaryOp op, std::vector<int64_t> constant = {}) {
  graph::BinaryAttrs a;
  a.op = op;
  a.constant = std::move(constant);
  return a;
}

TEST(CudaRowMajorOps, BinaryBroadcastOfAnyRankMatchesTheCpu) {
  using graph::BinaryOp;
  struct Case {
    graph::BinaryAttrs attrs;
    Shape a, b;  // b empty: the constant
  };
  const Case cases[] = {
      {binary(BinaryOp::kAdd), {2, 5, 6}, {2, 5, 6}},
      {binary(BinaryOp::kMul), {2, 5, 6}, {1, 5, 1}},
      {binary(BinaryOp::kSub), {2, 5, 6}, {2, 1, 6}},
      {binary(BinaryOp::kDiv), {2, 3, 4, 5}, {2, 1, 1, 5}},  // a rank-4 row-major tensor
      {binary(BinaryOp::kAdd), {2, 3, 2, 4, 3}, {1, 1, 2, 4, 1}},
      {binary(BinaryOp::kMul), {2, 3, 4, 2, 5}, {2, 3, 1, 1, 5}},  // merges to 3 dimensions
      {binary(BinaryOp::kSub), {1, 5, 6}, {2, 5, 6}},              // the first operand broadcast
      {binary(BinaryOp::kAdd, {6}), {2, 5, 6}, {}},                // a bias over the last axis
      {binary(BinaryOp::kMul, {5, 1}), {2, 5, 6}, {}},
      {binary(BinaryOp::kAdd, {2, 1, 2, 4, 1}), {2, 3, 2, 4, 3}, {}},
  };
  for (const Case& c : cases) {
    const bool constant = !c.attrs.constant.empty();
    std::vector<TensorDesc> srcs{desc(c.a)};
    std::vector<Floats> data{random_floats(c.a.numel(), 10, 0.5f, 3.f)};
    graph::OpWeights w;
    Shape out = c.a;
    if (constant) {
      int64_t n = 1;
      for (int64_t d : c.attrs.constant) n *= d;
      w.weight = random_floats(n, 11, 0.5f, 2.f);
    } else {
      srcs.push_back(desc(c.b));
      data.push_back(random_floats(c.b.numel(), 12, 0.5f, 3.f));
      for (size_t d = 0; d < out.rank(); ++d) out[d] = std::max(c.a[d], c.b[d]);
    }
    const KernelSpec spec = kernel_spec(OpKind::kBinary, c.attrs, srcs, {desc(out)}, &w);
    const BinaryOperands ops = binary_operands(spec);
    const std::string what = cat(graph::attrs_signature(c.attrs), " ", c.a.to_string(), " ", c.b.to_string());
    ASSERT_TRUE(ops.folded) << what;
    ASSERT_EQ(ops.yd.numel(), out.numel()) << what;
    const float* x = data[static_cast<size_t>(ops.x_src)].data();
    const float* o = ops.o_src < 0 ? w.weight.data() : data[static_cast<size_t>(ops.o_src)].data();
    Floats got(static_cast<size_t>(out.numel()));
    for (int64_t i = 0; i < ops.yd.numel(); ++i) binary_at(x, ops.xd, o, ops.od, got.data(), ops.yd, ops.params, i);
    if (same_dims(ops.xd, ops.yd)) {  // the packed kernel's body reads x at the destination's offsets
      for (int64_t i = 0; i < ops.yd.numel(); ++i) {
        ASSERT_EQ(binary_with(x[i], o, ops.od, ops.yd, ops.params, i), got[static_cast<size_t>(i)]) << what;
      }
    }
    // The CPU broadcasts the second operand only: a broadcast first one is checked by a loop.
    Floats want;
    if (c.a == out) {
      want = run_cpu(spec, data);
    } else {
      want.resize(got.size());
      for (int64_t i = 0; i < out.numel(); ++i) {
        const int64_t last = out[2], mid = out[1];
        const int64_t j = i % last, m = (i / last) % mid;
        want[static_cast<size_t>(i)] = data[0][static_cast<size_t>(m * last + j)] - data[1][static_cast<size_t>(i)];
      }
    }
    EXPECT_LT(relative_difference(got, want), 1e-6) << what;
  }
}

TEST(CudaRowMajorOps, BroadcastsFoldIntoFourDimensionsOrAreRefused) {
  // Dimensions of extent 1 drop; neighbours broadcast alike merge.
  const std::vector<Dims4> g = fold_broadcast({{2, 3, 4, 1, 5}, {2, 1, 1, 1, 5}}, {2, 3, 4, 1, 5});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_TRUE(same_dims(g[2], Dims4{1, 2, 12, 5, false}));
  EXPECT_TRUE(same_dims(g[1], Dims4{1, 2, 1, 5, false}));
  // Five alternating runs cannot be indexed by the rank-4 kernel: the op is refused.
  EXPECT_TRUE(fold_broadcast({{2, 3, 2, 3, 2}, {2, 1, 2, 1, 2}}, {2, 3, 2, 3, 2}).empty());
  const KernelSpec spec = kernel_spec(OpKind::kBinary, binary(graph::BinaryOp::kAdd), {desc({2, 3, 2, 3, 2}), desc({2, 1, 2, 1, 2})},
                                    {desc({2, 3, 2, 3, 2})});
  EXPECT_FALSE(binary_operands(spec).folded);
}

// ---- Matmul: the cuBLAS arguments -------------------------------------------------------------------

// C = A · B in cuBLAS's column-major terms (no transposes), from the call's arguments exactly.
void column_major_gemm(const GemmCall& g, const float* a, const float* b, float* c) {
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const float* ab = a + g.offset_a + batch * g.stride_a;
    const float* bb = b + g.offset_b + batch * g.stride_b;
    float* cb = c + g.offset_c + batch * g.stride_c;
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < g.k; ++l) sum += static_cast<double>(ab[i + l * g.lda]) * bb[l + j * g.ldb];
        cb[i + j * g.ldc] = static_cast<float>(sum);
      }
  }
}

TEST(CudaRowMajorOps, MatmulGemmArgumentsComputeTheCpuMatmul) {
  struct Case {
    Shape a, b;
    size_t calls;  // cuBLAS calls: 1 when the broadcast is over whole trailing batch dimensions
  };
  const Case cases[] = {
      {{2, 3, 4}, {2, 4, 5}, 1},
      {{1, 3, 4}, {2, 4, 5}, 1},  // the first input shared by every batch: stride 0
      {{2, 3, 4}, {1, 4, 5}, 1},
      {{2, 3, 7, 4}, {2, 3, 4, 5}, 1},  // 6 batches in one call
      {{2, 3, 7, 4}, {1, 1, 4, 5}, 1},
      {{2, 3, 7, 4}, {2, 1, 4, 5}, 2},  // b broadcast over the heads only: one call per sample
      {{1, 3, 7, 4}, {2, 1, 4, 5}, 2},  // both broadcast, crosswise
      {{2, 1, 3, 5, 4}, {1, 4, 3, 4, 2}, 8},
      {{2, 64, 49}, {2, 49, 64}, 1},  // vit_tiny's heads at a small size
  };
  for (const Case& c : cases) {
    const size_t r = c.a.rank();
    std::vector<int64_t> out(r);
    for (size_t d = 0; d + 2 < r; ++d) out[d] = std::max(c.a[d], c.b[d]);
    out[r - 2] = c.a[r - 2];
    out[r - 1] = c.b[r - 1];
    const KernelSpec spec =
        kernel_spec(OpKind::kMatMul, graph::NoAttrs{}, {desc(c.a), desc(c.b)}, {desc(Shape(out))});
    const Floats a = random_of(spec.srcs[0], 13), b = random_of(spec.srcs[1], 14);
    const std::vector<GemmCall> calls = matmul_gemms(c.a, c.b);
    const std::string what = cat(c.a.to_string(), " x ", c.b.to_string());
    EXPECT_EQ(calls.size(), c.calls) << what;
    Floats got(static_cast<size_t>(spec.dsts[0].shape.numel()), std::nanf(""));
    // cuBLAS's A is the second input, its B the first (Cᵀ = Bᵀ · Aᵀ).
    for (const GemmCall& g : calls) column_major_gemm(g, b.data(), a.data(), got.data());
    EXPECT_LT(relative_difference(got, run_cpu(spec, {a, b})), 1e-5) << what;
  }
}

// ---- Reshape and concatenation between row-major tensors and CUDA layouts --------------------------

TEST(CudaRowMajorOps, ReshapeAndConcatOfRowMajorTensorsMatchTheCpu) {
  // vit_tiny's head: a channel slice [N, d, H, W] (NHWC on f16) read as rows [N, d, T], and back.
  struct Case {
    TensorDesc in, out;
    graph::ReshapeAttrs attrs;
  };
  graph::ReshapeAttrs rows;
  rows.full = true;
  rows.dims = {2, 6, 20};
  graph::ReshapeAttrs map;
  map.dims = {6, 4, 5};
  graph::ReshapeAttrs heads;
  heads.full = true;
  heads.dims = {2, 3, 2, 20};
  const Case cases[] = {{desc({2, 6, 4, 5}, Layout::kNHWC), desc({2, 6, 20}), rows},
                        {desc({2, 6, 4, 5}, Layout::kNCHW), desc({2, 6, 20}), rows},
                        {desc({2, 6, 20}), desc({2, 6, 4, 5}, Layout::kNHWC), map},
                        {desc({2, 6, 20}), desc({2, 3, 2, 20}), heads}};
  for (const Case& c : cases) {
    const KernelSpec spec = kernel_spec(OpKind::kReshape, c.attrs, {c.in}, {c.out});
    const Floats x = random_of(c.in, 15);
    const Dims4 xd = dims_of(c.in), yd = dims_of(c.out);
    const auto [got, got_half] =
        run_body(x, yd.numel(), [&](const auto* src, auto* dst, int64_t i) { reshape_at(src, xd, dst, yd, i); });
    const Floats want = run_cpu(spec, {x});
    const std::string what = cat(c.in.describe(), " -> ", c.out.describe());
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(got_half, rounded(want)) << what << " in f16";
  }
  // A concatenation along dimension 1 of row-major tensors: each part copied as a channel window.
  const TensorDesc p0 = desc({2, 3, 4, 5}), p1 = desc({2, 2, 4, 5}), whole = desc({2, 5, 4, 5});
  const TensorDesc q0 = desc({2, 3, 7}), q1 = desc({2, 4, 7}), q = desc({2, 7, 7});
  for (const auto& [parts, out] : {std::pair{std::vector{p0, p1}, whole}, std::pair{std::vector{q0, q1}, q}}) {
    std::vector<Floats> data;
    for (size_t i = 0; i < parts.size(); ++i) data.push_back(random_of(parts[i], 16 + static_cast<uint32_t>(i)));
    const Floats want = run_cpu(kernel_spec(OpKind::kConcat, graph::ConcatAttrs{}, parts, {out}), data);
    Floats got(want.size());
    const Dims4 od = dims_of(out);
    int64_t c0 = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Dims4 pd = dims_of(parts[i]);
      for (int64_t k = 0; k < pd.numel(); ++k) copy_channels_at(data[i].data(), pd, 0, got.data(), od, c0, pd.c, k);
      c0 += pd.c;
    }
    EXPECT_EQ(got, want) << out.describe();
  }
}

}  // namespace
}  // namespace stagecraft::executor::cuda
