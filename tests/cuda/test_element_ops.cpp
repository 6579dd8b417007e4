// The CUDA backend's own kernels without a GPU: the per-element bodies of
// executor/cuda/element_ops.h (what each thread of kernels.cu computes) run on the host over every
// thread index, with the parameters the builders derive from the spec (op_params.h), and are
// compared with the CPU backend on the same op; a traced element type
// records which addresses each thread reads and writes, so that coalescing (neighbouring threads at
// neighbouring addresses, channel-innermost in NHWC) is checked too. These tests run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cuda/element_ops.h"
#include "executor/cuda/movement_ops.h"
#include "executor/cuda/op_params.h"
#include "executor/kernel_math.h"
#include "executor/op_rules.h"
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
using stagecraft::testing::Bytes;
using stagecraft::testing::kernel_spec;

constexpr int kWarpSize = 32;
constexpr int kSegmentBytes = 128;  // a warp's access is served in 128-byte segments

// ---- A traced element type: its loads and stores are recorded (found by argument-dependent
// lookup from the bodies' unqualified load/store calls) ------------------------------------------

struct Traced {
  float v = 0;
};
struct Trace {
  std::vector<int64_t> loads, stores;
};
Trace* g_trace = nullptr;
float load(const Traced* p, int64_t i) {
  if (g_trace) g_trace->loads.push_back(i);
  return p[i].v;
}
void store(Traced* p, int64_t i, float v) {
  if (g_trace) g_trace->stores.push_back(i);
  p[i].v = v;
}

// The mean number of 128-byte segments a warp of 32 consecutive threads touches per access step
// (the k-th load, or store, of each thread), for elements of `bytes` bytes: 1-2 is coalesced, 32
// is one segment per thread.
double segments_per_access(int64_t threads, int bytes, const std::function<void(int64_t)>& body,
                           bool loads) {
  std::vector<std::vector<int64_t>> per_thread(static_cast<size_t>(threads));
  for (int64_t i = 0; i < threads; ++i) {
    Trace t;
    g_trace = &t;
    body(i);
    g_trace = nullptr;
    per_thread[static_cast<size_t>(i)] = loads ? t.loads : t.stores;
  }
  double total = 0;
  int64_t accesses = 0;
  for (int64_t w = 0; w < threads; w += kWarpSize) {
    size_t steps = 0;
    for (int64_t i = w; i < std::min(threads, w + kWarpSize); ++i) steps = std::max(steps, per_thread[i].size());
    for (size_t k = 0; k < steps; ++k) {
      std::set<int64_t> segments;
      for (int64_t i = w; i < std::min(threads, w + kWarpSize); ++i) {
        if (k < per_thread[i].size()) segments.insert(per_thread[i][k] * bytes / kSegmentBytes);
      }
      total += static_cast<double>(segments.size());
      ++accesses;
    }
  }
  return accesses ? total / static_cast<double>(accesses) : 0;
}

std::vector<Traced> traced(int64_t n) {
  std::vector<Traced> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i].v = static_cast<float>(i % 17) - 8.0f;
  return v;
}

Dims4 dims(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  Dims4 d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.nhwc = nhwc;
  return d;
}

TEST(CudaElementOps, ThreadIndexIsTheMemoryOffsetInBothLayouts) {
  for (bool nhwc : {false, true}) {
    const Dims4 d = dims(2, 5, 3, 7, nhwc);
    for (int64_t i = 0; i < d.numel(); ++i) {
      const Coords p = coords_at(d, i);
      ASSERT_EQ(offset(d, p.n, p.c, p.h, p.w), i) << (nhwc ? "nhwc" : "nchw") << " index " << i;
      ASSERT_EQ(channel_at(d, i), p.c);
    }
    // NHWC: the channel moves fastest; NCHW: the column.
    EXPECT_EQ(coords_at(d, 1).c, nhwc ? 1 : 0);
    EXPECT_EQ(coords_at(d, 1).w, nhwc ? 0 : 1);
  }
}

TEST(CudaElementOps, NhwcPoolingAndCopiesAreCoalesced) {
  const Dims4 in = dims(1, 64, 9, 9, true), out = dims(1, 64, 5, 5, true);
  PoolParams p;
  p.kh = p.kw = 3;
  p.sh = p.sw = 2;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.mode = PoolMode::kAvgExcludePad;
  auto x = traced(in.numel()), y = traced(out.numel());
  const auto pool = [&](int64_t i) { pool_at(x.data(), in, y.data(), out, p, i); };
  EXPECT_LE(segments_per_access(out.numel(), 4, pool, true), 2.0);
  EXPECT_LE(segments_per_access(out.numel(), 4, pool, false), 2.0);

  // What the kernels did before: threads in NCHW order over an NHWC tensor (neighbouring threads
  // are neighbouring columns, C elements apart). The measure sees it.
  const auto nchw_order = [&](int64_t i) {
    Dims4 logical = out;
    logical.nhwc = false;
    const Coords o = coords_at(logical, i);
    load(x.data(), offset(in, o.n, o.c, o.h * 2, o.w * 2));
  };
  EXPECT_GE(segments_per_access(out.numel(), 4, nchw_order, true), 16.0);

  // Concatenation part (channels 16..47 of a 96-channel NHWC tensor), padding, conversion,
  // requantisation, global pooling.
  const Dims4 part = dims(2, 32, 6, 6, true), whole = dims(2, 96, 6, 6, true);
  auto a = traced(part.numel()), b = traced(whole.numel());
  const auto copy = [&](int64_t i) { copy_channels_at(a.data(), part, 0, b.data(), whole, 16, 32, i); };
  EXPECT_LE(segments_per_access(part.numel(), 4, copy, true), 2.0);
  EXPECT_LE(segments_per_access(part.numel(), 4, copy, false), 2.0);
  const Dims4 padded = dims(2, 32, 8, 9, true);
  auto c = traced(padded.numel());
  const auto pad = [&](int64_t i) { pad_at(a.data(), part, c.data(), padded, 1, 2, 0.f, i); };
  EXPECT_LE(segments_per_access(padded.numel(), 4, pad, true), 2.0);
  EXPECT_LE(segments_per_access(padded.numel(), 4, pad, false), 2.0);
  auto d = traced(part.numel());
  const auto convert = [&](int64_t i) { convert_at(a.data(), part, d.data(), part, 0.5f, i); };
  EXPECT_LE(segments_per_access(part.numel(), 4, convert, true), 2.0);
  const Dims4 gin = dims(2, 64, 5, 5, true);
  auto g = traced(gin.numel()), gout = traced(2 * 64);
  const auto gap = [&](int64_t i) { global_avg_at(g.data(), gin, gout.data(), i); };
  EXPECT_LE(segments_per_access(2 * 64, 4, gap, true), 2.0);
}

