// The reference implementation against hand-computed results for every op kind (the random weights
// and weight folding: test_weights_fold.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "common/strings.h"
#include "graph/errors.h"
#include "graph/passes.h"
#include "graph/weights.h"
#include "networks/builder.h"
#include "networks/registry.h"
#include "tests/executor/reference.h"
#include "tests/support/compare.h"

namespace stagecraft::executor::testing {
namespace {

using graph::Activation;
using graph::Graph;
using graph::GraphError;
using graph::Hw;
using graph::OpAttrs;
using graph::OpKind;
using graph::OpWeights;
using graph::Pads;
using graph::Shape;
using graph::ValueId;
using graph::WeightStore;
using networks::NetBuilder;

// Hand-computed values are exact or rounded once to fp32.
constexpr double kHandTolerance = 1e-5;
// Two computations that perform the same sums in the same order.
constexpr double kSameSumsTolerance = 1e-6;
constexpr char kOpName[] = "op";

// Runs a graph of one op named "op" over graph inputs shaped like `inputs`; returns every output.
std::vector<HostTensor> run_op(OpKind kind, const OpAttrs& attrs,
                               const std::vector<HostTensor>& inputs,
                               const OpWeights& weights = {}) {
  Graph g("one_op");
  std::vector<ValueId> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ids.push_back(g.add_input(cat("x", i), graph::make_desc(inputs[i].shape)));
  }
  const graph::OpId id = g.add_op(kOpName, kind, attrs, ids);
  for (ValueId v : g.op(id).outputs) g.add_output(v);
  WeightStore store;
  if (kind == OpKind::kConv2d || kind == OpKind::kLinear || kind == OpKind::kBatchNorm) {
    store[kOpName] = weights;
  }
  return reference_run(g, store, inputs);
}

// The single output of a one-op graph.
HostTensor run_one(OpKind kind, const OpAttrs& attrs, const HostTensor& x,
                   const OpWeights& weights = {}) {
  std::vector<HostTensor> outputs = run_op(kind, attrs, {x}, weights);
  EXPECT_EQ(outputs.size(), 1u);
  return outputs.at(0);
}

// A tensor whose element i is first + i (row-major in logical order).
HostTensor iota(const Shape& shape, float first = 0.0f) {
  HostTensor t{shape, std::vector<float>(static_cast<size_t>(shape.numel()))};
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = first + static_cast<float>(i);
  return t;
}

void expect_values(const HostTensor& got, const Shape& shape, const std::vector<double>& want) {
  ASSERT_EQ(got.shape, shape);
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.data[i], want[i], kHandTolerance * std::max(1.0, std::abs(want[i])))
        << "element " << i;
  }
}

// Channels [begin, end) of a rank-4 tensor, written out independently of the reference.
HostTensor take_channels(const HostTensor& t, int64_t begin, int64_t end) {
  const int64_t n = t.shape[0];
  const int64_t c = t.shape[1];
  const int64_t plane = t.shape[2] * t.shape[3];
  HostTensor out{Shape{n, end - begin, t.shape[2], t.shape[3]}, {}};
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = begin; ch < end; ++ch) {
      for (int64_t i = 0; i < plane; ++i) {
        out.data.push_back(t.data[static_cast<size_t>((b * c + ch) * plane + i)]);
      }
    }
  }
  return out;
}

std::vector<float> random_values(size_t n, uint64_t seed) {
  return random_tensor(Shape{static_cast<int64_t>(n)}, seed).data;
}

graph::Conv2dAttrs conv_attrs(int64_t in, int64_t out, Hw kernel) {
  graph::Conv2dAttrs a;
  a.in_channels = in;
  a.out_channels = out;
  a.kernel = kernel;
  return a;
}

// ---- Test data and error measure ----------------------------------------------------------------

