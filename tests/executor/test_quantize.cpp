// int8 on the CPU executor: quantised kernels against f32 on random data, every schedule of a
// quantised network against its sequential int8 run (each 8-bit value within one quantisation
// step), calibration, and clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/executor.h"
#include "graph/errors.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "graph/weights.h"
#include "networks/builder.h"
#include "quant/calibration.h"
#include "support/models.h"
#include "support/compare.h"
#include "quantised_models.h"

namespace stagecraft::executor {
namespace {

using scheduler::Schedule;
using scheduler::Strategy;
using stagecraft::testing::inputs_of;
using stagecraft::testing::Model;
using stagecraft::testing::model_of;

// Graphs to be quantised keep their additions (int8 convolutions take no residual).
using stagecraft::testing::network;

constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

using scheduler::sequential_schedule;

// The CPU refuses `spec` for its quantisation, with a message that contains `why`.
void expect_refused_for_quantisation(const KernelSpec& spec, const std::string& why) {
  const Support support = cpu().supports(spec).support;
  EXPECT_EQ(support.reason, SupportReason::kQuantisation);
  EXPECT_NE(support.message.find(why), std::string::npos) << support.message;
}

// ---- Kernels: int8 against f32 on random data -------------------------------------------------

// One conv (optionally with a fused activation) whose output channels differ in weight magnitude
// by 1000x: per-tensor weight scales would zero the small channels, per-channel ones must not.
Model one_conv(graph::Activation act, bool bias) {
  networks::NetBuilder b("one_conv", 2, 8, 9, 9);
  graph::ValueId y = b.conv(b.input(), networks::square_conv(6, 3, 1, 1, bias), "conv");
  if (act == graph::Activation::kRelu) y = b.relu(y);
  if (act == graph::Activation::kRelu6) y = b.relu6(y);
  if (act == graph::Activation::kSigmoid) y = b.sigmoid(y);
  Model m = model_of(std::move(b).finish({y}), 1, kUnfused);
  auto& w = m.weights["conv"].weight;
  const size_t per = w.size() / 6;
  for (size_t i = 0; i < per; ++i) w[i] *= 1000.0f;  // channel 0 is huge
  return m;
}

TEST(QuantisedKernels, ConvolutionMatchesF32PerChannel) {
  for (graph::Activation act : {graph::Activation::kNone, graph::Activation::kRelu,
                                graph::Activation::kRelu6, graph::Activation::kSigmoid}) {
    for (bool bias : {false, true}) {
      const Model m = one_conv(act, bias);
      const auto inputs = inputs_of(m.graph);
      const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
      const Model qm = quantised(m);
      const graph::Graph& q = qm.graph;
      const auto got = run(q, qm.weights, sequential_schedule(q), inputs);
      const std::string what = cat(graph::to_string(act), bias ? " with bias" : "");
      // Channel by channel: every channel keeps ~1% accuracy, small ones included.
      const graph::Shape& s = want[0].shape;
      const size_t plane = static_cast<size_t>(s[2] * s[3]);
      for (int64_t n = 0; n < s[0]; ++n) {
        for (int64_t ch = 0; ch < s[1]; ++ch) {
          double err = 0, mag = 0;
          for (size_t i = 0; i < plane; ++i) {
            const size_t k = static_cast<size_t>(n * s[1] + ch) * plane + i;
            err = stagecraft::testing::worst_of(err, std::fabs(static_cast<double>(got[0].data[k] - want[0].data[k])));
            mag = std::max(mag, std::fabs(static_cast<double>(want[0].data[k])));
          }
          EXPECT_LT(err, 0.03 * std::max(mag, 1e-3)) << what << ", channel " << ch;
        }
      }
    }
  }
}

// Quantised additions (our own kernel: oneDNN 2.6 has only its reference sum for them) give the
// saturated, half-to-even rounded sum of the rescaled inputs exactly, with ReLU and ReLU6 in the
// destination's units; 210 elements per tensor leave a tail after the 16-element blocks.
TEST(QuantisedKernels, AdditionsRoundAndSaturateExactly) {
  struct Case {
    graph::DataType out;
    graph::Activation act;
  };
  for (const Case c : {Case{graph::DataType::kU8, graph::Activation::kRelu},
                       Case{graph::DataType::kI8, graph::Activation::kNone},
                       Case{graph::DataType::kI8, graph::Activation::kRelu6},
                       Case{graph::DataType::kU8, graph::Activation::kNone}}) {
    graph::TensorDesc a = graph::make_desc(graph::Shape{2, 5, 3, 7}, graph::DataType::kU8);
    a.layout = graph::Layout::kNHWC;
    a.scale = 0.05f;
    graph::TensorDesc b = a;
    b.dtype = graph::DataType::kI8;
    b.scale = 0.03f;
    graph::TensorDesc out = a;
    out.dtype = c.out;
    out.scale = 0.021f;
    KernelSpec spec;
    spec.kind = graph::OpKind::kAdd;
    graph::AddAttrs attrs;
    attrs.activation = c.act;
    spec.attrs = attrs;
    spec.srcs = {a, b};
    spec.dsts = {out};
    spec.threads = 2;
    spec.name = "add";
    const size_t n = static_cast<size_t>(a.shape.numel());
    std::vector<uint8_t> x(n);
    std::vector<int8_t> y(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<uint8_t>((i * 37) % 256);
      y[i] = static_cast<int8_t>(static_cast<int>((i * 53) % 256) - 128);
    }
    auto xb = cpu().allocate(n), yb = cpu().allocate(n), ob = cpu().allocate(n);
    std::memcpy(xb->data(), x.data(), n);
    std::memcpy(yb->data(), y.data(), n);
    auto kernel = cpu().create_kernel(spec);
    EXPECT_EQ(kernel->implementation(), "int8 add");
    auto ws = cpu().allocate(std::max<size_t>(1, kernel->workspace_bytes()));
    kernel->bind({{xb->data(), a}, {yb->data(), b}}, {{ob->data(), out}}, ws->data());
    auto stream = cpu().create_stream();
    kernel->launch(*stream);
    stream->synchronize();
    const bool u8 = c.out == graph::DataType::kU8;
    const double lo = c.act == graph::Activation::kNone ? (u8 ? 0 : -128) : 0;
    const double hi = c.act == graph::Activation::kRelu6 ? 6.0 / out.scale : (u8 ? 255 : 127);
    for (size_t i = 0; i < n; ++i) {
      const float sum = static_cast<float>(x[i]) * (a.scale / out.scale) + static_cast<float>(y[i]) * (b.scale / out.scale);
      const double want = std::clamp(std::nearbyint(std::clamp(static_cast<double>(sum), lo, hi)), u8 ? 0.0 : -128.0,
                                     u8 ? 255.0 : 127.0);
      const auto* got = static_cast<const uint8_t*>(ob->data()) + i;
      const double value = u8 ? *got : static_cast<int8_t>(*got);
      ASSERT_EQ(value, want) << "element " << i << " (" << graph::to_string(c.out) << ", activation "
                             << graph::to_string(c.act) << "): sum " << sum;
    }
  }
}

TEST(QuantisedKernels, EveryInt8OpKindAgreesWithF32) {
  // Pools, concat (with a requantised part), split, slice, add, relu, pad, flatten, linear,
  // softmax (in f32 after a dequantisation).
  networks::NetBuilder b("int8_ops", 1, 8, 12, 12);
  const auto c1 = b.relu(b.conv(b.input(), networks::square_conv(16, 3, 1, 1, true), "c1"));
  const auto pool = b.max_pool(c1, 3, 1, 1);
  const auto c2 = b.conv(c1, networks::square_conv(16, 1, 1, 0, true), "c2");
  const auto joined = b.concat({c2, pool});
  const auto parts = b.split(joined, {16, 16});
  const auto sum = b.relu(b.add({parts[0], b.slice(joined, 16, 32)}));
  const auto padded = b.pad(sum, graph::Pads::same(1));
  const auto avg = b.avg_pool(padded, 2, 2);
  const auto logits = b.linear(b.flatten(b.global_avg_pool(avg)), 10);
  const auto prob = b.softmax(logits);
  const Model m = model_of(std::move(b).finish({prob}), 1, kUnfused);
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
  const Model qm = quantised(m);
  const graph::Graph& q = qm.graph;
  EXPECT_TRUE(graph::is_quantised(q));
  const auto got = run(q, qm.weights, sequential_schedule(q), inputs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(q.value(q.outputs()[0]).desc.dtype, graph::DataType::kF32);
  EXPECT_LT(relative_error(got[0], want[0]), 0.05);
  EXPECT_GT(cosine(got[0], want[0]), 0.99);
}

// The batch norms as depthwise convolutions compute what the batch norms do, in f32.
TEST(QuantisedNetwork, BatchNormsAsConvolutionsEqualTheBatchNorms) {
  const Model m = dense_block();
  graph::PassLog log;
  const graph::Graph g = graph::batch_norms_as_convolutions(m.graph, &log);
  ASSERT_EQ(log.batch_norm_convolutions.size(), 4u);
  EXPECT_EQ(graph::count_ops(g, graph::OpKind::kBatchNorm), 0u);
  const graph::WeightStore w = graph::fold_weights(m.graph, m.weights, log);
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
  const auto got = run(g, w, sequential_schedule(g), inputs);
  EXPECT_LT(relative_error(got[0], want[0]), 1e-5);
}

// Quantised, the block's batch norms read and write 8 bits (no conversion around them) and the
// block agrees with f32.
TEST(QuantisedNetwork, PreActivationBatchNormsRunInInt8) {
  const Model m = dense_block();
  const Model qm = quantised(m);
  const graph::Graph& q = qm.graph;
  EXPECT_EQ(graph::count_ops(q, graph::OpKind::kBatchNorm), 0u);
  for (const char* bn : {"bn0", "bn1", "bn2", "bn_last"}) {
    const graph::Op& op = q.op(*q.find_op(bn));
    EXPECT_EQ(op.kind, graph::OpKind::kConv2d) << bn;
    const graph::Value& in = q.value(op.inputs[0]);
    EXPECT_TRUE(graph::is_int8(in.desc.dtype)) << bn << " reads " << in.desc.describe();
    EXPECT_NE(q.op(in.producer).kind, graph::OpKind::kIdentity) << bn << " reads a conversion";
    EXPECT_TRUE(graph::is_int8(q.value(op.outputs[0]).desc.dtype)) << bn;
  }
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
  const auto got = run(q, qm.weights, sequential_schedule(q), inputs);
  EXPECT_LT(relative_error(got[0], want[0]), 0.05);
  EXPECT_GT(cosine(got[0], want[0]), 0.995);
}

// Features with one bright spot per channel: a global average far below the map's largest
// value. Averaged in 8 bits at the map's scale, the features would keep a few steps of it (the
// classifier's logits off by ~4% here); averaged in f32 and quantised with their own range, they
// agree within 2%.
TEST(QuantisedNetwork, GlobalAveragesKeepTheirOwnRange) {
  networks::NetBuilder b("spots", 1, 8, 16, 16);
  const graph::ValueId features = b.relu(b.conv(b.input(), networks::square_conv(8, 1, 1, 0, true), "mix"));
  const graph::ValueId pooled = b.flatten(b.global_avg_pool(features, "pool"));
  Model m = model_of(std::move(b).finish({b.linear(pooled, 10, true, "fc")}), 1, kUnfused);
  graph::OpWeights& mix = m.weights["mix"];  // the identity on channels, no bias
  std::fill(mix.weight.begin(), mix.weight.end(), 0.0f);
  for (size_t c = 0; c < 8; ++c) mix.weight[c * 8 + c] = 1.0f;
  std::fill(mix.bias.begin(), mix.bias.end(), 0.0f);
  auto spots = [](uint64_t seed) {
    std::vector<HostTensor> x;
    HostTensor t{graph::Shape{1, 8, 16, 16}, std::vector<float>(8 * 256)};
    for (size_t c = 0; c < 8; ++c) {
      for (size_t i = 0; i < 256; ++i) t.data[c * 256 + i] = 0.5f + 0.4f * std::sin(0.37f * static_cast<float>(i * (c + 1) + seed));
      t.data[c * 256 + (seed * 31 + c * 7) % 256] = 60.0f;  // the bright spot
    }
    x.push_back(std::move(t));
    return x;
  };
  quant::CalibrationOptions options;
  for (uint64_t k = 0; k < 4; ++k) options.inputs.push_back(spots(k));
  graph::QuantizeReport report;
  const graph::Graph q = graph::quantize(m.graph, quant::calibrate(m.graph, m.weights, cpu(), options), &report);
  const graph::Op& pool = q.op(*q.find_op("pool"));
  EXPECT_EQ(q.value(pool.inputs[0]).desc.dtype, graph::DataType::kF32) << "the average runs in 8 bits";
  const auto inputs = spots(9);
  const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
  const auto got = run(q, m.weights, sequential_schedule(q), inputs);
  EXPECT_LT(relative_error(got[0], want[0]), 0.02);
}

// ---- Every schedule of a quantised network equals its sequential int8 run -------------------

// The quantised graph with every value an output, so that each 8-bit tensor can be compared.
graph::Graph all_values_out(const graph::Graph& g) {
  graph::Graph all = g;
  for (size_t v = 0; v < g.num_values(); ++v) all.add_output(static_cast<graph::ValueId>(v));
  return all;
}

struct QuantisedCase {
  const char* name;
  int64_t batch;
};

class QuantisedNetwork : public ::testing::TestWithParam<QuantisedCase> {};

// Every greedy and dp schedule of the quantised model `qm` against its sequential run: each value
// within one quantisation step. Returns the merge stages checked.
size_t expect_every_schedule_within_one_step(const Model& qm, const std::string& name) {
  const graph::Graph& q = qm.graph;
  const graph::Graph all = all_values_out(q);
  const auto inputs = inputs_of(q);
  const auto want = run(all, qm.weights, sequential_schedule(all), inputs);
  size_t merges = 0;
  for (Strategy strategy : {Strategy::kGreedy, Strategy::kDp}) {
    for (scheduler::DpMode mode : {scheduler::DpMode::kMerge, scheduler::DpMode::kConcurrent,
                                   scheduler::DpMode::kBoth}) {
      if (strategy == Strategy::kGreedy && mode != scheduler::DpMode::kBoth) continue;
      Schedule s = stagecraft::testing::analytic_schedule(q, strategy, mode);
      s.meta.graph_hash.clear();  // run on `all`, the same ops with more outputs
      for (const auto& stage : s.stages) merges += stage.kind == scheduler::StageKind::kMerge;
      const auto got = run(all, qm.weights, s, inputs);
      EXPECT_EQ(got.size(), want.size());
      for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        const graph::TensorDesc& d = all.value(all.outputs()[i]).desc;
        const double worst = stagecraft::testing::max_abs_error(got[i].data, want[i].data);
        const double step = graph::is_int8(d.dtype) ? d.scale : 0.0;
        EXPECT_LE(worst, step * 1.001 + 1e-4 * std::max(1.0, static_cast<double>(
                                                                   std::fabs(want[i].data[0]))))
            << name << " " << scheduler::to_string(strategy) << "/" << scheduler::to_string(mode)
            << ": value " << all.value(all.outputs()[i]).name << " (" << d.describe() << ")";
      }
    }
  }
  return merges;
}

TEST_P(QuantisedNetwork, EveryScheduleWithinOneStepOfSequential) {
  const std::string name = GetParam().name;
  // Batch 2 makes merged convolutions hand their parts on by copies (slices), not views.
  const Model m = network(name, name.rfind("inception", 0) == 0 ? 139 : 64, GetParam().batch, kUnfused);
  const size_t merges = expect_every_schedule_within_one_step(quantised(m, 2), name);
  if (name == "inception_v3") {
    EXPECT_GT(merges, 0u) << "no merged int8 convolution was checked";
  }
}

// The same for a dense block, whose concatenations keep their parts' scales.
TEST(QuantisedNetwork, DenseBlockEveryScheduleWithinOneStepOfSequential) {
  const Model qm = quantised(dense_block(), 2);
  ASSERT_TRUE(qm.graph.op(*qm.graph.find_op("cat2")).attrs_as<graph::ConcatAttrs>().part_scales);
  expect_every_schedule_within_one_step(qm, "dense");
}

INSTANTIATE_TEST_SUITE_P(Networks, QuantisedNetwork,
                         ::testing::Values(QuantisedCase{"inception_v3", 1},
                                           QuantisedCase{"squeezenet1_1", 1},
                                           QuantisedCase{"resnet50", 1},
                                           QuantisedCase{"googlenet", 1},
                                           QuantisedCase{"randwire_small", 1},
                                           QuantisedCase{"inception_v3", 2}),
                         [](const ::testing::TestParamInfo<QuantisedCase>& c) {
                           return cat(c.param.name, "_batch", c.param.batch);
                         });

TEST(QuantisedNetwork, InceptionLogitsAgreeWithF32) {
  const Model m = network("inception_v3", 139, 1, kUnfused);
  const Model qm = quantised(m, 4);
  const graph::Graph& q = qm.graph;
  std::vector<HostTensor> got, want;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const auto inputs = inputs_of(m.graph, seed * 101);
    want.push_back(run(m.graph, m.weights, sequential_schedule(m.graph), inputs)[0]);
    got.push_back(run(q, qm.weights, sequential_schedule(q), inputs)[0]);
  }
  const quant::Agreement a = quant::compare_logits(got, want);
  EXPECT_GT(a.raw.min_cosine, 0.99);
  // The input-dependent part is a small share of random-weight logits; 8-bit steps blur it
  // (0.89 here, 0.77 at full size with 16 samples: see bench/results/cpu_int8/README.md).
  EXPECT_GT(a.centred.mean_cosine, 0.7);
  EXPECT_EQ(a.samples, 4);
}

TEST(CompareLogits, CentredMetricsSeePastASharedWinner) {
  // Every sample's logits are a shared profile (class 0 always wins) plus a small signal of its
  // own; `noisy` keeps the profile but scrambles the signal.
  std::vector<HostTensor> want, same, noisy;
  for (int i = 0; i < 6; ++i) {
    HostTensor t{graph::Shape{1, 6}, std::vector<float>(6, 0.0f)};
    t.data[0] = 100.0f;
    t.data[1 + i % 5] += 1.0f;
    want.push_back(t);
    same.push_back(t);
    HostTensor n = t;
    n.data[1 + i % 5] -= 1.0f;
    n.data[1 + (i + 2) % 5] += 1.0f;
    noisy.push_back(n);
  }
  const quant::Agreement exact = quant::compare_logits(same, want);
  EXPECT_DOUBLE_EQ(exact.centred.top1, 1.0);
  EXPECT_NEAR(exact.centred.min_cosine, 1.0, 1e-12);
  EXPECT_EQ(exact.centred.distinct_top1, 5);
  const quant::Agreement off = quant::compare_logits(noisy, want);
  EXPECT_DOUBLE_EQ(off.raw.top1, 1.0);  // the raw view sees nothing wrong
  EXPECT_EQ(off.raw.distinct_top1, 1);
  EXPECT_GT(off.raw.min_cosine, 0.99);
  EXPECT_LT(off.centred.top1, 0.5);  // the centred view does
  EXPECT_LT(off.centred.mean_cosine, 0.5);
  EXPECT_THROW(quant::compare_logits({want[0]}, want), Error);
}

// ---- Calibration and errors ------------------------------------------------------------------

TEST(Calibration, RangesCoverEveryValueAndMinmaxBoundsPercentile) {
  const Model m = network("squeezenet1_1", 64, 1, kUnfused);
  quant::CalibrationOptions options;
  options.samples = 3;
  const graph::Calibration minmax = quant::calibrate(m.graph, m.weights, cpu(), options);
  options.method = "percentile";
  options.percentile = 99.0;
  const graph::Calibration pct = quant::calibrate(m.graph, m.weights, cpu(), options);
  ASSERT_EQ(minmax.values.size(), m.graph.num_values());
  size_t clipped = 0;
  for (const auto& [name, r] : minmax.values) {
    EXPECT_LE(r.min, r.max) << name;
    EXPECT_DOUBLE_EQ(r.absmax, std::max(std::fabs(r.min), std::fabs(r.max))) << name;
    EXPECT_LE(pct.values.at(name).absmax, r.absmax) << name;
    clipped += pct.values.at(name).absmax < r.absmax;
  }
  EXPECT_GT(clipped, minmax.values.size() / 2);
  // ReLU outputs are non-negative: the quantiser makes them u8.
  const graph::Graph q = graph::quantize(m.graph, minmax);
  size_t u8 = 0;
  for (size_t v = 0; v < q.num_values(); ++v) u8 += q.value(static_cast<graph::ValueId>(v)).desc.dtype == graph::DataType::kU8;
  EXPECT_GT(u8, q.num_values() / 2);
}

TEST(Calibration, BadRequestsAreClearErrors) {
  const Model m = network("squeezenet1_1", 64, 1, kUnfused);
  quant::CalibrationOptions options;
  options.samples = 0;
  try {
    quant::calibrate(m.graph, m.weights, cpu(), options);
    FAIL() << "zero samples accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least one sample"), std::string::npos) << e.what();
  }
  options.samples = 1;
  options.method = "entropy";
  EXPECT_THROW(quant::calibrate(m.graph, m.weights, cpu(), options), Error);
  options.method = "percentile";
  options.percentile = 10;
  EXPECT_THROW(quant::calibrate(m.graph, m.weights, cpu(), options), Error);
}