TEST(CudaElementOps, NchwGlobalPoolingLanesReadNeighbouringAddresses) {
  const Dims4 in = dims(1, 2, 7, 7, false);
  auto x = traced(in.numel());
  for (int64_t nc = 0; nc < 2; ++nc) {
    const auto lanes = [&](int64_t lane) {
      plane_partial_sum(x.data(), in, nc, static_cast<int>(lane), kWarpSize);
    };
    EXPECT_LE(segments_per_access(kWarpSize, 4, lanes, true), 2.0);
    float sum = 0, want = 0;
    for (int lane = 0; lane < kWarpSize; ++lane) sum += plane_partial_sum(x.data(), in, nc, lane, kWarpSize);
    for (int64_t j = 0; j < 49; ++j) want += x[static_cast<size_t>(nc * 49 + j)].v;
    EXPECT_FLOAT_EQ(sum, want);
  }
}

TEST(CudaElementOps, SameLayoutCopiesUseTheWidestAlignedUnit) {
  alignas(16) static uint8_t buffer[64];
  const auto base = reinterpret_cast<uintptr_t>(buffer);
  // f32 NHWC, 32 of 96 channels from channel 16: 128-byte rows at 16-byte aligned offsets.
  RowsCopy r = plan_rows_copy(4, dims(2, 32, 6, 6, true), 0, base, dims(2, 96, 6, 6, true), 16, base, 32);
  EXPECT_EQ(r.unit, 16);
  EXPECT_EQ(r.rows, 72);
  EXPECT_EQ(r.row_units, 8);
  EXPECT_EQ(r.dst_stride, 24);
  EXPECT_EQ(r.dst_offset, 4);
  // 3 channels of f32 at channel 1: 12-byte rows, 4-byte unit.
  EXPECT_EQ(plan_rows_copy(4, dims(1, 3, 4, 4, true), 0, base, dims(1, 8, 4, 4, true), 1, base, 3).unit, 4);
  // A misaligned destination address lowers the unit.
  EXPECT_EQ(plan_rows_copy(4, dims(1, 8, 4, 4, true), 0, base, dims(1, 8, 4, 4, true), 0, base + 4, 8).unit, 4);
  // u8, 5 channels: single bytes. NCHW: a whole channel slice of an image is one row.
  EXPECT_EQ(plan_rows_copy(1, dims(1, 5, 3, 3, true), 0, base, dims(1, 9, 3, 3, true), 2, base, 5).unit, 1);
  r = plan_rows_copy(4, dims(2, 4, 4, 4, false), 0, base, dims(2, 12, 4, 4, false), 8, base, 4);
  EXPECT_EQ(r.rows, 2);
  EXPECT_EQ(r.unit, 16);
  // Different layouts are not rows.
  EXPECT_EQ(plan_rows_copy(4, dims(1, 4, 2, 2, false), 0, base, dims(1, 4, 2, 2, true), 0, base, 4).unit, 0);
}

TEST(CudaElementOps, RowsCopyMovesTheSameBytesAsTheElementCopy) {
  std::mt19937 rng(3);
  for (bool nhwc : {false, true}) {
    for (int64_t channels : {3, 8, 12}) {
      const Dims4 sd = dims(2, 20, 5, 3, nhwc), dd = dims(2, 17, 5, 3, nhwc);
      std::vector<float> src(static_cast<size_t>(sd.numel()));
      for (float& v : src) v = static_cast<float>(rng() % 1000);
      std::vector<float> want(static_cast<size_t>(dd.numel()), -1.f), got = want;
      for (int64_t i = 0; i < dd.n * channels * dd.h * dd.w; ++i) {
        copy_channels_at(src.data(), sd, 4, want.data(), dd, 5, channels, i);
      }
      const RowsCopy r = plan_rows_copy(4, sd, 4, reinterpret_cast<uintptr_t>(src.data()), dd, 5,
                                        reinterpret_cast<uintptr_t>(got.data()), channels);
      ASSERT_EQ(r.unit, 4);  // offsets of 4 and 5 channels: 4-byte units
      const auto* s = reinterpret_cast<const uint32_t*>(src.data());
      auto* d = reinterpret_cast<uint32_t*>(got.data());
      for (int64_t i = 0; i < r.units(); ++i) rows_copy_at(s, d, r, i);
      EXPECT_EQ(got, want) << (nhwc ? "nhwc" : "nchw") << " channels " << channels;
    }
  }
}

// ---- The bodies against the CPU backend --------------------------------------------------------

Backend& cpu() { return stagecraft::testing::cpu_backend(); }

TensorDesc desc(Shape shape, Layout layout, DataType dtype = DataType::kF32, float scale = 1.0f) {
  TensorDesc d = graph::make_desc(std::move(shape), dtype);
  d.layout = layout;
  d.scale = scale;
  return d;
}

Bytes random_bytes(const TensorDesc& d, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(static_cast<size_t>(d.bytes()));
  if (d.dtype == DataType::kF32) {
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    auto* f = reinterpret_cast<float*>(b.data());
    for (int64_t i = 0; i < d.shape.numel(); ++i) f[i] = u(rng);
  } else {
    for (auto& v : b) v = static_cast<uint8_t>(rng());
  }
  return b;
}

float value(const Bytes& b, DataType t, int64_t i) {
  switch (t) {
    case DataType::kU8:
      return b[static_cast<size_t>(i)];
    case DataType::kI8:
      return static_cast<int8_t>(b[static_cast<size_t>(i)]);
    default:
      return reinterpret_cast<const float*>(b.data())[i];
  }
}

// Runs `spec` (or a copy when spec.kind is kIdentity and copy is set) on the CPU backend.
std::vector<Bytes> run_cpu(const KernelSpec& spec, const std::vector<Bytes>& srcs, bool copy = false) {
  auto kernel = copy ? cpu().create_copy(spec.srcs[0], spec.dsts[0]) : cpu().create_kernel(spec);
  return stagecraft::testing::run_kernel(cpu(), *kernel, spec, srcs);
}

// The largest |difference| between two tensors of one descriptor, in its units.
double max_difference(const Bytes& a, const Bytes& b, const TensorDesc& d) {
  double worst = 0;
  for (int64_t i = 0; i < d.shape.numel(); ++i) {
    worst = stagecraft::testing::worst_of(worst, static_cast<double>(std::fabs(value(a, d.dtype, i) - value(b, d.dtype, i))));
  }
  return worst;
}

template <class T>
T* as(Bytes& b) {
  return reinterpret_cast<T*>(b.data());
}
template <class T>
const T* as(const Bytes& b) {
  return reinterpret_cast<const T*>(b.data());
}