TEST(Reference, RandomTensorIsDeterministicInRangeAndSeeded) {
  const Shape shape{2, 3, 16, 16};
  const HostTensor a = random_tensor(shape, 1);
  EXPECT_EQ(a.shape, shape);
  ASSERT_EQ(a.data.size(), static_cast<size_t>(shape.numel()));
  EXPECT_EQ(random_tensor(shape, 1).data, a.data);
  EXPECT_NE(random_tensor(shape, 2).data, a.data);
  double sum = 0.0;
  float lo = 1.0f, hi = -1.0f;
  for (float v : a.data) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_LT(lo, -0.9f);
  EXPECT_GT(hi, 0.9f);
  EXPECT_LT(std::abs(sum / static_cast<double>(a.data.size())), 0.1);
}

TEST(Reference, MaxRelativeErrorIsRelativeToTheScaleAndChecksShapes) {
  const HostTensor want{Shape{1, 2}, {2.0f, -4.0f}};
  EXPECT_DOUBLE_EQ(max_relative_error(want, want), 0.0);
  EXPECT_DOUBLE_EQ(max_relative_error(HostTensor{Shape{1, 2}, {2.5f, -4.0f}}, want), 0.125);
  EXPECT_DOUBLE_EQ(max_relative_error(HostTensor{Shape{1, 2}, {2.0f, -3.0f}}, want), 0.25);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(max_relative_error(HostTensor{Shape{2, 1}, {2.0f, -4.0f}}, want), inf);
  EXPECT_EQ(max_relative_error(HostTensor{Shape{1, 2}, {2.0f}}, want), inf);
  EXPECT_EQ(max_relative_error(
                HostTensor{Shape{1, 2}, {std::numeric_limits<float>::quiet_NaN(), -4.0f}}, want),
            inf);
  const HostTensor zero{Shape{1, 1}, {0.0f}};
  EXPECT_DOUBLE_EQ(max_relative_error(zero, zero), 0.0);
}

// The hand-written comparisons of the tests (tests/support/compare.h) fail on a NaN or a missing
// element, where the loops they replace passed: std::max(worst, NaN) keeps worst.
TEST(Compare, NanAndMissingElementsNeverPass) {
  using stagecraft::testing::max_abs_error;
  using stagecraft::testing::max_relative_error;
  using stagecraft::testing::worst_of;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(std::max(0.5, nan), 0.5) << "the trap the helpers avoid";
  EXPECT_EQ(worst_of(0.5, nan), inf);
  EXPECT_EQ(worst_of(0.5, 0.25), 0.5);
  EXPECT_EQ(worst_of(0.5, 0.75), 0.75);
  const std::vector<float> want{1.0f, -2.0f, 4.0f};
  EXPECT_EQ(max_abs_error(want, want), 0.0);
  EXPECT_DOUBLE_EQ(max_abs_error(std::vector<float>{1.0f, -2.5f, 4.0f}, want), 0.5);
  EXPECT_DOUBLE_EQ(max_relative_error(std::vector<float>{1.0f, -2.5f, 4.0f}, want), 0.125);
  EXPECT_EQ(max_abs_error(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f}, want), inf);
  EXPECT_EQ(max_relative_error(std::vector<float>{std::numeric_limits<float>::quiet_NaN(), -2.0f, 4.0f}, want), inf);
  EXPECT_EQ(max_abs_error(std::vector<float>{1.0f, -2.0f}, want), inf) << "a missing element";
  EXPECT_EQ(max_abs_error(std::vector<float>{}, want), inf) << "an empty result";
  EXPECT_EQ(max_abs_error(std::vector<double>{1.0, -2.0, 4.0}, want), 0.0);
}

TEST(Reference, RejectsInputsThatDoNotMatchTheGraph) {
  NetBuilder nb("t", 1, 2, 4, 4);
  Graph g = std::move(nb).finish({nb.relu(nb.input())});
  EXPECT_THROW(reference_run(g, {}, {}), GraphError);
  EXPECT_THROW(reference_run(g, {}, {random_tensor(Shape{1, 2, 4, 5}, 1)}), GraphError);
  HostTensor short_data = random_tensor(Shape{1, 2, 4, 4}, 1);
  short_data.data.pop_back();
  EXPECT_THROW(reference_run(g, {}, {short_data}), GraphError);
  EXPECT_EQ(reference_run(g, {}, {random_tensor(Shape{1, 2, 4, 4}, 1)}).size(), 1u);
}

