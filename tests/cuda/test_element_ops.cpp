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

#include "element_ops_support.h"

namespace stagecraft::executor::cuda {
namespace {

using namespace element_test;  // NOLINT: the shared helpers and their names

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
          kernel_spec(OpKind::kConcat, graph::ConcatAttrs{}, {x_desc, part}, {desc(Shape{2, 14, 5, 6}, layout)});
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


}  // namespace
}  // namespace stagecraft::executor::cuda