TEST(QuantisedKernels, UnsupportedRequestsNameTheReason) {
  const Model m = one_conv(graph::Activation::kRelu, true);
  const graph::Graph q = quantised(m).graph;  // no batch norm: m's weights are q's
  // Blocked activations have only oneDNN's reference int8 convolution: refused when reference
  // kernels are refused (naming the way out), else run in nhwc with conversions and reported.
  PlanOptions blocked;
  blocked.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNChw16c);
  blocked.reference_kernels = PlanOptions::ReferenceKernels::kRefuse;
  try {
    run(q, m.weights, sequential_schedule(q), inputs_of(q), blocked);
    FAIL() << "an int8 convolution in nChw16c was accepted";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("nhwc"), std::string::npos) << e.what();
  }
  blocked.reference_kernels = PlanOptions::ReferenceKernels::kAvoid;
  ExecutionPlan plan(q, sequential_schedule(q), m.weights, cpu(), blocked);
  ASSERT_EQ(plan.fallbacks().size(), 1u);
  EXPECT_EQ(plan.fallbacks()[0].wanted, graph::Layout::kNChw16c);
  EXPECT_EQ(plan.fallbacks()[0].used, graph::Layout::kNHWC);
  Executor executor(plan);
  PlanOptions nhwc;
  nhwc.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNHWC);
  const auto want = run(q, m.weights, sequential_schedule(q), inputs_of(q), nhwc);
  const auto got = executor.run(inputs_of(q));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].data, want[i].data);
  // A kernel spec the CPU cannot run in int8.
  KernelSpec spec;
  spec.kind = graph::OpKind::kSoftmax;
  spec.attrs = graph::SoftmaxAttrs{};
  graph::TensorDesc u8 = graph::make_desc(graph::Shape{1, 10}, graph::DataType::kU8);
  u8.scale = 0.1f;
  spec.srcs = {u8};
  spec.dsts = {u8};
  expect_refused_for_quantisation(spec, "f32 only");
  spec.kind = graph::OpKind::kMaxPool;
  graph::MaxPoolAttrs mp;
  spec.attrs = mp;
  graph::TensorDesc a = graph::make_desc(graph::Shape{1, 4, 4, 4}, graph::DataType::kU8);
  a.layout = graph::Layout::kNHWC;
  graph::TensorDesc b = a;
  b.scale = 2.0f;
  spec.srcs = {a};
  spec.dsts = {b};
  expect_refused_for_quantisation(spec, "requantise");
}

}  // namespace
}  // namespace stagecraft::executor
