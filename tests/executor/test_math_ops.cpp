// ONNX's math on the CPU backend. Unary functions (Abs, Exp, Sin, Erf, Elu, ...): every function
// in every layout, against graph::apply_unary through the reference, with 5 channels (a blocked
// layout pads them to 8 or 16): the padding lanes must read as zeros to the convolution after it
// (log(0) = -inf there would make it NaN). Binary pow, max, min and mod: with either operand
// broadcast or a constant, in every layout, against the reference's own loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/strings.h"
#include "executor/executor.h"
#include "graph/passes.h"
#include "networks/builder.h"
#include "reference.h"
#include "support/compare.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using graph::Layout;
using graph::ValueId;
using graph::OpKind;
using graph::UnaryAttrs;
using graph::UnaryFn;

std::vector<UnaryFn> every_fn() {
  std::vector<UnaryFn> fns;
  for (const std::string& name : graph::unary_fn_names()) fns.push_back(*graph::parse_unary_fn(name));
  return fns;
}

UnaryAttrs attrs_of(UnaryFn fn) {
  UnaryAttrs a;
  a.fn = fn;
  a.alpha = fn == UnaryFn::kShrink ? 0.3 : 0.7;
  a.beta = fn == UnaryFn::kShrink ? 0.1 : 1.3;
  return a;
}

// Inputs inside the function's domain (acosh from 1, atanh, asin and acos inside (-1, 1), log
// above 0), with halves for round (ties to even).
HostTensor input_for(UnaryFn fn, const graph::Shape& shape) {
  HostTensor x = random_host_tensor(shape, 11);
  for (size_t i = 0; i < x.data.size(); ++i) {
    float& v = x.data[i];
    switch (fn) {
      case UnaryFn::kAcosh: v = 1.0f + 3.0f * std::fabs(v); break;
      case UnaryFn::kAtanh: case UnaryFn::kAsin: case UnaryFn::kAcos: v *= 0.95f; break;
      case UnaryFn::kLog: v = 0.05f + 2.0f * std::fabs(v); break;
      case UnaryFn::kRound: v = static_cast<float>(static_cast<int>(i % 9) - 4) * 0.5f; break;
      case UnaryFn::kNot: v = i % 3 == 0 ? 0.0f : v; break;  // zeros among the values
      case UnaryFn::kIsNaN: case UnaryFn::kIsInf:  // NaN, +inf and -inf among the values
        v = i % 5 == 0 ? NAN : i % 5 == 1 ? INFINITY : i % 5 == 2 ? -INFINITY : v;
        break;
      default: v *= 3.0f; break;
    }
  }
  return x;
}

// input [2, 5, 3, 4] -> unary -> 1x1 convolution; both the unary's and the convolution's outputs.
graph::Graph unary_graph(UnaryFn fn) {
  networks::NetBuilder b("unary", 2, 5, 3, 4);
  const auto u = b.op("fn", OpKind::kUnary, attrs_of(fn), {b.input()});
  const auto c = b.conv(u, networks::square_conv(6, 1, 1, 0, true), "conv");
  return std::move(b).finish({u, c});
}

// Runs `m` planned in each CPU layout and expects every output within 1e-5 (relative, NaN-aware)
// of `want`; `what` names the case in failures.
void expect_every_layout_matches(const stagecraft::testing::Model& m, const std::vector<HostTensor>& inputs,
                                 const std::vector<HostTensor>& want, const std::string& what) {
  const auto schedule = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
    PlanOptions options;
    options.layouts = graph::LayoutAssignment::uniform(layout);
    ExecutionPlan plan(m.graph, schedule, m.weights, stagecraft::testing::cpu_backend(), options);
    const auto got = Executor(plan).run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LT(stagecraft::testing::max_relative_error_with_specials(got[i].data, want[i].data), 1e-5)
          << what << " in " << graph::to_string(layout) << ", output " << i << " ("
          << m.graph.value(m.graph.outputs()[i]).name << ")";
    }
  }
}