// ---- Convolution --------------------------------------------------------------------------------

TEST(Reference, Conv3x3WithPaddingIsCrossCorrelation) {
  // out[i][j] = 1 * x[i-1][j-1] + 2 * x[i+1][j+1], zero outside: the kernel is not flipped.
  graph::Conv2dAttrs a = conv_attrs(1, 1, Hw::square(3));
  a.padding = Pads::same(1);
  OpWeights w;
  w.weight = {1, 0, 0, 0, 0, 0, 0, 0, 2};
  const HostTensor x = iota(Shape{1, 1, 3, 3}, 1.0f);
  expect_values(run_one(OpKind::kConv2d, a, x, w), Shape{1, 1, 3, 3},
                {10, 12, 0, 16, 19, 2, 0, 4, 5});

  // Bias -3 and a fused ReLU6 clamp to [0, 6].
  a.bias = true;
  a.activation = Activation::kRelu6;
  w.bias = {-3};
  expect_values(run_one(OpKind::kConv2d, a, x, w), Shape{1, 1, 3, 3}, {6, 6, 0, 6, 6, 0, 0, 1, 2});
}

TEST(Reference, PointwiseConvMixesChannelsAndKeepsBatchItemsApart) {
  const graph::Conv2dAttrs a = conv_attrs(2, 2, Hw::square(1));
  OpWeights w;
  w.weight = {1, 2, 3, -1};  // out 0 = x0 + 2 x1; out 1 = 3 x0 - x1
  const HostTensor x{Shape{2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8}};
  expect_values(run_one(OpKind::kConv2d, a, x, w), Shape{2, 2, 1, 2}, {7, 10, 0, 2, 19, 22, 8, 10});
}

TEST(Reference, ConvAsymmetricPaddingGoesOnTheNamedSides) {
  graph::Conv2dAttrs a = conv_attrs(1, 1, Hw::square(1));
  a.padding = Pads{1, 0, 0, 2};  // top, left, bottom, right
  OpWeights w;
  w.weight = {1};
  const HostTensor x{Shape{1, 1, 2, 2}, {1, 2, 3, 4}};
  expect_values(run_one(OpKind::kConv2d, a, x, w), Shape{1, 1, 3, 4},
                {0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0});
}

TEST(Reference, ConvStrideIsPerAxis) {
  graph::Conv2dAttrs a = conv_attrs(1, 1, Hw::square(1));
  a.stride = Hw{2, 3};
  OpWeights w;
  w.weight = {1};
  // x[i][j] = 7 i + j; rows 0, 2, 4 and columns 0, 3, 6 are read.
  expect_values(run_one(OpKind::kConv2d, a, iota(Shape{1, 1, 5, 7}), w), Shape{1, 1, 3, 3},
                {0, 3, 6, 14, 17, 20, 28, 31, 34});
}

TEST(Reference, ConvDilationSpreadsTheKernel) {
  graph::Conv2dAttrs a = conv_attrs(1, 1, Hw::square(2));
  a.dilation = Hw::square(2);
  OpWeights w;
  w.weight = {1, 10, 100, 1000};
  // x[i][j] = 5 i + j; out[i][j] = x[i][j] + 10 x[i][j+2] + 100 x[i+2][j] + 1000 x[i+2][j+2].
  const HostTensor got = run_one(OpKind::kConv2d, a, iota(Shape{1, 1, 5, 5}), w);
  ASSERT_EQ(got.shape, (Shape{1, 1, 3, 3}));
  auto x = [](int64_t i, int64_t j) { return static_cast<double>(5 * i + j); };
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      const double want = x(i, j) + 10 * x(i, j + 2) + 100 * x(i + 2, j) + 1000 * x(i + 2, j + 2);
      EXPECT_EQ(got.data[static_cast<size_t>(i * 3 + j)], want) << i << "," << j;
    }
  }
}

