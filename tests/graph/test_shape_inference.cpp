// Shape inference of every op kind, and the errors for attributes that do not fit the inputs.
#include <gtest/gtest.h>

#include "graph/errors.h"
#include "graph/graph.h"
#include "graph/shape_inference.h"

namespace stagecraft::graph {
namespace {

Op make_op(OpKind kind, OpAttrs attrs, const char* name = "x") {
  Op op;
  op.name = std::string(name);
  op.kind = kind;
  op.attrs = std::move(attrs);
  return op;
}

TensorDesc nchw(int64_t n, int64_t c, int64_t h, int64_t w) { return make_desc(Shape{n, c, h, w}); }

Shape infer1(const Op& op, const std::vector<TensorDesc>& inputs) {
  auto out = infer_output_descs(op, inputs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0).shape;
}

// The message of the ShapeError/GraphError thrown by inference.
std::string error_of(const Op& op, const std::vector<TensorDesc>& inputs) {
  try {
    infer_output_descs(op, inputs);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "<no error>";
}

Conv2dAttrs conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  Conv2dAttrs a;
  a.in_channels = in;
  a.out_channels = out;
  a.kernel = Hw::square(k);
  a.stride = Hw::square(stride);
  a.padding = Pads::same(pad);
  return a;
}

TEST(ShapeInference, Conv2dStridePaddingDilationGroups) {
  EXPECT_EQ(infer1(make_op(OpKind::kConv2d, conv(3, 32, 3, 2)), {nchw(1, 3, 299, 299)}),
            (Shape{1, 32, 149, 149}));
  EXPECT_EQ(infer1(make_op(OpKind::kConv2d, conv(64, 64, 3, 1, 1)), {nchw(2, 64, 56, 56)}),
            (Shape{2, 64, 56, 56}));
  Conv2dAttrs rect = conv(8, 16, 1);
  rect.kernel = {1, 7};
  rect.padding = Pads::symmetric(0, 3);
  EXPECT_EQ(infer1(make_op(OpKind::kConv2d, rect), {nchw(1, 8, 17, 17)}), (Shape{1, 16, 17, 17}));
  Conv2dAttrs dilated = conv(4, 4, 3, 1, 2);
  dilated.dilation = Hw::square(2);
  EXPECT_EQ(infer1(make_op(OpKind::kConv2d, dilated), {nchw(1, 4, 10, 10)}), (Shape{1, 4, 10, 10}));
  Conv2dAttrs depthwise = conv(32, 32, 3, 2, 1);
  depthwise.groups = 32;
  EXPECT_EQ(infer1(make_op(OpKind::kConv2d, depthwise), {nchw(1, 32, 15, 15)}),
            (Shape{1, 32, 8, 8}));
}

TEST(ShapeInference, Conv2dChannelMismatchNamesOpAndCounts) {
  const std::string message = error_of(make_op(OpKind::kConv2d, conv(64, 8, 3), "conv7"),
                                       {nchw(1, 32, 8, 8)});
  EXPECT_NE(message.find("op 'conv7' (conv2d)"), std::string::npos) << message;
  EXPECT_NE(message.find("input has 32 channels but in_channels is 64"), std::string::npos)
      << message;
}

TEST(ShapeInference, Conv2dBadAttributes) {
  Conv2dAttrs groups = conv(6, 8, 1);
  groups.groups = 4;
  EXPECT_NE(error_of(make_op(OpKind::kConv2d, groups), {nchw(1, 6, 4, 4)}).find("groups 4 must "
                                                                                "divide"),
            std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kConv2d, conv(3, 8, 7)), {nchw(1, 3, 4, 4)})
                .find("does not fit input 4x4"),
            std::string::npos);
  Conv2dAttrs zero_stride = conv(3, 8, 1);
  zero_stride.stride = {0, 1};
  EXPECT_NE(error_of(make_op(OpKind::kConv2d, zero_stride), {nchw(1, 3, 4, 4)}).find("stride"),
            std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kConv2d, conv(3, 8, 1)), {make_desc(Shape{1, 3})})
                .find("rank 4"),
            std::string::npos);
}