TEST(UnaryOps, EveryFunctionMatchesItsDefinitionInEveryLayout) {
  ASSERT_EQ(every_fn().size(), 31u);
  for (UnaryFn fn : every_fn()) {
    const stagecraft::testing::Model m = stagecraft::testing::model_of(unary_graph(fn), 3);
    const std::vector<HostTensor> inputs = {input_for(fn, graph::Shape{2, 5, 3, 4})};
    const auto want = testing::reference_run(m.graph, m.weights, inputs);
    ASSERT_EQ(want.size(), 2u);
    expect_every_layout_matches(m, inputs, want, std::string(graph::to_string(fn)));
  }
}

// The definitions themselves, at points where ONNX's reference gives exact values.
TEST(UnaryOps, DefinitionsAgreeWithOnnxAtKnownPoints) {
  const auto f = [](UnaryFn fn, float x, double alpha = 0, double beta = 0) {
    UnaryAttrs a;
    a.fn = fn;
    a.alpha = alpha;
    a.beta = beta;
    return graph::apply_unary(a, x);
  };
  EXPECT_EQ(f(UnaryFn::kRound, 2.5f), 2.0f);
  EXPECT_EQ(f(UnaryFn::kRound, -1.5f), -2.0f);
  EXPECT_EQ(f(UnaryFn::kSign, -0.0f), 0.0f);
  EXPECT_EQ(f(UnaryFn::kSign, -3.0f), -1.0f);
  EXPECT_TRUE(std::isnan(f(UnaryFn::kSign, NAN)));
  EXPECT_FLOAT_EQ(f(UnaryFn::kSoftplus, 100.0f), 100.0f);  // no overflow
  EXPECT_FLOAT_EQ(f(UnaryFn::kSoftplus, 0.0f), std::log(2.0f));
  EXPECT_FLOAT_EQ(f(UnaryFn::kElu, -1.0f, 2.0), static_cast<float>(2.0 * (std::exp(-1.0) - 1.0)));
  EXPECT_FLOAT_EQ(f(UnaryFn::kSelu, 2.0f, 1.5, 3.0), 6.0f);
  EXPECT_FLOAT_EQ(f(UnaryFn::kThresholdedRelu, 1.0f, 1.0), 0.0f);  // strictly above alpha
  EXPECT_FLOAT_EQ(f(UnaryFn::kShrink, 0.4f, 0.5, 0.1), 0.0f);
  EXPECT_FLOAT_EQ(f(UnaryFn::kShrink, -2.0f, 0.5, 0.1), -1.9f);
  EXPECT_FLOAT_EQ(f(UnaryFn::kCelu, -1.0f, 2.0), static_cast<float>(2.0 * (std::exp(-0.5) - 1.0)));
  EXPECT_FLOAT_EQ(f(UnaryFn::kSwish, 1.0f, 2.0), static_cast<float>(1.0 / (1.0 + std::exp(-2.0))));
}

// x [2, 5, 3, 4] -> 1x1 convolution c (exp of both operands for pow: positive bases); outputs
// gap(x) OP c (the first operand broadcast over H and W) and c OP constant[5, 1, 1].
graph::Graph binary_graph(graph::BinaryOp op) {
  networks::NetBuilder b("binary", 2, 5, 3, 4);
  ValueId c = b.conv(b.input(), networks::square_conv(5, 1, 1, 0, true), "conv");
  ValueId pooled = b.global_avg_pool(b.input(), "gap");
  if (op == graph::BinaryOp::kPow) {  // positive bases
    c = b.op("exp", OpKind::kUnary, attrs_of(UnaryFn::kExp), {c});
    pooled = b.op("exp_pooled", OpKind::kUnary, attrs_of(UnaryFn::kExp), {pooled});
  }
  graph::BinaryAttrs two;
  two.op = op;
  const ValueId y1 = b.op("first_broadcast", OpKind::kBinary, two, {pooled, c});
  graph::BinaryAttrs constant = two;
  constant.constant = {5, 1, 1};
  const ValueId y2 = b.op("constant", OpKind::kBinary, constant, {c});
  return std::move(b).finish({y1, y2});
}