// A grouped conv equals, per group, a plain conv over that group's input channels with that
// group's slice of the weights (O × I/groups × KH × KW: consecutive output channels per group).
void expect_grouped_equals_per_group_convs(int64_t in_channels, int64_t out_channels,
                                           int64_t groups) {
  graph::Conv2dAttrs a = conv_attrs(in_channels, out_channels, Hw::square(3));
  a.stride = Hw::square(2);
  a.padding = Pads{1, 0, 2, 1};
  a.groups = groups;
  a.bias = true;
  const int64_t in_per_group = in_channels / groups;
  const int64_t out_per_group = out_channels / groups;
  const auto per_out = static_cast<size_t>(in_per_group * a.kernel.h * a.kernel.w);
  OpWeights w;
  w.weight = random_values(static_cast<size_t>(out_channels) * per_out, 11);
  w.bias = random_values(static_cast<size_t>(out_channels), 12);
  const HostTensor x = random_tensor(Shape{2, in_channels, 7, 6}, 13);
  const HostTensor grouped = run_one(OpKind::kConv2d, a, x, w);

  graph::Conv2dAttrs plain = a;
  plain.in_channels = in_per_group;
  plain.out_channels = out_per_group;
  plain.groups = 1;
  for (int64_t g = 0; g < groups; ++g) {
    OpWeights wg;
    const auto first_out = static_cast<size_t>(g * out_per_group);
    const auto out_count = static_cast<size_t>(out_per_group);
    wg.weight.assign(w.weight.begin() + first_out * per_out,
                     w.weight.begin() + (first_out + out_count) * per_out);
    wg.bias.assign(w.bias.begin() + first_out, w.bias.begin() + first_out + out_count);
    const HostTensor want = run_one(OpKind::kConv2d, plain,
                                    take_channels(x, g * in_per_group, (g + 1) * in_per_group), wg);
    const HostTensor got = take_channels(grouped, g * out_per_group, (g + 1) * out_per_group);
    EXPECT_LT(max_relative_error(got, want), kSameSumsTolerance) << "group " << g;
  }
}

TEST(Reference, GroupedConvIsAPlainConvPerGroup) { expect_grouped_equals_per_group_convs(4, 6, 2); }

TEST(Reference, DepthwiseConvIsAPlainConvPerChannel) {
  expect_grouped_equals_per_group_convs(4, 4, 4);
  expect_grouped_equals_per_group_convs(3, 6, 3);  // channel multiplier 2
}

// ---- Normalisation and activations --------------------------------------------------------------

TEST(Reference, BatchNormUsesEpsScaleAndShift) {
  graph::BatchNormAttrs a;
  a.eps = 1.0;
  OpWeights w;
  w.mean = {1, 0};
  w.var = {3, 8};  // sqrt(var + eps) = 2 and 3
  w.gamma = {2, 3};
  w.beta = {0.5, -1};
  const HostTensor x{Shape{1, 2, 1, 2}, {1, 3, -2, 4}};
  expect_values(run_one(OpKind::kBatchNorm, a, x, w), Shape{1, 2, 1, 2}, {0.5, 2.5, -3, 3});
}