TEST(ShapeInference, PoolingFloorAndCeilModes) {
  MaxPoolAttrs mp;
  mp.kernel = Hw::square(3);
  mp.stride = Hw::square(2);
  EXPECT_EQ(infer1(make_op(OpKind::kMaxPool, mp), {nchw(1, 64, 147, 147)}), (Shape{1, 64, 73, 73}));
  mp.ceil_mode = true;  // torchvision googlenet: 112 -> 56 with ceil_mode
  EXPECT_EQ(infer1(make_op(OpKind::kMaxPool, mp), {nchw(1, 64, 112, 112)}), (Shape{1, 64, 56, 56}));
  EXPECT_EQ(infer1(make_op(OpKind::kMaxPool, mp), {nchw(1, 96, 109, 109)}), (Shape{1, 96, 54, 54}));
  // PyTorch drops a last window that would start in the right padding.
  EXPECT_EQ(window_output_size(5, 1, 1, 2, 2, 1, true), 3);
  EXPECT_EQ(window_output_size(4, 1, 1, 2, 2, 1, true), 3);
  AvgPoolAttrs ap;
  ap.kernel = Hw::square(3);
  ap.padding = Pads::same(1);
  ap.count_include_pad = false;
  EXPECT_EQ(infer1(make_op(OpKind::kAvgPool, ap), {nchw(1, 8, 35, 35)}), (Shape{1, 8, 35, 35}));
  ap.padding = Pads::same(3);
  EXPECT_NE(error_of(make_op(OpKind::kAvgPool, ap), {nchw(1, 8, 35, 35)}).find("padding must be "
                                                                             "smaller"),
            std::string::npos);
}

TEST(ShapeInference, GlobalPoolFlattenLinearSoftmax) {
  EXPECT_EQ(infer1(make_op(OpKind::kGlobalAvgPool, NoAttrs{}), {nchw(2, 2048, 8, 8)}),
            (Shape{2, 2048, 1, 1}));
  auto flat = infer_output_descs(make_op(OpKind::kFlatten, NoAttrs{}), {nchw(2, 2048, 1, 1)});
  EXPECT_EQ(flat[0].shape, (Shape{2, 2048}));
  EXPECT_EQ(flat[0].layout, Layout::kNC);
  LinearAttrs fc;
  fc.in_features = 2048;
  fc.out_features = 1000;
  EXPECT_EQ(infer1(make_op(OpKind::kLinear, fc), {make_desc(Shape{2, 2048})}), (Shape{2, 1000}));
  EXPECT_NE(error_of(make_op(OpKind::kLinear, fc), {make_desc(Shape{2, 1024})})
                .find("input has 1024 features but in_features is 2048"),
            std::string::npos);
  EXPECT_EQ(infer1(make_op(OpKind::kSoftmax, graph::SoftmaxAttrs{}), {make_desc(Shape{2, 1000})}),
            (Shape{2, 1000}));
}

TEST(ShapeInference, ElementwiseKeepShape) {
  for (OpKind kind : {OpKind::kRelu, OpKind::kRelu6, OpKind::kSigmoid, OpKind::kIdentity}) {
    EXPECT_EQ(infer1(make_op(kind, NoAttrs{}), {nchw(1, 5, 6, 7)}), (Shape{1, 5, 6, 7}));
  }
  ScaleAttrs scale;
  scale.factor = 0.5;
  EXPECT_EQ(infer1(make_op(OpKind::kScale, scale), {nchw(1, 5, 6, 7)}), (Shape{1, 5, 6, 7}));
  EXPECT_EQ(infer1(make_op(OpKind::kBatchNorm, BatchNormAttrs{}), {nchw(1, 5, 6, 7)}),
            (Shape{1, 5, 6, 7}));
  BatchNormAttrs bad;
  bad.eps = 0;
  EXPECT_NE(error_of(make_op(OpKind::kBatchNorm, bad), {nchw(1, 5, 6, 7)}).find("eps"),
            std::string::npos);
}

