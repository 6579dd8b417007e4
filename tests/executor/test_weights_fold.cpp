// Random weights and their checks, and weight folding: a raw network and its inference form
// (batch norms folded, activations fused) compute the same outputs on random data (the reference
// runs both).
#include <gtest/gtest.h>

#include <functional>
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

using graph::Graph;
using graph::GraphError;
using graph::OpKind;
using graph::OpWeights;
using graph::Shape;
using graph::ValueId;
using graph::WeightStore;
using networks::NetBuilder;

// Folded and unfolded graphs round differently; the brief's bound relative to the output scale.
constexpr double kFoldTolerance = 1e-4;
constexpr uint64_t kWeightSeed = 1;
constexpr uint64_t kInputSeed = 7;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const GraphError& e) {
    return e.what();
  }
  return "";
}

Graph small_net() {
  NetBuilder nb("small", 2, 3, 12, 12);
  ValueId x = nb.conv(nb.input(), networks::square_conv(8, 3, 2, 1), "c1");
  x = nb.relu(nb.bn(x, 1e-3, "b1"), "r1");
  x = nb.conv(x, networks::square_conv(8, 3, 1, 1, /*bias=*/true), "c2");
  x = nb.relu6(nb.bn(x, 1e-5, "b2"), "r2");
  x = nb.max_pool(x, 3, 2, 1, /*ceil_mode=*/true);
  x = nb.linear(nb.flatten(nb.global_avg_pool(x)), 5, true, "fc");
  return std::move(nb).finish({nb.softmax(x), x});
}

void expect_same_weights(const OpWeights& a, const OpWeights& b) {
  EXPECT_EQ(a.weight, b.weight);
  EXPECT_EQ(a.bias, b.bias);
  EXPECT_EQ(a.gamma, b.gamma);
  EXPECT_EQ(a.beta, b.beta);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.var, b.var);
}

TEST(Weights, RandomWeightsAreDeterministicPerSeedAndDifferAcrossSeeds) {
  const Graph g = small_net();
  const WeightStore a = graph::random_weights(g, 1);
  const WeightStore again = graph::random_weights(g, 1);
  const WeightStore other = graph::random_weights(g, 2);
  EXPECT_NO_THROW(graph::check_weights(g, a));
  ASSERT_EQ(a.size(), 5u);  // c1, b1, c2, b2, fc
  ASSERT_EQ(again.size(), a.size());
  for (const auto& [name, w] : a.entries()) {
    SCOPED_TRACE(name);
    ASSERT_NE(again.find(name), nullptr);
    expect_same_weights(*again.find(name), w);
    const OpWeights* o = other.find(name);
    ASSERT_NE(o, nullptr);
    if (!w.weight.empty()) {
      EXPECT_NE(o->weight, w.weight);
    }
    if (!w.gamma.empty()) {
      EXPECT_NE(o->gamma, w.gamma);
    }
  }
  EXPECT_EQ(a.find("c1")->weight.size(), 8u * 3 * 3 * 3);
  EXPECT_TRUE(a.find("c1")->bias.empty());
  EXPECT_EQ(a.find("c2")->bias.size(), 8u);
  EXPECT_EQ(a.find("b1")->var.size(), 8u);
  EXPECT_EQ(a.find("fc")->weight.size(), 8u * 5);
  for (float v : a.find("b2")->var) EXPECT_GT(v, 0.0f);
}

TEST(Weights, CheckWeightsNamesTheOpWithMissingOrWrongSizedWeights) {
  const Graph g = small_net();
  const WeightStore good = graph::random_weights(g, 1);
  auto without = [&](const std::string& skipped) {
    WeightStore w;
    for (const auto& [name, entry] : good.entries()) {
      if (name != skipped) w[name] = entry;
    }
    return w;
  };
  auto message = [&](const WeightStore& w) {
    return error_of([&] { graph::check_weights(g, w); });
  };

  EXPECT_NE(message(without("c1")).find("'c1'"), std::string::npos);
  EXPECT_NE(message(without("b2")).find("'b2'"), std::string::npos);
  EXPECT_NE(message(without("fc")).find("'fc'"), std::string::npos);

  WeightStore w = good;
  w["fc"].weight.pop_back();
  EXPECT_NE(message(w).find("'fc'"), std::string::npos);
  w = good;
  w["c2"].bias.clear();
  EXPECT_NE(message(w).find("'c2'"), std::string::npos);
  w = good;
  w["c1"].bias = {1, 2, 3, 4, 5, 6, 7, 8};  // c1 has no bias
  EXPECT_NE(message(w).find("'c1'"), std::string::npos);
  w = good;
  w["b1"].gamma.push_back(1);
  EXPECT_NE(message(w).find("'b1'"), std::string::npos);

  // reference_run checks its weights the same way.
  EXPECT_THROW(reference_run(g, without("c2"), {random_tensor(Shape{2, 3, 12, 12}, 1)}),
               GraphError);
}