TEST(Reference, ElementwiseActivations) {
  const HostTensor x{Shape{1, 1, 1, 5}, {-2, -0.5, 0, 3, 7}};
  const Shape s = x.shape;
  expect_values(run_one(OpKind::kRelu, graph::NoAttrs{}, x), s, {0, 0, 0, 3, 7});
  expect_values(run_one(OpKind::kRelu6, graph::NoAttrs{}, x), s, {0, 0, 0, 3, 6});
  std::vector<double> sigmoid;
  for (float v : x.data) sigmoid.push_back(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
  expect_values(run_one(OpKind::kSigmoid, graph::NoAttrs{}, x), s, sigmoid);
  EXPECT_FLOAT_EQ(run_one(OpKind::kSigmoid, graph::NoAttrs{}, x).data[2], 0.5f);
  expect_values(run_one(OpKind::kIdentity, graph::NoAttrs{}, x), s, {-2, -0.5, 0, 3, 7});
}

// ---- Pooling ------------------------------------------------------------------------------------

TEST(Reference, MaxPoolNeverSelectsPadding) {
  graph::MaxPoolAttrs a;
  a.kernel = Hw::square(3);
  a.stride = Hw::square(2);
  a.padding = Pads::same(1);
  // All values negative: a zero from the padding would win every window.
  HostTensor x = iota(Shape{1, 1, 3, 3}, 1.0f);
  for (float& v : x.data) v = -v;
  expect_values(run_one(OpKind::kMaxPool, a, x), Shape{1, 1, 2, 2}, {-1, -2, -4, -5});
}

TEST(Reference, MaxPoolCeilModeKeepsClippedWindows) {
  graph::MaxPoolAttrs a;
  a.kernel = Hw::square(2);
  a.stride = Hw::square(2);
  const HostTensor x = iota(Shape{1, 1, 5, 5});  // x[i][j] = 5 i + j
  // Floor: windows over rows/columns {0,1}, {2,3}.
  expect_values(run_one(OpKind::kMaxPool, a, x), Shape{1, 1, 2, 2}, {6, 8, 16, 18});
  // Ceil: a third window over row/column {4} alone.
  a.ceil_mode = true;
  expect_values(run_one(OpKind::kMaxPool, a, x), Shape{1, 1, 3, 3},
                {6, 8, 9, 16, 18, 19, 21, 23, 24});
  // With padding 1, windows cover {0}, {1,2}, {3,4}; a fourth would start in the padding and is
  // dropped (PyTorch's rule).
  a.padding = Pads::same(1);
  expect_values(run_one(OpKind::kMaxPool, a, x), Shape{1, 1, 3, 3},
                {0, 2, 4, 10, 12, 14, 20, 22, 24});
}

TEST(Reference, AvgPoolCeilModeDivisorsForBothPaddingCounts) {
  // 4x4 input x[i][j] = 4 i + j + 1, kernel 3, stride 2, padding 1, ceil mode: 3x3 output.
  // Windows per axis in padded coordinates: [-1, 2) (2 real), [1, 4) (3 real), and [3, 6)
  // clipped to the padded input [3, 5) (1 real, 2 counted with padding).
  graph::AvgPoolAttrs a;
  a.kernel = Hw::square(3);
  a.stride = Hw::square(2);
  a.padding = Pads::same(1);
  a.ceil_mode = true;
  const HostTensor x = iota(Shape{1, 1, 4, 4}, 1.0f);
  // Window sums: rows {0,1} x cols {0,1} = 1+2+5+6 = 14, and so on.
  a.count_include_pad = true;
  expect_values(
      run_one(OpKind::kAvgPool, a, x), Shape{1, 1, 3, 3},
      {14.0 / 9, 30.0 / 9, 12.0 / 6, 57.0 / 9, 99.0 / 9, 36.0 / 6, 27.0 / 6, 45.0 / 6, 16.0 / 4});
  a.count_include_pad = false;
  expect_values(
      run_one(OpKind::kAvgPool, a, x), Shape{1, 1, 3, 3},
      {14.0 / 4, 30.0 / 6, 12.0 / 2, 57.0 / 6, 99.0 / 9, 36.0 / 3, 27.0 / 2, 45.0 / 3, 16.0 / 1});
}

TEST(Reference, AvgPoolClipsToTheBottomPaddingNotTheTop) {
  // A 5x1 column, kernel 3x1, stride 2, padding only at the bottom (1), ceil mode: windows
  // [0, 3), [2, 5) and [4, 7) clipped to [4, 6): row 4 and one row of padding.
  graph::AvgPoolAttrs a;
  a.kernel = Hw{3, 1};
  a.stride = Hw{2, 1};
  a.padding = Pads{0, 0, 1, 0};
  a.ceil_mode = true;
  const HostTensor x{Shape{1, 1, 5, 1}, {1, 2, 3, 4, 5}};
  a.count_include_pad = true;
  expect_values(run_one(OpKind::kAvgPool, a, x), Shape{1, 1, 3, 1}, {2, 4, 2.5});
  a.count_include_pad = false;
  expect_values(run_one(OpKind::kAvgPool, a, x), Shape{1, 1, 3, 1}, {2, 4, 5});
}

TEST(Reference, GlobalAvgPoolAveragesEachPlane) {
  const HostTensor x{Shape{2, 2, 2, 2}, {1, 2, 3, 4, -1, -1, 0, 10, 0, 0, 0, 8, 5, 5, 5, 5}};
  expect_values(run_one(OpKind::kGlobalAvgPool, graph::NoAttrs{}, x), Shape{2, 2, 1, 1},
                {2.5, 2, 2, 5});
}

// PyTorch's F.interpolate on [[1, 2], [3, 4]] (scale 2): "nearest" repeats pixels; "bilinear"
// with align_corners=False samples at half-pixel centres, clamped at the borders.
TEST(Reference, ResizeNearestRepeatsAndBilinearSamplesAtPixelCentres) {
  const HostTensor x{Shape{1, 1, 2, 2}, {1, 2, 3, 4}};
  graph::ResizeAttrs a;
  a.size = {4, 4};
  a.scale_h = a.scale_w = 2;
  expect_values(run_one(OpKind::kResize, a, x), Shape{1, 1, 4, 4},
                {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  a.linear = true;
  expect_values(run_one(OpKind::kResize, a, x), Shape{1, 1, 4, 4},
                {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  // Downsampling 4 -> 3 nearest: floor(y * 4 / 3) = 0, 1, 2.
  graph::ResizeAttrs down;
  down.size = {1, 3};
  down.scale_h = 1;
  down.scale_w = 0.75;
  expect_values(run_one(OpKind::kResize, down, HostTensor{Shape{1, 1, 1, 4}, {5, 6, 7, 8}}), Shape{1, 1, 1, 3},
                {5, 6, 7});
}

// ---- Element-wise sum and data movement ---------------------------------------------------------

TEST(Reference, AddSumsEveryInputThenActivates) {
  const Shape s{1, 1, 1, 2};
  const std::vector<HostTensor> xs = {{s, {1, -2}}, {s, {0.5, 0.5}}, {s, {1, -1}}};
  graph::AddAttrs a;
  std::vector<HostTensor> out = run_op(OpKind::kAdd, a, xs);
  ASSERT_EQ(out.size(), 1u);
  expect_values(out[0], s, {2.5, -2.5});
  a.activation = Activation::kRelu;
  expect_values(run_op(OpKind::kAdd, a, xs).at(0), s, {2.5, 0});
}

TEST(Reference, ConcatInterleavesInputsPerBatchItem) {
  const HostTensor a{Shape{2, 1, 1, 2}, {1, 2, 3, 4}};
  const HostTensor b{Shape{2, 2, 1, 2}, {10, 11, 12, 13, 14, 15, 16, 17}};
  expect_values(run_op(OpKind::kConcat, graph::ConcatAttrs{}, {a, b}).at(0), Shape{2, 3, 1, 2},
                {1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17});
}

TEST(Reference, SplitAndSliceTakeChannelsInOrder) {
  const HostTensor x = iota(Shape{2, 3, 1, 2});  // batch 0: channels {0,1} {2,3} {4,5}
  graph::SplitAttrs split;
  split.sizes = {2, 1};
  const std::vector<HostTensor> parts = run_op(OpKind::kSplit, split, {x});
  ASSERT_EQ(parts.size(), 2u);
  expect_values(parts[0], Shape{2, 2, 1, 2}, {0, 1, 2, 3, 6, 7, 8, 9});
  expect_values(parts[1], Shape{2, 1, 1, 2}, {4, 5, 10, 11});

  graph::SliceAttrs slice;
  slice.begin = 1;
  slice.end = 3;
  expect_values(run_one(OpKind::kSlice, slice, x), Shape{2, 2, 1, 2}, {2, 3, 4, 5, 8, 9, 10, 11});
}

TEST(Reference, MultiOutputValuesFeedLaterOps) {
  // concat(split[1], split[0]) moves the last channel first, per batch item.
  NetBuilder nb("t", 2, 3, 1, 2);
  const std::vector<ValueId> parts = nb.split(nb.input(), {2, 1});
  Graph g = std::move(nb).finish({nb.concat({parts[1], parts[0]}), parts[0]});
  const std::vector<HostTensor> out = reference_run(g, {}, {iota(Shape{2, 3, 1, 2})});
  ASSERT_EQ(out.size(), 2u);
  expect_values(out[0], Shape{2, 3, 1, 2}, {4, 5, 0, 1, 2, 3, 10, 11, 6, 7, 8, 9});
  expect_values(out[1], Shape{2, 2, 1, 2}, {0, 1, 2, 3, 6, 7, 8, 9});
}

TEST(Reference, PadFillsWithTheValueAndNegativeAmountsCrop) {
  graph::PadAttrs a;
  a.pads = Pads{1, -1, -2, 1};  // one row above, crop a column on the left and two rows below
  a.value = 7;
  const HostTensor x = iota(Shape{1, 1, 3, 3}, 1.0f);
  expect_values(run_one(OpKind::kPad, a, x), Shape{1, 1, 2, 3}, {7, 7, 7, 2, 3, 7});
}

TEST(Reference, FlattenKeepsNchwOrder) {
  expect_values(run_one(OpKind::kFlatten, graph::NoAttrs{}, iota(Shape{2, 2, 1, 2})), Shape{2, 4},
                {0, 1, 2, 3, 4, 5, 6, 7});
}

// ---- Linear and softmax -------------------------------------------------------------------------

TEST(Reference, LinearIsXTimesWTransposedPlusBias) {
  NetBuilder nb("t", 2, 3, 1, 1);
  Graph g = std::move(nb).finish({nb.linear(nb.flatten(nb.input()), 2, true, "fc")});
  WeightStore w;
  w["fc"].weight = {1, 0, -1, 2, 1, 0};  // out × in
  w["fc"].bias = {0.5, 1};
  const HostTensor x{Shape{2, 3, 1, 1}, {1, 2, 3, -1, 0, 1}};
  expect_values(reference_run(g, w, {x}).at(0), Shape{2, 2}, {-1.5, 5, -1.5, -1});

  graph::LinearAttrs a;
  a.in_features = 3;
  a.out_features = 2;
  a.bias = false;
  a.activation = Activation::kRelu;
  OpWeights no_bias;
  no_bias.weight = w["fc"].weight;
  const HostTensor x2{Shape{2, 3}, x.data};
  expect_values(run_one(OpKind::kLinear, a, x2, no_bias), Shape{2, 2}, {0, 4, 0, 0});
}

TEST(Reference, SoftmaxIsNormalisedPerRowAndStable) {
  const HostTensor x{Shape{2, 3},
                     {0, std::log(2.0f), std::log(3.0f), 1000, 1000, 1000 + std::log(2.0f)}};
  expect_values(run_one(OpKind::kSoftmax, graph::SoftmaxAttrs{}, x), x.shape,
                {1.0 / 6, 2.0 / 6, 3.0 / 6, 0.25, 0.25, 0.5});

  const HostTensor r = random_tensor(Shape{3, 10}, 5);
  const HostTensor y = run_one(OpKind::kSoftmax, graph::SoftmaxAttrs{}, r);
  for (int64_t row = 0; row < 3; ++row) {
    double sum = 0.0;
    for (int64_t c = 0; c < 10; ++c) {
      const float v = y.data[static_cast<size_t>(row * 10 + c)];
      EXPECT_GT(v, 0.0f);
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, kHandTolerance) << "row " << row;
  }
}

// ---- Weights ------------------------------------------------------------------------------------

}  // namespace
}  // namespace stagecraft::executor::testing