TEST(ShapeInference, AddRequiresEqualShapes) {
  EXPECT_EQ(infer1(make_op(OpKind::kAdd, AddAttrs{}), {nchw(1, 4, 8, 8), nchw(1, 4, 8, 8),
                                                       nchw(1, 4, 8, 8)}),
            (Shape{1, 4, 8, 8}));
  const std::string message =
      error_of(make_op(OpKind::kAdd, AddAttrs{}, "sum"), {nchw(1, 4, 8, 8), nchw(1, 4, 4, 4)});
  EXPECT_NE(message.find("op 'sum' (add): input 1 is 1x4x4x4 but input 0 is 1x4x8x8"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of(make_op(OpKind::kAdd, AddAttrs{}), {nchw(1, 4, 8, 8)}).find("at least 2"),
            std::string::npos);
}

TEST(ShapeInference, ConcatAddsChannelsAndChecksSpatialSize) {
  EXPECT_EQ(infer1(make_op(OpKind::kConcat, ConcatAttrs{}), {nchw(1, 64, 35, 35), nchw(1, 96, 35, 35)}),
            (Shape{1, 160, 35, 35}));
  const std::string message = error_of(make_op(OpKind::kConcat, ConcatAttrs{}, "cat"),
                                       {nchw(1, 64, 35, 35), nchw(1, 96, 17, 17)});
  EXPECT_NE(message.find("op 'cat' (concat): input 1 is 1x96x17x17 but input 0 is 1x64x35x35"),
            std::string::npos)
      << message;
}

TEST(ShapeInference, SplitSliceAndPad) {
  SplitAttrs split;
  split.sizes = {16, 48};
  auto parts = infer_output_descs(make_op(OpKind::kSplit, split), {nchw(1, 64, 4, 4)});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape, (Shape{1, 48, 4, 4}));
  EXPECT_EQ(num_outputs(OpKind::kSplit, split), 2u);
  split.sizes = {16, 16};
  EXPECT_NE(error_of(make_op(OpKind::kSplit, split), {nchw(1, 64, 4, 4)}).find("add up to 32"),
            std::string::npos);

  SliceAttrs slice;
  slice.begin = 8;
  slice.end = 24;
  EXPECT_EQ(infer1(make_op(OpKind::kSlice, slice), {nchw(1, 64, 4, 4)}), (Shape{1, 16, 4, 4}));
  slice.end = 80;
  EXPECT_NE(error_of(make_op(OpKind::kSlice, slice), {nchw(1, 64, 4, 4)}).find("not inside"),
            std::string::npos);

  PadAttrs pad;
  pad.pads = {0, 0, 1, 1};
  EXPECT_EQ(infer1(make_op(OpKind::kPad, pad), {nchw(1, 3, 10, 10)}), (Shape{1, 3, 11, 11}));
  pad.pads = {-1, -1, 0, 0};  // a crop
  EXPECT_EQ(infer1(make_op(OpKind::kPad, pad), {nchw(1, 3, 10, 10)}), (Shape{1, 3, 9, 9}));
  pad.pads = {-10, 0, 0, 0};
  EXPECT_NE(error_of(make_op(OpKind::kPad, pad), {nchw(1, 3, 10, 10)}).find("empty"),
            std::string::npos);
}

TEST(ShapeInference, WrongArityAndMismatchedAttributes) {
  EXPECT_NE(error_of(make_op(OpKind::kRelu, NoAttrs{}, "r"), {nchw(1, 1, 1, 1), nchw(1, 1, 1, 1)})
                .find("op 'r' (relu): takes 1 input(s), got 2"),
            std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kConv2d, NoAttrs{}), {nchw(1, 1, 1, 1)})
                .find("attributes of another op kind"),
            std::string::npos);
}