struct PoolCase {
  OpKind kind;
  int64_t kernel, stride, pad;
  bool include_pad, ceil;
  int64_t in, out;
};

TEST(CudaElementOps, PoolingMatchesTheCpu) {
  const PoolCase cases[] = {{OpKind::kMaxPool, 3, 2, 1, false, false, 9, 5},
                            {OpKind::kAvgPool, 3, 2, 1, true, false, 9, 5},
                            {OpKind::kAvgPool, 3, 2, 1, false, false, 9, 5},
                            {OpKind::kMaxPool, 2, 2, 0, false, true, 7, 4},
                            {OpKind::kAvgPool, 3, 1, 1, false, false, 6, 6}};
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    for (const PoolCase& c : cases) {
      KernelSpec spec;
      spec.kind = c.kind;
      const graph::Pads pads{c.pad, c.pad, c.pad, c.pad};
      if (c.kind == OpKind::kMaxPool) {
        spec.attrs = graph::MaxPoolAttrs{graph::Hw::square(c.kernel), graph::Hw::square(c.stride), pads, c.ceil};
      } else {
        spec.attrs = graph::AvgPoolAttrs{graph::Hw::square(c.kernel), graph::Hw::square(c.stride), pads,
                                         c.ceil, c.include_pad};
      }
      spec.srcs = {desc(Shape{2, 12, c.in, c.in}, layout)};
      spec.dsts = {desc(Shape{2, 12, c.out, c.out}, layout)};
      spec.name = "pool";
      const Bytes x = random_bytes(spec.srcs[0], 11);
      const Bytes want = run_cpu(spec, {x})[0];
      Bytes got(want.size());
      PoolParams p;
      p.kh = p.kw = static_cast<int>(c.kernel);
      p.sh = p.sw = static_cast<int>(c.stride);
      p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = static_cast<int>(c.pad);
      p.mode = c.kind == OpKind::kMaxPool ? PoolMode::kMax
               : c.include_pad            ? PoolMode::kAvgIncludePad
                                          : PoolMode::kAvgExcludePad;
      const Dims4 in = dims_of(spec.srcs[0]), out = dims_of(spec.dsts[0]);
      for (int64_t i = 0; i < out.numel(); ++i) pool_at(as<float>(x), in, as<float>(got), out, p, i);
      EXPECT_LT(max_difference(got, want, spec.dsts[0]), 1e-5)
          << graph::to_string(c.kind) << " " << graph::to_string(layout) << " k" << c.kernel
          << (c.include_pad ? " include pad" : "") << (c.ceil ? " ceil" : "");
    }
  }
}

TEST(CudaElementOps, GlobalPoolingPadAndCopiesMatchTheCpu) {
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    const std::string where(graph::to_string(layout));
    const TensorDesc x_desc = desc(Shape{2, 10, 5, 6}, layout);
    const Bytes x = random_bytes(x_desc, 5);
    const Dims4 xd = dims_of(x_desc);
    {  // global average pooling: the per-thread body (NHWC) and the warp lanes (NCHW)
      const KernelSpec spec =
          kernel_spec(OpKind::kGlobalAvgPool, graph::NoAttrs{}, {x_desc}, {desc(Shape{2, 10, 1, 1}, layout)});
      const Bytes want = run_cpu(spec, {x})[0];
      Bytes got(want.size());
      for (int64_t nc = 0; nc < 20; ++nc) {
        if (layout == Layout::kNHWC) {
          global_avg_at(as<float>(x), xd, as<float>(got), nc);
        } else {
          float sum = 0;
          for (int lane = 0; lane < kWarpSize; ++lane) sum += plane_partial_sum(as<float>(x), xd, nc, lane, kWarpSize);
          as<float>(got)[nc] = sum / 30.f;
        }
      }
      EXPECT_LT(max_difference(got, want, spec.dsts[0]), 1e-5) << "global pool " << where;
    }
    {  // pad with a crop on the top (the CPU pads with zeros only)
      graph::PadAttrs a;
      a.pads = graph::Pads{-1, 0, 1, 2};
      const KernelSpec spec = kernel_spec(OpKind::kPad, a, {x_desc}, {desc(Shape{2, 10, 5, 8}, layout)});
      const Bytes want = run_cpu(spec, {x})[0];
      Bytes got(want.size());
      const Dims4 out = dims_of(spec.dsts[0]);
      for (int64_t i = 0; i < out.numel(); ++i) pad_at(as<float>(x), xd, as<float>(got), out, -1, 0, 0.f, i);
      EXPECT_EQ(max_difference(got, want, spec.dsts[0]), 0.0) << "pad " << where;
    }
    {  // concatenation of two parts (one in the other layout): copy_channels_at and, when the
       // layouts agree, the rows copy
      const Layout other = layout == Layout::kNCHW ? Layout::kNHWC : Layout::kNCHW;
      const TensorDesc part = desc(Shape{2, 4, 5, 6}, other);
      const KernelSpec spec =
          kernel_spec(OpKind::kConcat, graph::NoAttrs{}, {x_desc, part}, {desc(Shape{2, 14, 5, 6}, layout)});
      const Bytes y = random_bytes(part, 6);
      const Bytes want = run_cpu(spec, {x, y})[0];
      Bytes got(want.size());
      const Dims4 out = dims_of(spec.dsts[0]), pd = dims_of(part);
      const RowsCopy r = plan_rows_copy(4, xd, 0, reinterpret_cast<uintptr_t>(x.data()), out, 0,
                                        reinterpret_cast<uintptr_t>(got.data()), 10);
      ASSERT_NE(r.unit, 0);
      for (int64_t i = 0; i < r.units(); ++i) {
        if (r.unit == 4) rows_copy_at(as<uint32_t>(x), as<uint32_t>(got), r, i);
        if (r.unit == 8) rows_copy_at(as<Bytes8>(x), as<Bytes8>(got), r, i);
        if (r.unit == 16) rows_copy_at(as<Bytes16>(x), as<Bytes16>(got), r, i);
      }
      for (int64_t i = 0; i < 2 * 4 * 30; ++i) copy_channels_at(as<float>(y), pd, 0, as<float>(got), out, 10, 4, i);
      EXPECT_EQ(max_difference(got, want, spec.dsts[0]), 0.0) << "concat " << where;
    }
    {  // quantisation into u8 (scale 0.02) in the other layout: convert_at against the CPU's copy
      const Layout other = layout == Layout::kNCHW ? Layout::kNHWC : Layout::kNCHW;
      const TensorDesc q = desc(Shape{2, 10, 5, 6}, other, DataType::kU8, 0.02f);
      const KernelSpec spec = kernel_spec(OpKind::kIdentity, graph::NoAttrs{}, {x_desc}, {q});
      const Bytes want = run_cpu(spec, {x}, /*copy=*/true)[0];
      Bytes got(want.size());
      const Dims4 qd = dims_of(q);
      for (int64_t i = 0; i < qd.numel(); ++i) convert_at(as<float>(x), xd, as<uint8_t>(got), qd, 1.0f / 0.02f, i);
      EXPECT_LE(max_difference(got, want, q), 1.0) << "quantise " << where;
    }
  }
}