TEST(BinaryMath, PowMaxMinModComparisonsAndLogicMatchTheReferenceInEveryLayout) {
  using graph::BinaryOp;
  for (BinaryOp op : {BinaryOp::kPow, BinaryOp::kMax, BinaryOp::kMin, BinaryOp::kMod, BinaryOp::kEqual, BinaryOp::kLess,
                      BinaryOp::kLessEqual, BinaryOp::kGreater, BinaryOp::kGreaterEqual, BinaryOp::kAnd, BinaryOp::kOr,
                      BinaryOp::kXor}) {
    const stagecraft::testing::Model m = stagecraft::testing::model_of(binary_graph(op), 4);
    const auto inputs = stagecraft::testing::inputs_of(m.graph);
    const auto want = testing::reference_run(m.graph, m.weights, inputs);
    ASSERT_EQ(want.size(), 2u);
    expect_every_layout_matches(m, inputs, want, std::string(graph::to_string(op)));
  }
}

// Where with its condition a comparison, x and y tensors or constants (a scalar -inf among them),
// broadcast against each other, in every layout against ONNX's definition; the branch not taken
// never reaches the result (-inf and NaN there stay out).
TEST(Where, SelectsWithBroadcastingAndConstantsInEveryLayout) {
  networks::NetBuilder b("where", 2, 5, 3, 4);
  const ValueId c = b.conv(b.input(), networks::square_conv(5, 1, 1, 0, true), "conv");
  const ValueId pooled = b.global_avg_pool(b.input(), "gap");
  graph::BinaryAttrs less;
  less.op = graph::BinaryOp::kLess;
  const ValueId mask = b.op("mask", OpKind::kBinary, less, {c, b.input()});
  graph::WhereAttrs tensors;  // mask ? c : gap(x) broadcast over H and W
  const ValueId y1 = b.op("tensors", OpKind::kWhere, tensors, {mask, c, pooled});
  graph::WhereAttrs constants;  // mask ? -inf : c, and a constant [1, 5, 1, 1] condition over gap(x)
  constants.x_constant = true;
  const ValueId y2 = b.op("neg_inf", OpKind::kWhere, constants, {mask, c});
  graph::WhereAttrs by_channel;
  by_channel.condition_constant = by_channel.y_constant = true;
  by_channel.condition_shape = {1, 5, 1, 1};
  by_channel.y_shape = {1};
  const ValueId y3 = b.op("by_channel", OpKind::kWhere, by_channel, {pooled});
  stagecraft::testing::Model m = stagecraft::testing::model_of(std::move(b).finish({y1, y2, y3}), 4);
  m.weights["neg_inf"].weight = {-INFINITY};
  m.weights["by_channel"].gamma = {1, 0, 1, 0, 0};
  m.weights["by_channel"].bias = {NAN};
  const auto inputs = stagecraft::testing::inputs_of(m.graph);
  const auto want = testing::reference_run(m.graph, m.weights, inputs);
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(want[2].shape, (graph::Shape{2, 5, 1, 1}));
  int chosen = 0;
  for (float v : want[1].data) chosen += std::isinf(v) ? 1 : 0;
  EXPECT_GT(chosen, 0);  // both branches taken
  EXPECT_LT(chosen, static_cast<int>(want[1].data.size()));
  expect_every_layout_matches(m, inputs, want, "where");
}