TEST(ShapeInference, BinaryBroadcastsLikeNumPy) {
  BinaryAttrs mul;
  mul.op = BinaryOp::kMul;
  // Squeeze-and-excitation: [N, C, H, W] * [N, C, 1, 1]; either order gives the larger shape.
  EXPECT_EQ(infer1(make_op(OpKind::kBinary, mul), {nchw(2, 8, 5, 5), nchw(2, 8, 1, 1)}),
            (Shape{2, 8, 5, 5}));
  EXPECT_EQ(infer1(make_op(OpKind::kBinary, mul), {nchw(2, 8, 1, 1), nchw(2, 8, 5, 5)}),
            (Shape{2, 8, 5, 5}));
  EXPECT_NE(error_of(make_op(OpKind::kBinary, mul, "m"), {nchw(2, 8, 5, 5), nchw(2, 4, 1, 1)})
                .find("op 'm' (binary): shapes 2x8x5x5 and 2x4x1x1 do not broadcast (dimension 1)"),
            std::string::npos)
      << error_of(make_op(OpKind::kBinary, mul, "m"), {nchw(2, 8, 5, 5), nchw(2, 4, 1, 1)});
  // A constant: lower rank aligns to the trailing dimensions; it must not grow the input.
  BinaryAttrs scale = mul;
  scale.constant = {8, 1, 1};
  EXPECT_EQ(infer1(make_op(OpKind::kBinary, scale), {nchw(2, 8, 5, 5)}), (Shape{2, 8, 5, 5}));
  scale.constant = {1, 8, 5, 6};
  EXPECT_NE(error_of(make_op(OpKind::kBinary, scale), {nchw(2, 8, 5, 5)}).find("do not broadcast"),
            std::string::npos);
  scale.constant = {2, 8, 5, 5, 1};
  EXPECT_NE(error_of(make_op(OpKind::kBinary, scale), {nchw(2, 8, 5, 5)}).find("higher rank"),
            std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kBinary, mul), {nchw(2, 8, 5, 5)}).find("takes 2 input(s)"),
            std::string::npos);
}

TEST(ShapeInference, ReshapeShuffleGlobalMaxAndActivations) {
  ReshapeAttrs flat;
  flat.dims = {200};
  EXPECT_EQ(infer1(make_op(OpKind::kReshape, flat), {nchw(2, 8, 5, 5)}), (Shape{2, 200}));
  ReshapeAttrs back;
  back.dims = {8, 5, 5};
  EXPECT_EQ(infer1(make_op(OpKind::kReshape, back), {make_desc(Shape{2, 200})}), (Shape{2, 8, 5, 5}));
  flat.dims = {199};
  EXPECT_NE(error_of(make_op(OpKind::kReshape, flat), {nchw(2, 8, 5, 5)}).find("cannot reshape"),
            std::string::npos);
  flat.dims = {8, 25};
  EXPECT_NE(error_of(make_op(OpKind::kReshape, flat), {nchw(2, 8, 5, 5)}).find("1 or 3 dimensions"),
            std::string::npos);
  ChannelShuffleAttrs shuffle;
  shuffle.groups = 4;
  EXPECT_EQ(infer1(make_op(OpKind::kChannelShuffle, shuffle), {nchw(1, 8, 3, 3)}), (Shape{1, 8, 3, 3}));
  shuffle.groups = 3;
  EXPECT_NE(error_of(make_op(OpKind::kChannelShuffle, shuffle), {nchw(1, 8, 3, 3)}).find("must divide"),
            std::string::npos);
  EXPECT_EQ(infer1(make_op(OpKind::kGlobalMaxPool, NoAttrs{}), {nchw(2, 8, 7, 5)}), (Shape{2, 8, 1, 1}));
  for (OpKind kind : {OpKind::kHardSwish, OpKind::kSilu, OpKind::kGelu, OpKind::kGeluTanh, OpKind::kTanh, OpKind::kSqrt}) {
    EXPECT_EQ(infer1(make_op(kind, NoAttrs{}), {nchw(1, 3, 4, 4)}), (Shape{1, 3, 4, 4}));
  }
  EXPECT_EQ(infer1(make_op(OpKind::kLayerNorm, LayerNormAttrs{}), {nchw(2, 8, 3, 3)}), (Shape{2, 8, 3, 3}));
  EXPECT_EQ(infer1(make_op(OpKind::kLayerNorm, LayerNormAttrs{}), {make_desc(Shape{2, 8})}), (Shape{2, 8}));
  // Row-major tokens [N, T, C]: over the last axis.
  EXPECT_EQ(make_desc(Shape{2, 8, 3}).layout, Layout::kRowMajor);
  EXPECT_EQ(infer1(make_op(OpKind::kLayerNorm, LayerNormAttrs{}), {make_desc(Shape{2, 8, 3})}), (Shape{2, 8, 3}));
  EXPECT_NE(error_of(make_op(OpKind::kLayerNorm, LayerNormAttrs{}), {make_desc(Shape{8})}).find("rank >= 2"),
            std::string::npos);
  ReduceAttrs channels;
  channels.axes = {1};
  for (OpKind kind : {OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceSum}) {
    EXPECT_EQ(infer1(make_op(kind, channels), {nchw(2, 8, 5, 6)}), (Shape{2, 1, 5, 6}));
  }
  ReduceAttrs unsorted;
  unsorted.axes = {3, 1};
  EXPECT_NE(error_of(make_op(OpKind::kReduceMax, unsorted), {nchw(2, 8, 5, 6)}).find("ascending"), std::string::npos);
  SpaceToDepthAttrs s2d;
  s2d.block = 4;
  EXPECT_EQ(infer1(make_op(OpKind::kSpaceToDepth, s2d), {nchw(2, 3, 8, 12)}), (Shape{2, 48, 2, 3}));
  EXPECT_NE(error_of(make_op(OpKind::kSpaceToDepth, s2d), {nchw(2, 3, 8, 10)}).find("must divide"), std::string::npos);
  LayerNormAttrs no_eps;
  no_eps.eps = 0;
  EXPECT_NE(error_of(make_op(OpKind::kLayerNorm, no_eps), {nchw(2, 8, 3, 3)}).find("eps"), std::string::npos);
  EXPECT_EQ(infer1(make_op(OpKind::kLeakyRelu, LeakyReluAttrs{}), {nchw(1, 3, 4, 4)}), (Shape{1, 3, 4, 4}));
  ClipAttrs clip;
  clip.min = -1;
  clip.max = 2;
  EXPECT_EQ(infer1(make_op(OpKind::kClip, clip), {make_desc(Shape{2, 7, 5})}), (Shape{2, 7, 5}));
  clip.min = 3;
  EXPECT_NE(error_of(make_op(OpKind::kClip, clip), {nchw(1, 3, 4, 4)}).find("above max"), std::string::npos);
  HardSigmoidAttrs flat_slope;
  flat_slope.alpha = 0;
  EXPECT_NE(error_of(make_op(OpKind::kHardSigmoid, flat_slope), {nchw(1, 3, 4, 4)}).find("alpha"),
            std::string::npos);
}

