// Inference passes: batch-norm folding, activation fusion, identity removal, batch change.
#include <gtest/gtest.h>

#include "graph/errors.h"
#include "graph/passes.h"
#include "graph/weights.h"
#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::graph {
namespace {

using networks::NetBuilder;

TEST(Passes, FoldsBatchNormAndFusesReluIntoConv) {
  NetBuilder nb("t", 1, 3, 8, 8);
  ValueId y = nb.conv_bn_relu(nb.input(), 4, 3, 1, 1);
  Graph g = std::move(nb).finish({y});
  PassLog log;
  Graph out = prepare_for_inference(g, &log);
  ASSERT_EQ(out.num_ops(), 1u);
  const auto& conv = out.op(0).attrs_as<Conv2dAttrs>();
  EXPECT_TRUE(conv.bias);
  EXPECT_EQ(conv.activation, Activation::kRelu);
  EXPECT_EQ(out.value(out.outputs()[0]).desc.shape, (Shape{1, 4, 8, 8}));
  ASSERT_EQ(log.folded.size(), 1u);
  EXPECT_EQ(log.folded[0].conv, "conv");
  EXPECT_EQ(log.folded[0].batch_norm, "bn");
  ASSERT_EQ(log.fused.size(), 1u);
}

TEST(Passes, GatedActivationsAreRecognisedAndFused) {
  // conv -> x * sigmoid(x) -> conv -> x * hard_sigmoid(x): SiLU and hard swish fused into the
  // convolutions; a sigmoid read by anything else stays a multiplication.
  NetBuilder nb("t", 1, 3, 8, 8);
  ValueId c1 = nb.conv(nb.input(), networks::square_conv(4, 3, 1, 1), "c1");
  BinaryAttrs mul;
  mul.op = BinaryOp::kMul;
  ValueId s1 = nb.sigmoid(c1, "sig");
  ValueId m1 = nb.op("silu_mul", OpKind::kBinary, mul, {c1, s1});
  ValueId c2 = nb.conv(m1, networks::square_conv(4, 1), "c2");
  ValueId h = nb.op("hsig", OpKind::kHardSigmoid, HardSigmoidAttrs{}, {c2});
  ValueId m2 = nb.op("hswish_mul", OpKind::kBinary, mul, {h, c2});
  ValueId c3 = nb.conv(m2, networks::square_conv(4, 1), "c3");
  ValueId s3 = nb.sigmoid(c3, "sig3");
  ValueId m3 = nb.op("gated", OpKind::kBinary, mul, {c3, s3});
  Graph g = std::move(nb).finish({m3, s3});  // s3 is also an output: not fused
  PassLog log;
  Graph out = prepare_for_inference(g, &log);
  ASSERT_EQ(log.recognised.size(), 2u);
  EXPECT_EQ(log.recognised[0].kind, "silu");
  EXPECT_EQ(log.recognised[1].kind, "hard_swish");
  EXPECT_EQ(out.op(*out.find_op("c1")).attrs_as<Conv2dAttrs>().activation, Activation::kSilu);
  EXPECT_EQ(out.op(*out.find_op("c2")).attrs_as<Conv2dAttrs>().activation, Activation::kHardSwish);
  EXPECT_FALSE(out.find_op("sig").has_value());
  EXPECT_EQ(out.op(*out.find_op("gated")).kind, OpKind::kBinary);
  EXPECT_EQ(count_ops(out, OpKind::kSigmoid), 1u);
}

TEST(Passes, DoesNotFoldWhenTheConvOutputIsSharedOrAGraphOutput) {
  NetBuilder nb("t", 1, 3, 8, 8);
  ValueId c = nb.conv(nb.input(), networks::square_conv(4, 1), "c");
  ValueId b = nb.bn(c, 1e-5, "b");
  ValueId r = nb.relu(c, "r");  // c has two readers: b and r
  Graph g = std::move(nb).finish({b, r});
  Graph out = prepare_for_inference(g);
  EXPECT_EQ(out.num_ops(), 3u);
  EXPECT_FALSE(out.op(0).attrs_as<Conv2dAttrs>().bias);
}

TEST(Passes, PreActivationReluBeforeConvStays) {
  // NASNet/RandWire order: relu -> conv -> bn ; the relu reads a shared value and stays.
  NetBuilder nb("t", 1, 4, 8, 8);
  ValueId x = nb.relu(nb.input(), "pre");
  ValueId y = nb.bn(nb.conv(x, networks::square_conv(4, 3, 1, 1)));
  Graph out = prepare_for_inference(std::move(nb).finish({y}));
  ASSERT_EQ(out.num_ops(), 2u);
  EXPECT_EQ(out.op(0).kind, OpKind::kRelu);
  EXPECT_EQ(out.op(1).attrs_as<Conv2dAttrs>().activation, Activation::kNone);
}

TEST(Passes, ReluAfterAddIsFusedAndIdentitiesRemoved) {
  NetBuilder nb("t", 1, 4, 8, 8);
  ValueId a = nb.relu(nb.input(), "a");
  ValueId i = nb.identity(a, "i");
  ValueId s = nb.relu(nb.add({a, i}, "s"), "r");
  Graph out = prepare_for_inference(std::move(nb).finish({s}));
  ASSERT_EQ(out.num_ops(), 2u);
  EXPECT_EQ(out.op(1).attrs_as<AddAttrs>().activation, Activation::kRelu);
  EXPECT_EQ(out.op(1).inputs, (std::vector<ValueId>{out.op(0).outputs[0], out.op(0).outputs[0]}));
}

TEST(Passes, InferenceGraphsKeepMacsAndOutputs) {
  for (const char* name : {"inception_v3", "resnet50", "googlenet"}) {
    const Graph raw = networks::build_network(name);
    const Graph g = prepare_for_inference(raw);
    EXPECT_EQ(total_macs(g), total_macs(raw)) << name;
    EXPECT_EQ(count_ops(g, OpKind::kBatchNorm), 0u) << name;
    EXPECT_EQ(count_ops(g, OpKind::kConv2d), count_ops(raw, OpKind::kConv2d)) << name;
    EXPECT_EQ(g.value(g.outputs()[0]).desc, raw.value(raw.outputs()[0]).desc) << name;
  }
  // resnet50: every relu is fused (after a conv or an add).
  EXPECT_EQ(count_ops(prepare_for_inference(networks::build_network("resnet50")), OpKind::kRelu),
            0u);
}

// ResNet-50's 16 residual additions become convolutions reading the shortcut (with the ReLU
// after the addition); the 4 downsample shortcut convolutions stay plain, free to run beside the
// main branch; quantised graphs and the unfused option keep the additions.
TEST(Passes, ResidualAdditionsFuseIntoTheDeeperConvolution) {
  const Graph raw = networks::build_network("resnet50");
  PassLog log;
  const Graph g = prepare_for_inference(raw, &log);
  EXPECT_EQ(count_ops(g, OpKind::kAdd), 0u);
  EXPECT_EQ(log.residual.size(), 16u);
  size_t residual = 0, downsample = 0;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::kConv2d) continue;
    const auto& a = op.attrs_as<Conv2dAttrs>();
    if (op.name.find("downsample") != std::string::npos) {
      ++downsample;
      EXPECT_FALSE(a.residual) << op.name << " took the residual: the shortcut no longer runs beside the main branch";
    }
    if (a.residual) {
      ++residual;
      EXPECT_EQ(op.inputs.size(), 2u) << op.name;
      EXPECT_EQ(a.activation, Activation::kRelu) << op.name;
    }
  }
  EXPECT_EQ(residual, 16u);
  EXPECT_EQ(downsample, 4u);
  const Graph unfused = prepare_for_inference(raw, nullptr, {.fuse_residual_adds = false});
  EXPECT_EQ(count_ops(unfused, OpKind::kAdd), 16u);
}