TEST(BinaryMath, MaxAndMinPropagateNaNAsNumPyDoes) {
  EXPECT_TRUE(std::isnan(graph::apply_binary(graph::BinaryOp::kMax, NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(graph::apply_binary(graph::BinaryOp::kMax, 1.0f, NAN)));
  EXPECT_TRUE(std::isnan(graph::apply_binary(graph::BinaryOp::kMin, 1.0f, NAN)));
  EXPECT_EQ(graph::apply_binary(graph::BinaryOp::kMod, -7.0f, 3.0f), -1.0f);  // the sign of the first
  EXPECT_EQ(graph::apply_binary(graph::BinaryOp::kPow, 2.0f, -1.0f), 0.5f);
}

// Reductions over any axes, the batch axis included: min over N and H, product over C, mean over
// everything, max over W, in every layout.
TEST(Reductions, AnyAxesOfEveryKindMatchTheReferenceInEveryLayout) {
  networks::NetBuilder b("reductions", 2, 5, 3, 4);
  const auto reduce = [&](const char* name, OpKind kind, std::vector<int64_t> axes) {
    graph::ReduceAttrs a;
    a.axes = std::move(axes);
    return b.op(name, kind, a, {b.input()});
  };
  const std::vector<ValueId> outputs = {reduce("min_nh", OpKind::kReduceMin, {0, 2}),
                                        reduce("prod_c", OpKind::kReduceProd, {1}),
                                        reduce("mean_all", OpKind::kReduceMean, {0, 1, 2, 3}),
                                        reduce("max_w", OpKind::kReduceMax, {3})};
  const stagecraft::testing::Model m = stagecraft::testing::model_of(std::move(b).finish(outputs), 2);
  const auto inputs = stagecraft::testing::inputs_of(m.graph);
  const auto want = testing::reference_run(m.graph, m.weights, inputs);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(want[0].shape, (graph::Shape{1, 5, 1, 4}));
  expect_every_layout_matches(m, inputs, want, "reductions");
}

// Reductions of row-major tensors in every pattern of kept and reduced axes (reduced first, last,
// alternating, everything), where oneDNN 2.6 often has only its reference kernel and our host loop
// runs them (ConvNeXt V2's norm over H and W of [1, H·W, C]).
TEST(Reductions, RowMajorTensorsMatchTheReferenceInEveryAxisPattern) {
  struct Case {
    graph::Shape x;
    OpKind kind;
    std::vector<int64_t> axes;
  };
  int host = 0;
  for (const Case& c : {Case{graph::Shape{1, 40, 24}, OpKind::kReduceSum, {1}}, Case{graph::Shape{3, 40, 24}, OpKind::kReduceMean, {1}},
                        Case{graph::Shape{2, 3, 4, 5, 6}, OpKind::kReduceMax, {1, 3}},
                        Case{graph::Shape{2, 3, 4, 5, 6}, OpKind::kReduceMin, {0, 2, 4}},
                        Case{graph::Shape{5, 7, 3}, OpKind::kReduceProd, {2}},
                        Case{graph::Shape{4, 1, 9}, OpKind::kReduceSum, {0, 1, 2}}}) {
    graph::Graph g("reduce");
    const ValueId in = g.add_input("x", graph::make_desc(c.x));
    graph::ReduceAttrs a;
    a.axes = c.axes;
    g.add_output(g.op(g.add_op("reduce", c.kind, a, {in})).outputs[0]);
    const stagecraft::testing::Model m = stagecraft::testing::model_of(g, 2);
    const auto inputs = stagecraft::testing::inputs_of(m.graph);
    const auto want = testing::reference_run(m.graph, m.weights, inputs);
    const auto schedule = stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential);
    ExecutionPlan plan(m.graph, schedule, m.weights, stagecraft::testing::cpu_backend(), PlanOptions{});
    for (const auto& k : plan.kernels()) host += k.kernel && k.kernel->implementation() == "reduce host";
    const auto got = Executor(plan).run(inputs);
    ASSERT_EQ(got[0].shape, want[0].shape);
    for (size_t i = 0; i < got[0].data.size(); ++i) {
      const float x = got[0].data[i], y = want[0].data[i];
      EXPECT_TRUE(std::abs(x - y) <= 1e-5f * std::max(1.0f, std::abs(y)))
          << c.x.to_string() << " " << graph::to_string(c.kind) << " element " << i << ": " << x << " vs " << y;
    }
  }
  std::printf("reductions of row-major tensors: %d of 6 on our host loop on this CPU\n", host);
}

// Local response normalisation (AlexNet's, GoogLeNet's) on oneDNN's across-channel LRN, windows of
// 1, 3 and 5 channels over 5 and 20 channels, in every layout, against ONNX's formula.
TEST(Lrn, MatchesOnnxsDefinitionInEveryLayout) {
  for (int64_t channels : {5, 20}) {
    networks::NetBuilder b("lrn", 2, channels, 3, 4);
    std::vector<ValueId> outputs;
    for (int64_t size : {1, 3, 5}) {
      graph::LrnAttrs a;
      a.size = size;
      a.alpha = 0.5;
      a.beta = 0.75;
      a.bias = 2.0;
      outputs.push_back(b.op(cat("lrn", size), OpKind::kLrn, a, {b.input()}));
    }
    const stagecraft::testing::Model m = stagecraft::testing::model_of(std::move(b).finish(outputs), 2);
    const auto inputs = stagecraft::testing::inputs_of(m.graph);
    const auto want = testing::reference_run(m.graph, m.weights, inputs);
    ASSERT_EQ(want.size(), 3u);
    expect_every_layout_matches(m, inputs, want, cat(channels, " channels"));
  }
}

// Transposed convolutions (segmentation heads' upsampling) on oneDNN's deconvolution in every
// layout against their definition: strides, paddings, output padding, dilation, groups, bias.
TEST(ConvTranspose, MatchesItsDefinitionInEveryLayout) {
  networks::NetBuilder b("deconv", 2, 16, 5, 6);
  std::vector<ValueId> outputs;
  const auto deconv = [&](const std::string& name, int64_t out, graph::Hw kernel, graph::Hw stride, graph::Pads pads,
                          graph::Hw output_padding, graph::Hw dilation, int64_t groups, bool bias) {
    graph::ConvTranspose2dAttrs a;
    a.in_channels = 16;
    a.out_channels = out;
    a.kernel = kernel;
    a.stride = stride;
    a.padding = pads;
    a.output_padding = output_padding;
    a.dilation = dilation;
    a.groups = groups;
    a.bias = bias;
    outputs.push_back(b.op(name, OpKind::kConvTranspose2d, a, {b.input()}));
  };
  deconv("up2", 16, {2, 2}, {2, 2}, {}, {0, 0}, {1, 1}, 1, true);                 // YOLO-seg's
  deconv("k3s2", 8, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, true);
  deconv("grouped", 32, {3, 3}, {1, 2}, {0, 1, 2, 0}, {0, 1}, {1, 1}, 4, false);
  deconv("dilated", 5, {2, 3}, {1, 1}, {}, {0, 0}, {2, 2}, 1, true);
  const stagecraft::testing::Model m = stagecraft::testing::model_of(std::move(b).finish(outputs), 4);
  const auto inputs = stagecraft::testing::inputs_of(m.graph);
  const auto want = testing::reference_run(m.graph, m.weights, inputs);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(want[0].shape, (graph::Shape{2, 16, 10, 12}));
  EXPECT_EQ(want[1].shape, (graph::Shape{2, 8, 10, 12}));
  expect_every_layout_matches(m, inputs, want, "transposed convolutions");
}

TEST(UnaryOps, Int8AndMixedLayoutsAreAnswersNotErrors) {
  KernelSpec spec;
  spec.kind = OpKind::kUnary;
  spec.attrs = attrs_of(UnaryFn::kExp);
  graph::TensorDesc d{graph::Shape{1, 5, 2, 2}, graph::DataType::kF32, Layout::kNChw8c};
  spec.srcs = {d};
  spec.dsts = {d};
  spec.name = "exp";
  EXPECT_TRUE(stagecraft::testing::cpu_backend().supports(spec).is_native());
  spec.srcs[0].layout = Layout::kNCHW;
  const KernelDesc mixed = stagecraft::testing::cpu_backend().supports(spec);
  EXPECT_FALSE(mixed.runnable());
  EXPECT_EQ(mixed.support.reason, SupportReason::kLayout);
}

}  // namespace
}  // namespace stagecraft::executor