TEST(ShapeInference, ResizeTakesItsSizeAndRejectsNonPositiveOnes) {
  ResizeAttrs a;
  a.size = {9, 17};
  a.scale_h = 9.0 / 14.0;
  a.scale_w = 17.0 / 12.0;
  EXPECT_EQ(infer1(make_op(OpKind::kResize, a), {nchw(2, 8, 14, 12)}), (Shape{2, 8, 9, 17}));
  ResizeAttrs empty = a;
  empty.size = {0, 17};
  EXPECT_NE(error_of(make_op(OpKind::kResize, empty), {nchw(2, 8, 14, 12)}).find("size must be positive"),
            std::string::npos);
  ResizeAttrs unscaled = a;
  unscaled.scale_w = 0;
  EXPECT_NE(error_of(make_op(OpKind::kResize, unscaled), {nchw(2, 8, 14, 12)}).find("scale_w"), std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kResize, a), {make_desc(Shape{2, 8})}).find("rank"), std::string::npos);
}

// Row-major tensors of any rank (transformers): matmul, transpose, narrow, concat_constant, full
// reshapes, softmax over any axis and linear layers over the last axis; their outputs are kRowMajor
// (rank 4 included: the layout choice leaves them alone).
TEST(ShapeInference, RowMajorTensorOps) {
  const TensorDesc q = make_desc(Shape{2, 3, 5, 4}), k = make_desc(Shape{1, 3, 4, 7});
  const auto mm = infer_output_descs(make_op(OpKind::kMatMul, NoAttrs{}), {q, k});
  EXPECT_EQ(mm[0].shape, (Shape{2, 3, 5, 7}));  // batch 1 broadcast
  EXPECT_EQ(mm[0].layout, Layout::kRowMajor);
  EXPECT_NE(error_of(make_op(OpKind::kMatMul, NoAttrs{}), {q, q}).find("inner dimensions"), std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kMatMul, NoAttrs{}), {q, make_desc(Shape{3, 4, 7})}).find("same rank"),
            std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kMatMul, NoAttrs{}), {q, make_desc(Shape{3, 3, 4, 7})}).find("broadcast"),
            std::string::npos);
  TransposeAttrs t;
  t.perm = {0, 2, 1, 3};
  EXPECT_EQ(infer1(make_op(OpKind::kTranspose, t), {q}), (Shape{2, 5, 3, 4}));
  t.perm = {0, 2, 2, 3};
  EXPECT_NE(error_of(make_op(OpKind::kTranspose, t), {q}).find("permutation"), std::string::npos);
  NarrowAttrs n;
  n.axis = 2;
  n.begin = 1;
  n.end = 3;
  EXPECT_EQ(infer1(make_op(OpKind::kNarrow, n), {q}), (Shape{2, 3, 2, 4}));
  n.end = 6;
  EXPECT_NE(error_of(make_op(OpKind::kNarrow, n), {q}).find("not inside"), std::string::npos);
  ConcatConstantAttrs c;
  c.axis = 1;
  c.count = 2;
  EXPECT_EQ(infer1(make_op(OpKind::kConcatConstant, c), {make_desc(Shape{2, 196, 8})}), (Shape{2, 198, 8}));
  c.axis = 0;
  EXPECT_NE(error_of(make_op(OpKind::kConcatConstant, c), {make_desc(Shape{2, 196, 8})}).find("axis"),
            std::string::npos);
  ReshapeAttrs full;
  full.full = true;
  full.dims = {6, 20};
  const auto r = infer_output_descs(make_op(OpKind::kReshape, full), {q});
  EXPECT_EQ(r[0].shape, (Shape{6, 20}));
  EXPECT_EQ(r[0].layout, Layout::kNC);
  full.dims = {7, 20};
  EXPECT_NE(error_of(make_op(OpKind::kReshape, full), {q}).find("element"), std::string::npos);
  SoftmaxAttrs last;
  last.axis = 3;
  EXPECT_EQ(infer1(make_op(OpKind::kSoftmax, last), {q}), q.shape);
  last.axis = 4;
  EXPECT_NE(error_of(make_op(OpKind::kSoftmax, last), {q}).find("axis 4"), std::string::npos);
  LinearAttrs fc;
  fc.in_features = 8;
  fc.out_features = 16;
  EXPECT_EQ(infer1(make_op(OpKind::kLinear, fc), {make_desc(Shape{2, 196, 8})}), (Shape{2, 196, 16}));
  EXPECT_NE(error_of(make_op(OpKind::kLinear, fc), {nchw(2, 3, 4, 8)}).find("row-major"), std::string::npos);
  EXPECT_FALSE(takes_layouts(mm[0]));
  EXPECT_TRUE(takes_layouts(nchw(1, 2, 3, 4)));
}