// ---- Folding: the inference graph computes what the raw graph computes --------------------------

struct FoldRun {
  std::vector<HostTensor> raw;     // raw graph, random weights
  std::vector<HostTensor> folded;  // prepare_for_inference graph, fold_weights
  graph::PassLog log;
  WeightStore weights;  // the raw weights
  Graph inference;
  std::vector<HostTensor> inputs;
};

FoldRun run_raw_and_folded(const Graph& raw) {
  FoldRun r;
  r.weights = graph::random_weights(raw, kWeightSeed);
  r.inference = graph::prepare_for_inference(raw, &r.log);
  for (size_t i = 0; i < raw.inputs().size(); ++i) {
    r.inputs.push_back(random_tensor(raw.value(raw.inputs()[i]).desc.shape, kInputSeed + i));
  }
  r.raw = reference_run(raw, r.weights, r.inputs);
  r.folded = reference_run(r.inference, graph::fold_weights(raw, r.weights, r.log), r.inputs);
  return r;
}

void expect_folding_preserves_outputs(const Graph& raw) {
  const FoldRun r = run_raw_and_folded(raw);
  // Every network here has fused activations; SqueezeNet has no batch norm to fold.
  EXPECT_FALSE(r.log.fused.empty());
  EXPECT_EQ(r.log.folded.size(), graph::count_ops(raw, OpKind::kBatchNorm));
  EXPECT_EQ(graph::count_ops(r.inference, OpKind::kBatchNorm), 0u);
  ASSERT_EQ(r.folded.size(), r.raw.size());
  for (size_t i = 0; i < r.raw.size(); ++i) {
    SCOPED_TRACE(cat("output ", i));
    EXPECT_LT(max_relative_error(r.folded[i], r.raw[i]), kFoldTolerance);
    // The outputs are not a constant that any weights would reproduce.
    const auto [lo, hi] = std::minmax_element(r.raw[i].data.begin(), r.raw[i].data.end());
    EXPECT_GT(*hi - *lo, 1e-3f);
  }
}

TEST(FoldWeights, ConvBatchNormReluNetworkIsUnchanged) {
  const Graph raw = small_net();
  expect_folding_preserves_outputs(raw);
  const FoldRun r = run_raw_and_folded(raw);
  EXPECT_EQ(r.log.folded.size(), 2u);
  EXPECT_EQ(graph::count_ops(r.inference, OpKind::kBatchNorm), 0u);

  // The check can fail: the inference graph with the raw (unfolded) weights, biases zero-filled
  // where folding added them, computes something else.
  WeightStore unfolded = r.weights;
  unfolded["c1"].bias.assign(8, 0.0f);
  const std::vector<HostTensor> wrong = reference_run(r.inference, unfolded, r.inputs);
  EXPECT_GT(max_relative_error(wrong[1], r.raw[1]), 1e-2);
}