TEST(CudaElementOps, QuantisedAdditionMatchesTheCpu) {
  const TensorDesc a = desc(Shape{1, 8, 4, 4}, Layout::kNHWC, DataType::kU8, 0.05f);
  const TensorDesc b = desc(Shape{1, 8, 4, 4}, Layout::kNHWC, DataType::kI8, 0.03f);
  const TensorDesc y = desc(Shape{1, 8, 4, 4}, Layout::kNHWC, DataType::kU8, 0.04f);
  graph::AddAttrs attrs;
  attrs.activation = graph::Activation::kRelu;
  const KernelSpec spec = kernel_spec(OpKind::kAdd, attrs, {a, b}, {y});
  const Bytes xa = random_bytes(a, 1), xb = random_bytes(b, 2);
  const Bytes want = run_cpu(spec, {xa, xb})[0];
  ScaledInputs<2> in{};
  in.p[0] = xa.data();
  in.p[1] = xb.data();
  in.elem[0] = Elem::kU8;
  in.elem[1] = Elem::kI8;
  in.factor[0] = 0.05f / 0.04f;
  in.factor[1] = 0.03f / 0.04f;
  Bytes got(want.size());
  for (int64_t i = 0; i < 128; ++i) {
    add_scaled_at(in, 2, as<uint8_t>(got), i, Act::kRelu, relu6_bound(y));
  }
  EXPECT_LE(max_difference(got, want, y), 1.0);
  EXPECT_EQ(relu6_bound(y), 6.0f / 0.04f);
}

// An int8 convolution the way conv_int8.cpp runs it: weights quantised and re-ordered to OHWI with
// channels padded to 4 (kernel_math.h), an input copy padded (and halved for u8) to 4 channels,
// the int32 NHWC convolution cuDNN computes (emulated here), then the requantising epilogue with
// requantisation() told of the halving. Against the CPU's int8 convolution.
TEST(CudaElementOps, Int8ConvolutionPathMatchesTheCpu) {
  for (DataType src_type : {DataType::kI8, DataType::kU8}) {
    const graph::Conv2dAttrs a = stagecraft::testing::int8_test_conv(3, 6);
    graph::OpWeights w;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (int i = 0; i < 6 * 3 * 9; ++i) w.weight.push_back(u(rng));
    for (int i = 0; i < 6; ++i) w.bias.push_back(u(rng));
    const TensorDesc src = desc(Shape{1, 3, 7, 7}, Layout::kNHWC, src_type, 0.02f);
    const TensorDesc dst = desc(Shape{1, 6, 4, 4}, Layout::kNHWC, DataType::kU8, 0.03f);
    const KernelSpec spec = kernel_spec(OpKind::kConv2d, a, {src}, {dst}, &w);
    // Inputs below 128: oneDNN's u8 × s8 kernels on CPUs without VNNI multiply-add pairs into
    // saturating 16-bit sums (vpmaddubsw), which full-range u8 inputs with 127-magnitude weights
    // overflow; activations of real networks stay clear of that, and so does this test.
    Bytes x = random_bytes(src, 4);
    if (src_type == DataType::kU8) {
      for (auto& v : x) v &= 0x7f;
    }
    const Bytes want = run_cpu(spec, {x})[0];

    const bool halve = src_type == DataType::kU8;
    const int64_t cin4 = 4, k4 = 8;
    const QuantisedWeights qw = quantise_per_channel(w.weight, 6);
    const std::vector<int8_t> ohwi = oihw_to_ohwi(qw.values, conv_weight_dims(a), k4, cin4);
    const Requantisation r = requantisation(src, dst, qw.scales, w.bias, {}, halve ? 2.0f : 1.0f);
    // The padded (halved) input copy.
    const Dims4 sd = dims_of(src), pd = dims(1, cin4, 7, 7, true);
    std::vector<int8_t> padded(static_cast<size_t>(pd.numel()));
    for (int64_t i = 0; i < pd.numel(); ++i) {
      if (halve) convert_at(as<uint8_t>(x), sd, padded.data(), pd, 0.5f, i);
      else convert_at(as<int8_t>(x), sd, padded.data(), pd, 1.0f, i);
    }
    // cuDNN's int32 NHWC convolution into an f32 accumulator with k4 channels.
    const Dims4 ad = dims(1, k4, 4, 4, true), yd = dims_of(dst);
    std::vector<float> acc(static_cast<size_t>(ad.numel()));
    for (int64_t oy = 0; oy < 4; ++oy)
      for (int64_t ox = 0; ox < 4; ++ox)
        for (int64_t k = 0; k < k4; ++k) {
          int32_t sum = 0;
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
              if (iy < 0 || iy >= 7 || ix < 0 || ix >= 7) continue;
              for (int64_t c = 0; c < cin4; ++c) {
                sum += padded[static_cast<size_t>(offset(pd, 0, c, iy, ix))] *
                       ohwi[static_cast<size_t>(((k * 3 + ky) * 3 + kx) * cin4 + c)];
              }
            }
          acc[static_cast<size_t>(offset(ad, 0, k, oy, ox))] = static_cast<float>(sum);
        }
    Bytes got(want.size());
    for (int64_t i = 0; i < yd.numel(); ++i) {
      requantize_at(acc.data(), ad, r.bias.data(), r.output_scales.data(), Act::kRelu6, r.relu6_max,
                    as<uint8_t>(got), yd, i);
    }
    // i8 inputs compute what the CPU computes (a rounding step at most); halved u8 inputs lose a
    // bit of the input, a few output steps.
    EXPECT_LE(max_difference(got, want, dst), halve ? 4.0 : 1.0) << graph::to_string(src_type);
  }
}


// ---- Op kinds added with PyTorch-exported models ----------------------------------------------

// Uniform in [-lo, hi): the breakpoints of hard sigmoid and hard swish (±3) fall inside.
Bytes wide_floats(const TensorDesc& d, uint32_t seed, float lo = -5.f, float hi = 5.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Bytes b(static_cast<size_t>(d.bytes()));
  for (int64_t i = 0; i < d.shape.numel(); ++i) as<float>(b)[i] = u(rng);
  return b;
}