TEST(ShapeInference, UnaryKeepsItsInputAndRefusesInt8) {
  UnaryAttrs a;
  a.fn = UnaryFn::kErf;
  const TensorDesc plain{Shape{2, 3, 5}, DataType::kF32, Layout::kRowMajor};
  EXPECT_EQ(infer1(make_op(OpKind::kUnary, a), {plain}), (Shape{2, 3, 5}));
  TensorDesc q = make_desc(Shape{1, 8, 2, 2});
  q.dtype = DataType::kU8;
  EXPECT_NE(error_of(make_op(OpKind::kUnary, a), {q}).find("floating-point"), std::string::npos);
  a.fn = UnaryFn::kCelu;
  EXPECT_NE(error_of(make_op(OpKind::kUnary, a), {plain}).find("alpha must not be 0"), std::string::npos);
}

TEST(ShapeInference, LrnKeepsItsImageAndNeedsAnOddWindow) {
  LrnAttrs a;
  a.size = 3;
  EXPECT_EQ(infer1(make_op(OpKind::kLrn, a), {make_desc(Shape{1, 8, 4, 4})}), (Shape{1, 8, 4, 4}));
  a.size = 4;
  EXPECT_NE(error_of(make_op(OpKind::kLrn, a), {make_desc(Shape{1, 8, 4, 4})}).find("size must be odd"),
            std::string::npos);
  a.size = 3;
  EXPECT_NE(error_of(make_op(OpKind::kLrn, a), {make_desc(Shape{2, 8})}).find("rank 4"), std::string::npos);
}