// Inception-ResNet's scaled residual branch: conv, batch norm, x 0.17, + shortcut, ReLU. The
// scale folds into the convolution (after its batch norm), which then takes the addition as its
// residual; a scale after a convolution read twice, or after one with an activation, stays.
TEST(FoldWeights, ScaledResidualBranchFoldsItsScaleIntoTheConvolution) {
  NetBuilder nb("scaled", 2, 8, 10, 10);
  const ValueId x = nb.input();
  graph::ScaleAttrs scale;
  scale.factor = 0.17;
  const ValueId branch = nb.bn(nb.conv(x, networks::square_conv(8, 3, 1, 1), "c1"), 1e-3, "b1");
  const ValueId scaled = nb.op("s1", OpKind::kScale, scale, {branch});
  const ValueId y = nb.relu(nb.add({scaled, x}, "sum"), "r1");
  // c2 is read by its scale and by the concat: nothing folds.
  const ValueId c2 = nb.conv(y, networks::square_conv(8, 1), "c2");
  scale.factor = -2.5;
  const ValueId kept = nb.op("s2", OpKind::kScale, scale, {c2});
  // c3 has a ReLU between it and the scale: scale(relu(conv)) != relu(scale(conv)) for a negative factor.
  const ValueId kept_too = nb.op("s3", OpKind::kScale, scale, {nb.relu(nb.conv(y, networks::square_conv(8, 1), "c3"), "r3")});
  const Graph raw = std::move(nb).finish({nb.concat({kept, c2, kept_too}, "out")});
  const FoldRun r = run_raw_and_folded(raw);
  ASSERT_EQ(r.log.scales.size(), 1u);
  EXPECT_EQ(r.log.scales[0].conv, "c1");
  EXPECT_EQ(r.log.scales[0].scale, "s1");
  EXPECT_EQ(graph::count_ops(r.inference, OpKind::kScale), 2u);  // s2, s3 stay
  ASSERT_EQ(r.log.residual.size(), 1u);  // the addition fused into c1 once the scale is gone
  EXPECT_EQ(r.log.residual[0].conv, "c1");
  EXPECT_LT(max_relative_error(r.folded[0], r.raw[0]), kFoldTolerance);

  // The check can fail: without the scale folded into c1's weights the result differs.
  graph::PassLog no_scales = r.log;
  no_scales.scales.clear();
  const std::vector<HostTensor> wrong =
      reference_run(r.inference, graph::fold_weights(raw, r.weights, no_scales), r.inputs);
  EXPECT_GT(max_relative_error(wrong[0], r.raw[0]), 1e-2);
}

// A pre-activation block (conv, + shortcut, then BN and ReLU): preparing fuses the addition into
// the convolution as its residual and keeps the batch norm; preparing that graph again must keep
// it too (BN(conv(x) + r) is not a convolution of x) and compute what the raw graph computes.
TEST(FoldWeights, ABatchNormAfterAFusedResidualStaysWhenPreparedAgain) {
  NetBuilder nb("preact", 2, 8, 10, 10);
  const ValueId x = nb.input();
  const ValueId sum = nb.add({nb.conv(x, networks::square_conv(8, 3, 1, 1), "c1"), x}, "sum");
  const Graph raw = std::move(nb).finish({nb.relu(nb.bn(sum, 1e-3, "b1"), "r1")});
  const FoldRun once = run_raw_and_folded(raw);
  ASSERT_EQ(once.log.residual.size(), 1u);
  EXPECT_EQ(graph::count_ops(once.inference, OpKind::kBatchNorm), 1u);
  graph::PassLog again_log;
  const Graph again = graph::prepare_for_inference(once.inference, &again_log);
  EXPECT_TRUE(again_log.folded.empty());
  EXPECT_EQ(graph::count_ops(again, OpKind::kBatchNorm), 1u);
  const WeightStore once_weights = graph::fold_weights(raw, once.weights, once.log);
  const std::vector<HostTensor> got =
      reference_run(again, graph::fold_weights(once.inference, once_weights, again_log), once.inputs);
  EXPECT_LT(max_relative_error(got[0], once.raw[0]), kFoldTolerance);
}

networks::NetworkOptions small_options() {
  networks::NetworkOptions options;
  options.batch = 2;
  options.input_size = 64;
  return options;
}

TEST(FoldWeights, SqueezeNetIsUnchanged) {
  expect_folding_preserves_outputs(networks::build_network("squeezenet1_1", small_options()));
}

TEST(FoldWeights, GoogLeNetIsUnchanged) {
  expect_folding_preserves_outputs(networks::build_network("googlenet", small_options()));
}

TEST(FoldWeights, ResNet50IsUnchanged) {
  expect_folding_preserves_outputs(networks::build_network("resnet50", small_options()));
}

}  // namespace
}  // namespace stagecraft::executor::testing