// The largest |got - want| relative to max(1, max |want|).
double relative_difference(const Bytes& got, const Bytes& want, const TensorDesc& d) {
  double scale = 1;
  for (int64_t i = 0; i < d.shape.numel(); ++i) scale = std::max(scale, std::fabs(static_cast<double>(as<float>(want)[i])));
  return max_difference(got, want, d) / scale;
}

TEST(CudaElementOps, StandaloneActivationsMatchTheCpu) {
  graph::HardSigmoidAttrs onnx;  // ONNX's default slope, not PyTorch's
  onnx.alpha = 0.2;
  graph::LeakyReluAttrs leaky;
  leaky.alpha = 0.1;
  graph::ClipAttrs clip;
  clip.min = -0.5;
  clip.max = 0.8;
  const std::pair<OpKind, graph::OpAttrs> kinds[] = {
      {OpKind::kClip, clip},                             {OpKind::kTanh, graph::NoAttrs{}},
      {OpKind::kHardSigmoid, graph::HardSigmoidAttrs{}}, {OpKind::kHardSigmoid, onnx},
      {OpKind::kHardSwish, graph::NoAttrs{}},            {OpKind::kSilu, graph::NoAttrs{}},
      {OpKind::kLeakyRelu, leaky},                       {OpKind::kLeakyRelu, graph::LeakyReluAttrs{}},
      {OpKind::kSigmoid, graph::NoAttrs{}},              {OpKind::kRelu6, graph::NoAttrs{}}};
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    const TensorDesc d = desc(Shape{2, 6, 5, 7}, layout);
    const Bytes x = wide_floats(d, 3);
    for (const auto& [kind, attrs] : kinds) {
      const KernelSpec spec = kernel_spec(kind, attrs, {d}, {d});
      const Bytes want = run_cpu(spec, {x})[0];
      const ActParams a = act_params(spec);
      Bytes got(want.size());
      for (int64_t i = 0; i < d.shape.numel(); ++i) act_at(as<float>(x), as<float>(got), i, a);
      EXPECT_LT(relative_difference(got, want, d), 1e-5)
          << graph::to_string(kind) << " " << graph::to_string(layout) << " " << graph::attrs_signature(attrs);
    }
  }
  // The parameters reach the kernel: a leaky slope of 0.1 is not ReLU, ONNX's hard sigmoid is
  // not PyTorch's.
  const TensorDesc d = desc(Shape{1, 1, 1, 1}, Layout::kNCHW);
  EXPECT_FLOAT_EQ(activate(-2.f, act_params(kernel_spec(OpKind::kLeakyRelu, leaky, {d}, {d}))), -0.2f);
  EXPECT_FLOAT_EQ(activate(1.f, act_params(kernel_spec(OpKind::kHardSigmoid, onnx, {d}, {d}))), 0.7f);
  EXPECT_FLOAT_EQ(activate(2.f, act_params(kernel_spec(OpKind::kClip, clip, {d}, {d}))), 0.8f);
  EXPECT_FLOAT_EQ(activate(-2.f, act_params(kernel_spec(OpKind::kClip, clip, {d}, {d}))), -0.5f);
  EXPECT_FLOAT_EQ(activate(0.25f, act_params(kernel_spec(OpKind::kSqrt, graph::NoAttrs{}, {d}, {d}))), 0.5f);
}

// The fused activations run in every epilogue (conv, linear, add, binary) through activate(); the
// CPU's addition with each fused activation is the reference here.
TEST(CudaElementOps, FusedActivationsMatchTheCpu) {
  const TensorDesc d = desc(Shape{1, 8, 4, 5}, Layout::kNHWC);
  const Bytes a = wide_floats(d, 1, -3.f, 3.f), b = wide_floats(d, 2, -3.f, 3.f);
  for (graph::Activation act : {graph::Activation::kHardSigmoid, graph::Activation::kHardSwish,
                                graph::Activation::kSilu, graph::Activation::kSigmoid, graph::Activation::kRelu6}) {
    graph::AddAttrs attrs;
    attrs.activation = act;
    const KernelSpec spec = kernel_spec(OpKind::kAdd, attrs, {d, d}, {d});
    const Bytes want = run_cpu(spec, {a, b})[0];
    Bytes got(want.size());
    const float* srcs[] = {as<float>(a), as<float>(b)};
    for (int64_t i = 0; i < d.shape.numel(); ++i) add_at(srcs, 2, as<float>(got), i, act_of(act), relu6_bound(d));
    EXPECT_LT(relative_difference(got, want, d), 1e-5) << graph::to_string(act);
  }
}

struct BinaryCase {
  const char* what;
  graph::BinaryAttrs attrs;
  Shape a, b;  // b unused with a constant
  Layout layout;
};

graph::BinaryAttrs binary_attrs(graph::BinaryOp op, std::vector<int64_t> constant = {}, bool first = false,
                                graph::Activation act = graph::Activation::kNone) {
  graph::BinaryAttrs a;
  a.op = op;
  a.constant = std::move(constant);
  a.constant_first = first;
  a.activation = act;
  return a;
}

// Runs binary_at over every destination offset with the operands binary_operands() picks, and
// checks that the packed kernel's body (x read at the destination's offsets) agrees where it runs.
Bytes run_binary_body(const KernelSpec& spec, const std::vector<Bytes>& srcs, const std::vector<float>& constant) {
  const BinaryOperands ops = binary_operands(spec);
  const TensorDesc& y = spec.dsts[0];
  const Dims4 yd = dims_of(y);
  Bytes got(static_cast<size_t>(y.bytes()));
  const float* x = as<float>(srcs[static_cast<size_t>(ops.x_src)]);
  const float* o = ops.o_src < 0 ? constant.data() : as<float>(srcs[static_cast<size_t>(ops.o_src)]);
  for (int64_t i = 0; i < yd.numel(); ++i) binary_at(x, ops.xd, o, ops.od, as<float>(got), yd, ops.params, i);
  if (same_dims(ops.xd, yd)) {
    for (int64_t i = 0; i < yd.numel(); ++i) {
      EXPECT_EQ(binary_with(x[i], o, ops.od, yd, ops.params, i), as<float>(got)[i]) << "packed body, offset " << i;
    }
  }
  return got;
}