// ShuffleNet's unit ending, concat then shuffle, becomes one shuffle reading the parts; a
// concatenation read by anything else (or a graph output) stays.
TEST(Passes, ConcatenationsReadByAShuffleAloneFoldIntoIt) {
  NetBuilder nb("t", 1, 3, 8, 8);
  const ValueId a = nb.conv(nb.input(), networks::square_conv(4, 1), "a");
  const ValueId b = nb.conv(nb.input(), networks::square_conv(6, 3, 1, 1), "b");
  ChannelShuffleAttrs two;
  two.groups = 2;
  const ValueId folded = nb.op("shuffle1", OpKind::kChannelShuffle, two, {nb.concat({a, b}, "cat1")});
  const ValueId shared = nb.concat({a, b}, "cat2");
  const ValueId kept = nb.op("shuffle2", OpKind::kChannelShuffle, two, {shared});
  const ValueId pooled = nb.global_avg_pool(shared, "pool");
  const ValueId output = nb.concat({b, a}, "cat3");
  const ValueId kept_too = nb.op("shuffle3", OpKind::kChannelShuffle, two, {output});
  const Graph g = std::move(nb).finish({folded, kept, pooled, output, kept_too});
  PassLog log;
  const Graph out = prepare_for_inference(g, &log);
  ASSERT_EQ(log.concats.size(), 1u);
  EXPECT_EQ(log.concats[0].shuffle, "shuffle1");
  EXPECT_EQ(log.concats[0].concat, "cat1");
  EXPECT_FALSE(out.find_op("cat1").has_value());
  const Op& shuffle = out.op(*out.find_op("shuffle1"));
  ASSERT_EQ(shuffle.inputs.size(), 2u);
  EXPECT_EQ(out.value(shuffle.inputs[0]).producer, *out.find_op("a"));
  EXPECT_EQ(out.value(shuffle.inputs[1]).producer, *out.find_op("b"));
  EXPECT_EQ(out.value(shuffle.outputs[0]).desc.shape, (Shape{1, 10, 8, 8}));
  EXPECT_EQ(out.op(*out.find_op("shuffle2")).inputs.size(), 1u);
  EXPECT_EQ(out.op(*out.find_op("shuffle3")).inputs.size(), 1u);
  EXPECT_EQ(count_ops(out, OpKind::kConcat), 2u);
}