TEST(ShapeInference, ConvTransposeUpsamplesByItsStrideAndChecksItsPadding) {
  ConvTranspose2dAttrs a;
  a.in_channels = 8;
  a.out_channels = 4;
  a.kernel = Hw{3, 3};
  a.stride = Hw{2, 2};
  a.padding = Pads{1, 1, 1, 1};
  a.output_padding = Hw{1, 1};
  EXPECT_EQ(infer1(make_op(OpKind::kConvTranspose2d, a), {make_desc(Shape{2, 8, 5, 7})}), (Shape{2, 4, 10, 14}));
  a.output_padding = Hw{2, 0};
  EXPECT_NE(error_of(make_op(OpKind::kConvTranspose2d, a), {make_desc(Shape{2, 8, 5, 7})}).find("output_padding"),
            std::string::npos);
  a.output_padding = Hw{0, 0};
  EXPECT_NE(error_of(make_op(OpKind::kConvTranspose2d, a), {make_desc(Shape{2, 6, 5, 7})}).find("in_channels is 8"),
            std::string::npos);
}

TEST(ShapeInference, WhereBroadcastsItsThreeOperands) {
  WhereAttrs a;
  const TensorDesc mask{Shape{4, 1}, DataType::kF32, Layout::kNC};
  const TensorDesc x{Shape{2, 3, 4, 5}, DataType::kF32, Layout::kNCHW};
  EXPECT_EQ(infer1(make_op(OpKind::kWhere, a), {mask, x, x}), (Shape{2, 3, 4, 5}));
  a.y_constant = true;
  a.y_shape = {};  // a scalar
  EXPECT_EQ(infer1(make_op(OpKind::kWhere, a), {mask, make_desc(Shape{2, 1, 1, 5})}), (Shape{2, 1, 4, 5}));
  EXPECT_NE(error_of(make_op(OpKind::kWhere, a), {mask, make_desc(Shape{2, 3, 3, 5})}).find("do not broadcast"),
            std::string::npos);
  a.condition_constant = a.x_constant = true;
  EXPECT_NE(error_of(make_op(OpKind::kWhere, a), {}).find("at least one operand"), std::string::npos);
}

TEST(ShapeInference, GridSampleTakesTheGridsPointsAndTheInputsChannels) {
  GridSampleAttrs a;
  const TensorDesc x{Shape{2, 3, 8, 9}, DataType::kF32, Layout::kNCHW};
  EXPECT_EQ(infer1(make_op(OpKind::kGridSample, a), {x, make_desc(Shape{2, 5, 6, 2})}), (Shape{2, 3, 5, 6}));
  EXPECT_EQ(infer1(make_op(OpKind::kGridSample, a), {make_desc(Shape{1, 2, 4, 5, 6}), make_desc(Shape{1, 3, 2, 7, 3})}),
            (Shape{1, 2, 3, 2, 7}));
  EXPECT_NE(error_of(make_op(OpKind::kGridSample, a), {x, make_desc(Shape{2, 5, 6, 3})}).find("spatial dimensions"),
            std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kGridSample, a), {x, make_desc(Shape{1, 5, 6, 2})}).find("batch"), std::string::npos);
  a.padding = 3;
  EXPECT_NE(error_of(make_op(OpKind::kGridSample, a), {x, make_desc(Shape{2, 5, 6, 2})}).find("padding"), std::string::npos);
}

TEST(ShapeInference, PoolNdPoolsEverySpatialAxisOfARowMajorTensor) {
  PoolNdAttrs a;
  a.kernel = {3, 2, 2}, a.stride = {2, 1, 2}, a.dilation = {1, 2, 1};
  a.pad_begin = {1, 0, 0}, a.pad_end = {1, 1, 0};
  // (7 + 2 - 3) / 2 + 1 = 4; (6 + 1 - 3) / 1 + 1 = 5; (5 - 2) / 2 + 1 = 2, ceil 3 (starts at 4 < 5)
  const TensorDesc x = make_desc(Shape{2, 3, 7, 6, 5});
  const TensorDesc y = infer_output_descs(make_op(OpKind::kPoolNd, a), {x}).at(0);
  EXPECT_EQ(y.shape, (Shape{2, 3, 4, 5, 2}));
  EXPECT_EQ(y.layout, Layout::kRowMajor);
  a.ceil_mode = true;
  EXPECT_EQ(infer1(make_op(OpKind::kPoolNd, a), {x}), (Shape{2, 3, 4, 5, 3}));
  EXPECT_NE(error_of(make_op(OpKind::kPoolNd, a), {make_desc(Shape{2, 3, 7, 6})}).find("one value per spatial axis"),
            std::string::npos);
  a.pad_begin = {3, 0, 0};  // as large as the window
  EXPECT_NE(error_of(make_op(OpKind::kPoolNd, a), {x}).find("smaller than the window"), std::string::npos);
  a.pad_begin = {1, 0, 0};
  a.stride = {0, 1, 2};
  EXPECT_NE(error_of(make_op(OpKind::kPoolNd, a), {x}).find(">= 1"), std::string::npos);
}