TEST(CudaElementOps, BinaryOpsMatchTheCpu) {
  using graph::Activation;
  using graph::BinaryOp;
  const BinaryCase cases[] = {
      {"gate (second operand broadcast)", binary_attrs(BinaryOp::kMul), {2, 8, 5, 5}, {2, 8, 1, 1}, Layout::kNCHW},
      {"gate (second operand broadcast)", binary_attrs(BinaryOp::kMul), {2, 8, 5, 5}, {2, 8, 1, 1}, Layout::kNHWC},
      {"same shapes, relu6", binary_attrs(BinaryOp::kSub, {}, false, Activation::kRelu6), {2, 8, 3, 4}, {2, 8, 3, 4},
       Layout::kNHWC},
      {"row broadcast, hard swish", binary_attrs(BinaryOp::kAdd, {}, false, Activation::kHardSwish), {2, 8, 3, 4},
       {1, 1, 3, 4}, Layout::kNCHW},
      {"same shapes, divide", binary_attrs(BinaryOp::kDiv), {2, 8, 3, 4}, {2, 8, 3, 4}, Layout::kNCHW},
      {"per-channel constant", binary_attrs(BinaryOp::kMul, {1, 8, 1, 1}), {2, 8, 5, 5}, {}, Layout::kNHWC},
      {"lower-rank constant, relu", binary_attrs(BinaryOp::kAdd, {8, 1, 1}, false, Activation::kRelu), {2, 8, 5, 5},
       {}, Layout::kNCHW},
      {"scalar constant first (1 - x)", binary_attrs(BinaryOp::kSub, {1, 1, 1, 1}, true), {2, 8, 5, 5}, {},
       Layout::kNHWC},
      {"constant first (c / x), silu", binary_attrs(BinaryOp::kDiv, {1, 8, 1, 1}, true, Activation::kSilu),
       {2, 8, 5, 5}, {}, Layout::kNCHW},
      {"full constant divisor", binary_attrs(BinaryOp::kDiv, {1, 8, 5, 5}), {2, 8, 5, 5}, {}, Layout::kNHWC},
      {"rank 2 with a constant, hard sigmoid", binary_attrs(BinaryOp::kAdd, {10}, false, Activation::kHardSigmoid),
       {4, 10}, {}, Layout::kNC},
      {"rank 2 column broadcast", binary_attrs(BinaryOp::kMul), {4, 10}, {4, 1}, Layout::kNC},
  };
  for (const BinaryCase& c : cases) {
    const TensorDesc a = desc(c.a, c.layout);
    std::vector<TensorDesc> srcs{a};
    std::vector<Bytes> data{wide_floats(a, 21, 0.5f, 3.f)};  // positive: divisions stay tame
    graph::OpWeights w;
    if (c.attrs.constant.empty()) {
      srcs.push_back(desc(c.b, c.layout));
      data.push_back(wide_floats(srcs[1], 22, 0.5f, 3.f));
    } else {
      int64_t n = 1;
      for (int64_t d : c.attrs.constant) n *= d;
      std::mt19937 rng(23);
      std::uniform_real_distribution<float> u(0.5f, 2.f);
      for (int64_t i = 0; i < n; ++i) w.weight.push_back(u(rng));
    }
    const KernelSpec spec = kernel_spec(OpKind::kBinary, c.attrs, srcs, {desc(c.a, c.layout)}, &w);
    const Bytes want = run_cpu(spec, data)[0];
    const Bytes got = run_binary_body(spec, data, w.weight);
    EXPECT_LT(relative_difference(got, want, spec.dsts[0]), 1e-5) << c.what << " " << graph::to_string(c.layout);
  }
}

// The first (n, c, h, w) of `d` where ok(n, c, h, w) is false, as "n,c,h,w"; "" when none.
template <class F>
std::string first_mismatch(const Dims4& d, F ok) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t h = 0; h < d.h; ++h)
        for (int64_t w = 0; w < d.w; ++w)
          if (!ok(n, c, h, w)) return stagecraft::cat(n, ",", c, ",", h, ",", w);
  return "";
}

// The CPU broadcasts only the second operand; the CUDA kernel reads a broadcast first input as the
// second with the operation swapped, in any mix of layouts. Against direct loops.
TEST(CudaElementOps, BinaryBroadcastsTheFirstOperandInAnyLayouts) {
  for (Layout la : {Layout::kNCHW, Layout::kNHWC}) {
    for (Layout lb : {Layout::kNCHW, Layout::kNHWC}) {
      const TensorDesc a = desc(Shape{2, 8, 1, 1}, la), b = desc(Shape{2, 8, 3, 5}, lb), y = desc(Shape{2, 8, 3, 5}, lb);
      const KernelSpec spec = kernel_spec(OpKind::kBinary, binary_attrs(graph::BinaryOp::kSub), {a, b}, {y});
      const BinaryOperands ops = binary_operands(spec);
      EXPECT_EQ(ops.x_src, 1);
      EXPECT_EQ(ops.o_src, 0);
      EXPECT_TRUE(ops.params.swap);
      const Bytes xa = wide_floats(a, 5), xb = wide_floats(b, 6);
      const Bytes got = run_binary_body(spec, {xa, xb}, {});
      const Dims4 ad = dims_of(a), bd = dims_of(b), yd = dims_of(y);
      EXPECT_EQ(first_mismatch(yd, [&](int64_t n, int64_t c, int64_t h, int64_t x) {
                  return as<float>(got)[offset(yd, n, c, h, x)] ==
                         as<float>(xa)[offset(ad, n, c, 0, 0)] - as<float>(xb)[offset(bd, n, c, h, x)];
                }),
                "")
          << graph::to_string(la) << " - " << graph::to_string(lb);
    }
  }
}

// Both inputs broadcast (rows against columns): neither has the destination's shape, the
// element kernel reads both at broadcast offsets.
TEST(CudaElementOps, BinaryBroadcastsBothOperands) {
  const TensorDesc a = desc(Shape{2, 8, 1, 5}, Layout::kNCHW), b = desc(Shape{2, 8, 3, 1}, Layout::kNHWC);
  const TensorDesc y = desc(Shape{2, 8, 3, 5}, Layout::kNHWC);
  const KernelSpec spec = kernel_spec(OpKind::kBinary, binary_attrs(graph::BinaryOp::kAdd), {a, b}, {y});
  const BinaryOperands ops = binary_operands(spec);
  EXPECT_FALSE(ops.params.swap);
  EXPECT_FALSE(same_dims(ops.xd, dims_of(y)));
  const Bytes xa = wide_floats(a, 7), xb = wide_floats(b, 8);
  const Bytes got = run_binary_body(spec, {xa, xb}, {});
  const Dims4 ad = dims_of(a), bd = dims_of(b), yd = dims_of(y);
  EXPECT_EQ(first_mismatch(yd, [&](int64_t n, int64_t c, int64_t h, int64_t x) {
              return as<float>(got)[offset(yd, n, c, h, x)] ==
                     as<float>(xa)[offset(ad, n, c, 0, x)] + as<float>(xb)[offset(bd, n, c, h, 0)];
            }),
            "");
}

