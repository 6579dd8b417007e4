// The bf16 conversion's decisions (which ops compute in bf16, where conversions go, what the graph
// outputs are) on hand-made graphs, the host bf16 rounding, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/half.h"
#include "graph/bf16.h"
#include "graph/errors.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "networks/builder.h"

namespace stagecraft::graph {
namespace {

using networks::NetBuilder;

const TensorDesc& desc_of(const Graph& g, const std::string& value) {
  return g.value(*g.find_value(value)).desc;
}

// An Inception-like block with a sigmoid branch: two conv branches, a pooling branch and a
// sigmoid joined by a concat, then a classifier and a softmax.
Graph block() {
  NetBuilder b("block", 1, 8, 10, 10);
  const ValueId x = b.relu(b.conv(b.input(), networks::square_conv(16, 3, 1, 1, true), "stem"), "stem_relu");
  const ValueId a = b.conv(x, networks::square_conv(8, 1, 1, 0, true), "a");
  const ValueId p = b.max_pool(x, 3, 1, 1, false, "pool");
  const ValueId s = b.sigmoid(x, "gate");
  const ValueId joined = b.concat({a, p, s}, "joined");
  const ValueId logits = b.linear(b.flatten(b.global_avg_pool(joined, "gap"), "flat"), 5, true, "fc");
  return prepare_for_inference(std::move(b).finish({b.softmax(logits, "prob")}));
}

TEST(Bf16, ComputingOpsReadAndWriteBf16AndTheRestStaysF32) {
  const Graph g = block();
  Bf16Report report;
  const Graph h = to_bf16(g, &report);
  EXPECT_TRUE(is_bf16(h));
  EXPECT_FALSE(is_bf16(g));
  EXPECT_EQ(compute_type(h), "bf16");
  EXPECT_EQ(compute_dtype(h), DataType::kBF16);
  // Convolutions, the concat, pooling and flatten compute in bf16 and write bf16; the linear
  // layer computes in bf16 and writes f32 (its reader, the softmax, computes in f32).
  for (const char* v : {"stem", "a", "pool", "joined", "gap", "flat"}) {
    EXPECT_EQ(desc_of(h, v).dtype, DataType::kBF16) << v;
  }
  EXPECT_EQ(desc_of(h, "fc").dtype, DataType::kF32);
  EXPECT_EQ(h.value(h.op(*h.find_op("fc")).inputs[0]).desc.dtype, DataType::kBF16);
  // The sigmoid computes in f32: it reads the stem converted back, and the concat reads its
  // output converted to bf16.
  const Op& gate = h.op(*h.find_op("gate"));
  EXPECT_EQ(h.value(gate.inputs[0]).desc.dtype, DataType::kF32);
  EXPECT_EQ(h.op(h.value(gate.inputs[0]).producer).kind, OpKind::kIdentity);
  EXPECT_EQ(desc_of(h, "gate").dtype, DataType::kF32);
  const Op& joined = h.op(*h.find_op("joined"));
  EXPECT_EQ(h.value(joined.inputs[2]).desc.dtype, DataType::kBF16);
  EXPECT_EQ(h.op(h.value(joined.inputs[2]).producer).kind, OpKind::kIdentity);
  // The f32 input is converted once for the stem; the softmax reads the logits as the linear
  // layer wrote them, in f32, and the graph output is f32.
  const Op& stem = h.op(*h.find_op("stem"));
  EXPECT_EQ(h.value(stem.inputs[0]).desc.dtype, DataType::kBF16);
  const Op& prob = h.op(*h.find_op("prob"));
  EXPECT_EQ(prob.inputs[0], *h.find_value("fc"));
  EXPECT_EQ(h.value(h.outputs()[0]).desc.dtype, DataType::kF32);
  // Conversions: the input, the stem for the sigmoid, the sigmoid for the concat. Every op of the
  // f32 graph is counted once and keeps its name and shape.
  EXPECT_EQ(report.conversions, 3u);
  EXPECT_EQ(report.f32_ops, 2u);  // the sigmoid and the softmax
  EXPECT_EQ(report.bf16_ops + report.f32_ops, g.num_ops());
  EXPECT_EQ(h.num_ops(), g.num_ops() + report.conversions);
  for (const Op& op : g.ops()) {
    ASSERT_TRUE(h.find_op(op.name)) << op.name;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      EXPECT_EQ(h.value(h.op(*h.find_op(op.name)).outputs[i]).desc.shape, g.value(op.outputs[i]).desc.shape);
    }
  }
}

TEST(Bf16, AConversionIsSharedByItsReaders) {
  NetBuilder b("shared", 1, 4, 6, 6);
  const ValueId g1 = b.sigmoid(b.input(), "g1");
  const ValueId c1 = b.conv(g1, networks::square_conv(4, 3, 1, 1, true), "c1");
  const ValueId c2 = b.conv(g1, networks::square_conv(4, 1, 1, 0, true), "c2");
  const Graph g = prepare_for_inference(std::move(b).finish({b.add({c1, c2}, "sum")}), nullptr,
                                         {.fuse_residual_adds = false});
  Bf16Report report;
  const Graph h = to_bf16(g, &report);
  const Op& a = h.op(*h.find_op("c1"));
  const Op& c = h.op(*h.find_op("c2"));
  EXPECT_EQ(a.inputs[0], c.inputs[0]);  // one conversion of g1 to bf16 for both convolutions
  // The sigmoid reads the f32 input directly; the addition is the graph output: it computes and
  // writes bf16 (oneDNN 2.6 adds bf16 into f32 only by reference), converted to f32 after it.
  EXPECT_EQ(report.conversions, 2u);
  EXPECT_EQ(h.value(h.op(*h.find_op("sum")).inputs[0]).desc.dtype, DataType::kBF16);
  EXPECT_EQ(desc_of(h, "sum").dtype, DataType::kBF16);
  EXPECT_EQ(h.value(h.outputs()[0]).desc.dtype, DataType::kF32);
  EXPECT_NE(h.value(h.outputs()[0]).name, "sum");
}

TEST(Bf16, FollowersOfAnOutputComputeInF32SoTheLastConvolutionWritesF32) {
  // squeezenet's head: conv (+ReLU) -> global average pool -> flatten -> graph output.
  NetBuilder b("head", 1, 8, 6, 6);
  const ValueId c0 = b.relu(b.conv(b.input(), networks::square_conv(8, 3, 1, 1, true), "c0"), "r0");
  const ValueId p0 = b.max_pool(c0, 2, 2, 0, false, "p0");
  const ValueId c1 = b.relu(b.conv(p0, networks::square_conv(10, 1, 1, 0, true), "c1"), "r1");
  const Graph g = prepare_for_inference(std::move(b).finish({b.flatten(b.global_avg_pool(c1, "gap"), "flat")}));
  Bf16Report report;
  const Graph h = to_bf16(g, &report);
  EXPECT_EQ(desc_of(h, "c0").dtype, DataType::kBF16);
  EXPECT_EQ(desc_of(h, "p0").dtype, DataType::kBF16);
  EXPECT_EQ(h.value(h.op(*h.find_op("c1")).inputs[0]).desc.dtype, DataType::kBF16);
  for (const char* v : {"c1", "gap", "flat"}) EXPECT_EQ(desc_of(h, v).dtype, DataType::kF32) << v;
  EXPECT_EQ(report.conversions, 1u);  // the input only
  EXPECT_EQ(report.bf16_ops, 3u);     // c0, p0, c1
}

TEST(Bf16, ZeroPaddingFollowsItsInputOtherPaddingIsF32) {
  const Pads some{1, 1, 1, 1};
  EXPECT_EQ(bf16_role(OpKind::kPad, PadAttrs{some, 0.0, false}), Bf16Role::kFollows);
  EXPECT_EQ(bf16_role(OpKind::kPad, PadAttrs{some, 1.5, false}), Bf16Role::kF32);
  EXPECT_EQ(bf16_role(OpKind::kPad, PadAttrs{some, 0.0, true}), Bf16Role::kF32);
  EXPECT_EQ(bf16_role(OpKind::kBatchNorm, BatchNormAttrs{}), Bf16Role::kFollows);
  EXPECT_EQ(bf16_role(OpKind::kSoftmax, SoftmaxAttrs{}), Bf16Role::kF32);
  EXPECT_EQ(bf16_role(OpKind::kConv2d, Conv2dAttrs{}), Bf16Role::kComputes);
}

// Attention in bf16: the head shuffles (reshape, transpose, narrow) and the query's scaling follow
// the linear layer's bf16 output, both matmuls read bf16, and the one whose reader is f32 (the
// softmax) writes f32 from its accumulators: the only conversion inside is the softmax's output.
TEST(Bf16, AttentionMovesAndMatmulsStayInBf16) {
  EXPECT_EQ(bf16_role(OpKind::kMatMul, NoAttrs{}), Bf16Role::kComputes);
  for (OpKind k : {OpKind::kTranspose, OpKind::kNarrow, OpKind::kReshape, OpKind::kScale}) {
    EXPECT_EQ(bf16_role(k, OpAttrs{}), Bf16Role::kFollows) << to_string(k);
  }
  Graph g("attention");
  TensorDesc x = make_desc(Shape{1, 6, 8});
  x.layout = Layout::kRowMajor;
  const ValueId in = g.add_input("x", x);
  const auto op = [&](const char* name, OpKind kind, OpAttrs attrs, std::vector<ValueId> inputs) {
    return g.op(g.add_op(name, kind, std::move(attrs), std::move(inputs))).outputs[0];
  };
  const ValueId qkv = op("qkv", OpKind::kLinear, LinearAttrs{8, 24, true, Activation::kNone}, {in});
  ReshapeAttrs heads;
  heads.dims = {1, 6, 3, 8};
  heads.full = true;
  const ValueId split = op("heads", OpKind::kReshape, heads, {qkv});
  TransposeAttrs t;
  t.perm = {2, 0, 1, 3};
  const ValueId shuffled = op("shuffle", OpKind::kTranspose, t, {split});
  const auto part = [&](const char* name, int64_t i) {
    return op(name, OpKind::kNarrow, NarrowAttrs{0, i, i + 1}, {shuffled});
  };
  const ValueId q = op("scale", OpKind::kScale, ScaleAttrs{0.35}, {part("q", 0)});
  TransposeAttrs kt;
  kt.perm = {0, 1, 3, 2};
  const ValueId k = op("kt", OpKind::kTranspose, kt, {part("k", 1)});
  const ValueId scores = op("scores", OpKind::kMatMul, NoAttrs{}, {q, k});
  const ValueId p = op("softmax", OpKind::kSoftmax, SoftmaxAttrs{3, false, false}, {scores});
  const ValueId mixed = op("mix", OpKind::kMatMul, NoAttrs{}, {p, part("v", 2)});
  g.add_output(mixed);
  Bf16Report report;
  const Graph h = to_bf16(g, &report);
  for (const char* v : {"qkv", "heads", "shuffle", "q", "k", "v", "scale", "kt"}) {
    EXPECT_EQ(desc_of(h, v).dtype, DataType::kBF16) << v;
  }
  EXPECT_EQ(desc_of(h, "scores").dtype, DataType::kF32);  // read by the softmax only
  EXPECT_EQ(h.value(h.op(*h.find_op("mix")).inputs[0]).desc.dtype, DataType::kBF16);  // the softmax's, converted
  EXPECT_EQ(desc_of(h, "mix").dtype, DataType::kF32);     // a graph output
  EXPECT_EQ(report.conversions, 2u);  // the input; the softmax's output
}

TEST(Bf16, AQuantisedGraphIsAClearError) {
  NetBuilder b("q", 1, 4, 6, 6);
  const ValueId y = b.conv(b.input(), networks::square_conv(4, 3, 1, 1, true), "conv");
  Graph g = prepare_for_inference(std::move(b).finish({y}));
  g.set_value_type(*g.find_value("conv"), DataType::kU8, 0.1f);
  try {
    (void)to_bf16(g);
    FAIL() << "an int8 graph was converted to bf16";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 needs an f32 graph, but value 'conv'"), std::string::npos) << e.what();
  }
}

TEST(Bf16, HostConversionRoundsToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values (1 and 1 + 2^-7): ties go to the even one (1);
  // 1 + 3 * 2^-9 rounds up to 1 + 2^-7.
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -9))), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
  // The largest float rounds up past bf16's largest finite value to infinity, as f32 to bf16
  // conversion does in hardware (vcvtneps2bf16).
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max()))));
}

}  // namespace
}  // namespace stagecraft::graph