TEST(ShapeInference, ResizeNdTakesItsSizesAndChecksItsRules) {
  ResizeNdAttrs a;
  a.sizes = {2, 3, 9, 4};
  a.scales = {1, 1, 1.5, 0.5};
  const TensorDesc y = infer_output_descs(make_op(OpKind::kResizeNd, a), {make_desc(Shape{2, 3, 6, 8})}).at(0);
  EXPECT_EQ(y.shape, (Shape{2, 3, 9, 4}));
  EXPECT_EQ(y.layout, Layout::kRowMajor);
  EXPECT_NE(error_of(make_op(OpKind::kResizeNd, a), {make_desc(Shape{2, 3, 6})}).find("one value per axis"), std::string::npos);
  a.transform = 5;  // tf_crop_and_resize without a region
  EXPECT_NE(error_of(make_op(OpKind::kResizeNd, a), {make_desc(Shape{2, 3, 6, 8})}).find("region"), std::string::npos);
  a.transform = 0;
  a.antialias = true;  // nearest
  EXPECT_NE(error_of(make_op(OpKind::kResizeNd, a), {make_desc(Shape{2, 3, 6, 8})}).find("antialias"), std::string::npos);
  a.antialias = false;
  a.sizes[3] = 0;
  EXPECT_NE(error_of(make_op(OpKind::kResizeNd, a), {make_desc(Shape{2, 3, 6, 8})}).find(">= 1"), std::string::npos);
}

TEST(ShapeInference, TopKGivesValuesAndIndicesOfKAlongItsAxis) {
  TopKAttrs a;
  a.axis = 1, a.k = 3;
  const TensorDesc x = make_desc(Shape{2, 8400, 4});
  const std::vector<TensorDesc> out = infer_output_descs(make_op(OpKind::kTopK, a), {x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape, (Shape{2, 3, 4}));
  EXPECT_EQ(out[1].shape, (Shape{2, 3, 4}));
  EXPECT_EQ(out[1].layout, Layout::kRowMajor);
  a.k = 8401;
  EXPECT_NE(error_of(make_op(OpKind::kTopK, a), {x}).find("between 1 and the axis's extent 8400"), std::string::npos);
  a.k = 1, a.axis = 3;
  EXPECT_NE(error_of(make_op(OpKind::kTopK, a), {x}).find("outside"), std::string::npos);
  a.axis = 1;
  EXPECT_NE(error_of(make_op(OpKind::kTopK, a), {make_desc(Shape{1, (int64_t{1} << 24) + 1})}).find("below 2^24"),
            std::string::npos);
}

TEST(ShapeInference, GatherElementsTakesTheIndicesShape) {
  GatherElementsAttrs a;
  a.axis = 1;
  EXPECT_EQ(infer1(make_op(OpKind::kGatherElements, a), {make_desc(Shape{1, 8400, 80}), make_desc(Shape{1, 300, 80})}),
            (Shape{1, 300, 80}));
  EXPECT_NE(error_of(make_op(OpKind::kGatherElements, a), {make_desc(Shape{1, 8400, 80}), make_desc(Shape{300, 80})})
                .find("must have the data's rank"), std::string::npos);
  EXPECT_NE(error_of(make_op(OpKind::kGatherElements, a), {make_desc(Shape{1, 8400, 4}), make_desc(Shape{1, 300, 80})})
                .find("exceed the data"), std::string::npos);
}

TEST(ShapeInference, EveryKindHasATestedRule) {
  // Guards the list above: a new op kind must get shape inference and a test here.
  EXPECT_EQ(all_op_kinds().size(), 52u);
  for (OpKind kind : all_op_kinds()) {
    EXPECT_EQ(parse_op_kind(to_string(kind)), kind);
    EXPECT_TRUE(attrs_match(kind, default_attrs(kind)));
  }
}

}  // namespace
}  // namespace stagecraft::graph