// A squeeze-and-excitation gate in NHWC: the stores, the dense operand's loads and the broadcast
// gate's loads are all coalesced (neighbouring threads are neighbouring channels).
TEST(CudaElementOps, NhwcBroadcastBinaryIsCoalesced) {
  const Dims4 yd = dims(1, 64, 6, 6, true), gd = dims(1, 64, 1, 1, true);
  auto x = traced(yd.numel()), g = traced(gd.numel()), y = traced(yd.numel());
  BinaryParams p;
  const auto body = [&](int64_t i) { binary_at(x.data(), yd, g.data(), gd, y.data(), yd, p, i); };
  EXPECT_LE(segments_per_access(yd.numel(), 4, body, true), 2.0);
  EXPECT_LE(segments_per_access(yd.numel(), 4, body, false), 2.0);
}

// Reflect padding, space to depth and reductions over channels and single axes: the own kernels'
// per-element bodies against the CPU backend, in both CUDA layouts (runs without a GPU).
TEST(CudaElementOps, ReflectPadSpaceToDepthAndReductionsMatchTheCpu) {
  for (const Layout layout : {Layout::kNHWC, Layout::kNCHW}) {
    const TensorDesc x_desc = desc(Shape{2, 6, 8, 4}, layout);
    const Dims4 xd = dims_of(x_desc);
    const Bytes x = random_bytes(x_desc, 9);
    const std::string where = cat("in ", graph::to_string(layout));
    const auto check = [&](const KernelSpec& spec, const std::function<void(float*, const Dims4&, int64_t)>& body,
                           const std::string& what) {
      const Bytes want = run_cpu(spec, {x})[0];
      Bytes got(want.size());
      const Dims4 out = dims_of(spec.dsts[0]);
      for (int64_t i = 0; i < out.numel(); ++i) body(as<float>(got), out, i);
      EXPECT_LT(max_difference(got, want, spec.dsts[0]), 1e-5) << what << " " << where;
    };
    graph::PadAttrs pad;
    pad.pads = graph::Pads{1, 3, 2, 0};
    pad.reflect = true;
    check(kernel_spec(OpKind::kPad, pad, {x_desc}, {desc(Shape{2, 6, 11, 7}, layout)}),
          [&](float* y, const Dims4& out, int64_t i) { reflect_pad_at(as<float>(x), xd, y, out, 1, 3, i); },
          "reflect pad");
    graph::SpaceToDepthAttrs s2d;
    s2d.block = 2;
    check(kernel_spec(OpKind::kSpaceToDepth, s2d, {x_desc}, {desc(Shape{2, 24, 4, 2}, layout)}),
          [&](float* y, const Dims4& out, int64_t i) { space_to_depth_at(as<float>(x), xd, y, out, 2, i); },
          "space to depth");
    const struct {
      OpKind kind;
      ReduceMode mode;
      std::vector<int64_t> axes;
      Shape out;
    } reductions[] = {{OpKind::kReduceMean, ReduceMode::kMean, {1}, Shape{2, 1, 8, 4}},
                      {OpKind::kReduceMax, ReduceMode::kMax, {1}, Shape{2, 1, 8, 4}},
                      {OpKind::kReduceSum, ReduceMode::kSum, {1, 3}, Shape{2, 1, 8, 1}},
                      {OpKind::kReduceMean, ReduceMode::kMean, {2}, Shape{2, 6, 1, 4}}};
    for (const auto& r : reductions) {
      graph::ReduceAttrs a;
      a.axes = r.axes;
      check(kernel_spec(r.kind, a, {x_desc}, {desc(r.out, layout)}),
            [&](float* y, const Dims4& out, int64_t i) { reduce_at(as<float>(x), xd, y, out, r.mode, i); },
            std::string(graph::to_string(r.kind)));
    }
  }
}

TEST(CudaElementOps, GlobalMaxPoolingMatchesTheCpu) {
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    const TensorDesc x_desc = desc(Shape{2, 10, 5, 6}, layout);  // 30 < 32: some lanes read nothing
    const Bytes x = wide_floats(x_desc, 8, -4.f, -1.f);            // all negative: no 0 may win
    const Dims4 xd = dims_of(x_desc);
    const KernelSpec spec =
        kernel_spec(OpKind::kGlobalMaxPool, graph::NoAttrs{}, {x_desc}, {desc(Shape{2, 10, 1, 1}, layout)});
    const Bytes want = run_cpu(spec, {x})[0];
    Bytes per_thread(want.size()), lanes(want.size());
    for (int64_t nc = 0; nc < 20; ++nc) {
      global_max_at(as<float>(x), xd, as<float>(per_thread), nc);
      if (layout == Layout::kNCHW) {
        float m = -FLT_MAX;
        for (int lane = 0; lane < kWarpSize; ++lane) m = std::max(m, plane_partial_max(as<float>(x), xd, nc, lane, kWarpSize));
        as<float>(lanes)[nc] = m;
      }
    }
    EXPECT_EQ(max_difference(per_thread, want, spec.dsts[0]), 0.0) << graph::to_string(layout);
    if (layout == Layout::kNCHW) {
      EXPECT_EQ(max_difference(lanes, want, spec.dsts[0]), 0.0) << "warp lanes";
    }
  }
}

TEST(CudaElementOps, ChannelShuffleMatchesTheCpu) {
  for (int64_t groups : {2, 3, 4}) {
    graph::ChannelShuffleAttrs a;
    a.groups = groups;
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      const TensorDesc d = desc(Shape{2, 12, 5, 6}, layout);
      const Bytes x = wide_floats(d, 9);
      const Bytes want = run_cpu(kernel_spec(OpKind::kChannelShuffle, a, {d}, {d}), {x})[0];
      const Dims4 xd = dims_of(d);
      Bytes got(want.size());
      for (int64_t i = 0; i < xd.numel(); ++i) channel_shuffle_at(as<float>(x), xd, as<float>(got), xd, groups, i);
      EXPECT_EQ(max_difference(got, want, d), 0.0) << "groups " << groups << " " << graph::to_string(layout);
      // NCHW: whole planes (30 floats = 120 bytes: 8-byte units); NHWC has no planes.
      Bytes planes(want.size());
      const ShufflePlanes r = plan_shuffle_planes(4, xd, reinterpret_cast<uintptr_t>(x.data()), xd,
                                                  reinterpret_cast<uintptr_t>(planes.data()), groups);
      if (layout == Layout::kNHWC) {
        EXPECT_EQ(r.unit, 0);
        continue;
      }
      ASSERT_EQ(r.unit, 8);
      for (int64_t i = 0; i < r.units(); ++i) shuffle_planes_at(as<Bytes8>(x), as<Bytes8>(planes), r, i);
      EXPECT_EQ(planes, want) << "planes, groups " << groups;
    }
    // Between layouts (the element kernel reads each tensor in its own): the NCHW result, transposed.
    const TensorDesc s = desc(Shape{2, 12, 5, 6}, Layout::kNCHW), t = desc(Shape{2, 12, 5, 6}, Layout::kNHWC);
    const Bytes x = wide_floats(s, 10);
    const Bytes nchw = run_cpu(kernel_spec(OpKind::kChannelShuffle, a, {s}, {s}), {x})[0];
    const Dims4 sd = dims_of(s), td = dims_of(t);
    Bytes got(nchw.size());
    for (int64_t i = 0; i < td.numel(); ++i) channel_shuffle_at(as<float>(x), sd, as<float>(got), td, groups, i);
    for (int64_t i = 0; i < sd.numel(); ++i) {
      const Coords p = coords_at(sd, i);
      ASSERT_EQ(as<float>(got)[offset(td, p.n, p.c, p.h, p.w)], as<float>(nchw)[i]) << "nchw -> nhwc, groups " << groups;
    }
  }
}