TEST(Passes, WithBatchReinfersEveryShape) {
  const Graph g = networks::build_network("squeezenet1_1");
  const Graph g8 = with_batch(g, 8);
  EXPECT_EQ(g8.value(g8.outputs()[0]).desc.shape, (Shape{8, 1000}));
  EXPECT_EQ(total_macs(g8), 8 * total_macs(g));
  EXPECT_THROW(with_batch(g, 0), GraphError);
}

}  // namespace
}  // namespace stagecraft::graph

namespace stagecraft::graph {
namespace {

// x -> relu a, relu b (equal) -> conv c1 on a, conv c2 on b (weights w1, w2) -> add; and a third
// relu of x that is a graph output.
struct Twins {
  Graph g;
  WeightStore w;
};

Twins twins(bool equal_weights) {
  networks::NetBuilder nb("twins", 1, 3, 6, 6);
  const ValueId a = nb.relu(nb.input(), "a");
  const ValueId b = nb.relu(nb.input(), "b");
  const ValueId c1 = nb.conv(a, networks::square_conv(4, 3, 1, 1, true), "c1");
  const ValueId c2 = nb.conv(b, networks::square_conv(4, 3, 1, 1, true), "c2");
  const ValueId sum = nb.add({c1, c2}, "sum");
  const ValueId out = nb.relu(nb.input(), "out");
  Twins t{std::move(nb).finish({sum, out}), {}};
  t.w = random_weights(t.g, 3);
  if (equal_weights) t.w["c2"] = t.w["c1"];
  return t;
}

TEST(Passes, EqualOpsAreComputedOnce) {
  const Twins t = twins(true);
  PassLog log;
  const Graph g = merge_duplicate_ops(t.g, t.w, &log);
  // b is a's twin, so c2 reads what c1 reads with c1's weights: both merged, in a chain. The
  // relu that is a graph output stays.
  ASSERT_EQ(log.merged.size(), 2u);
  EXPECT_EQ(log.merged[0], (std::pair<std::string, std::string>{"a", "b"}));
  EXPECT_EQ(log.merged[1], (std::pair<std::string, std::string>{"c1", "c2"}));
  EXPECT_EQ(g.num_ops(), t.g.num_ops() - 2);
  const Op& sum = g.op(g.value(g.outputs()[0]).producer);
  EXPECT_EQ(sum.inputs[0], sum.inputs[1]);  // c1 + c1
  EXPECT_EQ(g.outputs().size(), 2u);
}

TEST(Passes, OpsWithOtherWeightsStay) {
  const Twins t = twins(false);
  PassLog log;
  const Graph g = merge_duplicate_ops(t.g, t.w, &log);
  ASSERT_EQ(log.merged.size(), 1u);  // the relus only
  EXPECT_EQ(g.num_ops(), t.g.num_ops() - 1);
}

}  // namespace
}  // namespace stagecraft::graph