// Resize: nearest x2, bilinear to a size that is no multiple (up in W, down in H), in both
// layouts and between them, against the CPU's kernel.
TEST(CudaElementOps, ResizeMatchesTheCpu) {
  graph::ResizeAttrs nearest;
  nearest.size = {10, 12};
  nearest.scale_h = nearest.scale_w = 2;
  graph::ResizeAttrs linear;
  linear.size = {3, 13};
  linear.scale_h = 3.0 / 5.0;
  linear.scale_w = 13.0 / 6.0;
  linear.linear = true;
  for (const graph::ResizeAttrs& a : {nearest, linear}) {
    for (Layout from : {Layout::kNCHW, Layout::kNHWC}) {
      for (Layout to : {Layout::kNCHW, Layout::kNHWC}) {
        const TensorDesc s = desc(Shape{2, 5, 5, 6}, from), d = desc(Shape{2, 5, a.size.h, a.size.w}, to);
        const Bytes x = wide_floats(s, 11);
        const Bytes want = run_cpu(kernel_spec(OpKind::kResize, a, {s}, {d}), {x})[0];
        const Dims4 sd = dims_of(s), dd = dims_of(d);
        Bytes got(want.size());
        for (int64_t i = 0; i < dd.numel(); ++i) {
          resize_at(as<float>(x), sd, as<float>(got), dd, a.scale_h, a.scale_w, a.linear, i);
        }
        EXPECT_LT(max_difference(got, want, d), 1e-5)
            << (a.linear ? "bilinear " : "nearest ") << graph::to_string(from) << " -> " << graph::to_string(to);
      }
    }
  }
}

TEST(CudaElementOps, ReshapeMatchesTheCpuAcrossLayoutsAndRanks) {
  struct Case {
    Shape in, out;
    Layout in_layout, out_layout;
    bool flat_copy;  // both memory orders plain: the launcher copies the bytes
  };
  const Case cases[] = {
      {{2, 12, 1, 1}, {2, 12}, Layout::kNHWC, Layout::kNC, true},  // a pooled NHWC tensor is plain
      {{2, 12, 5, 6}, {2, 360}, Layout::kNHWC, Layout::kNC, false},
      {{2, 360}, {2, 12, 5, 6}, Layout::kNC, Layout::kNHWC, false},
      {{2, 12, 5, 6}, {2, 6, 5, 12}, Layout::kNCHW, Layout::kNHWC, false},
      {{2, 12, 5, 6}, {2, 6, 5, 12}, Layout::kNHWC, Layout::kNHWC, false},
      {{2, 12, 5, 6}, {2, 360, 1, 1}, Layout::kNCHW, Layout::kNHWC, true},
      {{2, 12, 5, 6}, {2, 360}, Layout::kNCHW, Layout::kNC, true},
  };
  for (const Case& c : cases) {
    graph::ReshapeAttrs a;
    a.dims.assign(c.out.dims().begin() + 1, c.out.dims().end());
    const TensorDesc in = desc(c.in, c.in_layout), out = desc(c.out, c.out_layout);
    const Bytes x = wide_floats(in, 12);
    const Bytes want = run_cpu(kernel_spec(OpKind::kReshape, a, {in}, {out}), {x})[0];
    const Dims4 xd = dims_of(in), yd = dims_of(out);
    Bytes got(want.size());
    for (int64_t i = 0; i < yd.numel(); ++i) reshape_at(as<float>(x), xd, as<float>(got), yd, i);
    const std::string what = c.in.to_string() + " " + std::string(graph::to_string(c.in_layout)) + " -> " +
                             c.out.to_string() + " " + std::string(graph::to_string(c.out_layout));
    EXPECT_EQ(max_difference(got, want, out), 0.0) << what;
    EXPECT_EQ(plain_order(xd) && plain_order(yd), c.flat_copy) << what;
    if (c.flat_copy) {
      EXPECT_EQ(got, x) << what << ": the flat copy moves the bytes unchanged";
    }
  }
}

// The new kinds have no 8-bit form in the int8 contract that every backend shares (the CUDA
// backend applies it before its families): the reason is typed and says what to do.
TEST(CudaElementOps, NewKindsAreRefusedInInt8ByTheSharedContract) {
  const TensorDesc q = desc(Shape{1, 8, 4, 4}, Layout::kNHWC, DataType::kU8, 0.05f);
  graph::ChannelShuffleAttrs shuffle;
  shuffle.groups = 2;
  graph::ReshapeAttrs flat;
  flat.dims = {128};
  const std::pair<OpKind, graph::OpAttrs> kinds[] = {
      {OpKind::kHardSigmoid, graph::HardSigmoidAttrs{}}, {OpKind::kHardSwish, graph::NoAttrs{}},
      {OpKind::kSilu, graph::NoAttrs{}},                 {OpKind::kLeakyRelu, graph::LeakyReluAttrs{}},
      {OpKind::kBinary, binary_attrs(graph::BinaryOp::kMul, {1, 8, 1, 1})},
      {OpKind::kGlobalMaxPool, graph::NoAttrs{}},        {OpKind::kChannelShuffle, shuffle},
      {OpKind::kReshape, flat}};
  for (const auto& [kind, attrs] : kinds) {
    const Support s = quantised_support(kernel_spec(kind, attrs, {q}, {q}));
    EXPECT_EQ(s.reason, SupportReason::kQuantisation) << graph::to_string(kind);
    EXPECT_NE(s.message.find("dequantise"), std::string::npos) << s.message;
  }
}

}  // namespace
}  // namespace stagecraft::executor::cuda
