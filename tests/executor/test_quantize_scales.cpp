// int8 quantiser decisions that keep precision, against f32 on random data: concatenations whose
// parts keep their own scales (DenseNet), values read only through ReLU in u8 (NASNet's cell
// outputs), and value_errors, which finds the op that adds the error.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "quantised_models.h"
#include "support/compare.h"

namespace stagecraft::executor {
namespace {

using scheduler::sequential_schedule;
using stagecraft::testing::inputs_of;
using stagecraft::testing::Model;
using stagecraft::testing::model_of;

constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

// The outputs of `m` quantised with `calibration` and `options`, on `inputs`.
std::vector<HostTensor> run_int8(const Model& m, const graph::Calibration& calibration,
                                 const graph::QuantizeOptions& options, const std::vector<HostTensor>& inputs) {
  graph::QuantizeReport report;
  const graph::Graph q = graph::quantize(m.graph, calibration, &report, options);
  return run(q, graph::quantised_weights(m.graph, m.weights, report), sequential_schedule(q), inputs);
}

// Whether `got` is closer to `want` than `before` is, by both measures, with `margin` to spare
// (the error ratios differ between instruction sets: without VNNI oneDNN's int8 convolutions
// add an error of their own to both).
void expect_closer(const HostTensor& got, const HostTensor& before, const HostTensor& want, double margin) {
  EXPECT_LT(relative_error(got, want), margin * relative_error(before, want));
  EXPECT_LT(1.0 - cosine(got, want), margin * (1.0 - cosine(before, want)));
}

// A dense block whose layers write features 30x dimmer than its stem: with one scale per
// concatenation they would keep a few steps of the stem's. The parts keep their own scales
// (ConcatAttrs::part_scales; a concatenation read by the next one too), no conversion is made
// for them, and the batch norms reading the concatenations take each channel's scale into their
// weights.
TEST(QuantisedNetwork, DenseBlockPartsKeepTheirOwnScales) {
  Model m = dense_block();
  for (const char* layer : {"c0", "c1", "c2"}) {
    for (float& w : m.weights[layer].weight) w /= 30.0f;
  }
  for (const char* bn : {"bn1", "bn2", "bn_last"}) {  // which normalise them back, as trained ones do
    graph::OpWeights& w = m.weights[bn];
    for (size_t c = 16; c < w.mean.size(); ++c) {  // the stem's 16 channels come first
      w.mean[c] /= 30.0f;
      w.var[c] /= 900.0f;
    }
  }
  graph::QuantizeReport report;
  quant::CalibrationOptions options;
  options.samples = 4;
  const graph::Calibration calibration = quant::calibrate(m.graph, m.weights, cpu(), options);
  const graph::Graph q = graph::quantize(m.graph, calibration, &report);
  const graph::WeightStore w = graph::quantised_weights(m.graph, m.weights, report);
  EXPECT_EQ(report.part_scale_concats, 3u);
  EXPECT_EQ(report.input_channel_factors.size(), 3u) << "bn1, bn2 and bn_last read concatenations";
  for (int i = 0; i < 3; ++i) {
    const graph::Op& op = q.op(*q.find_op(cat("cat", i)));
    EXPECT_TRUE(op.attrs_as<graph::ConcatAttrs>().part_scales) << op.name;
    const graph::TensorDesc& stem_part = q.value(op.inputs[0]).desc;  // the stem, or the concatenation so far
    const graph::TensorDesc& layer_part = q.value(op.inputs[1]).desc;
    EXPECT_LT(layer_part.scale * 5, stem_part.scale) << op.name << ": the layer's part has its own, finer scale";
    EXPECT_EQ(q.op(q.value(op.inputs[1]).producer).name, cat("c", i)) << "written in its own scale, no conversion";
    EXPECT_EQ(q.value(op.outputs[0]).desc.scale, std::max(stem_part.scale, layer_part.scale));
  }
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
  const auto got = run(q, w, sequential_schedule(q), inputs);
  const auto shared = run_int8(m, calibration, {.part_scales = false}, inputs);
  // Measured on Zen 4 (VNNI): relative error 0.008, cosine 0.999975; with one scale per
  // concatenation 0.016 and 0.99977; without the weights' factors 0.92.
  expect_closer(got[0], shared[0], want[0], 0.8);
  EXPECT_LT(relative_error(got[0], want[0]), 0.05);
}

// A signed value read only through ReLUs (twice, so neither fuses into its convolution) is held
// in u8 over [0, max]: saturating at 0 is the ReLU, with half the steps of i8 over [-absmax,
// absmax].
TEST(QuantisedNetwork, ValuesReadOnlyThroughReluAreUnsigned) {
  networks::NetBuilder b("relu_read", 1, 8, 12, 12);
  const graph::ValueId x = b.conv(b.input(), networks::square_conv(16, 3, 1, 1, true), "mix");
  const graph::ValueId a = b.conv(b.relu(x, "relu_a"), networks::square_conv(8, 1, 1, 0, true), "a");
  const graph::ValueId c = b.conv(b.relu(x, "relu_c"), networks::square_conv(8, 1, 1, 0, true), "c");
  const Model m = model_of(std::move(b).finish({a, c}), 1, kUnfused);
  quant::CalibrationOptions options;
  options.samples = 4;
  const graph::Calibration cal = quant::calibrate(m.graph, m.weights, cpu(), options);
  const graph::Graph q = graph::quantize(m.graph, cal);
  const graph::Op& mix = q.op(*q.find_op("mix"));
  const graph::TensorDesc& held = q.value(mix.outputs[0]).desc;
  const graph::ValueRange& r = cal.values.at(m.graph.value(m.graph.op(*m.graph.find_op("mix")).outputs[0]).name);
  ASSERT_LT(r.min, 0) << "the convolution's output is signed";
  EXPECT_EQ(held.dtype, graph::DataType::kU8) << held.describe();
  EXPECT_FLOAT_EQ(held.scale, static_cast<float>(r.max / 255.0));
  for (const char* relu : {"relu_a", "relu_c"})
    EXPECT_EQ(q.value(q.op(*q.find_op(relu)).outputs[0]).desc.dtype, graph::DataType::kU8) << relu;
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
  const auto got = run(q, m.weights, sequential_schedule(q), inputs);
  const auto signed_ = run_int8(m, cal, {.unsigned_relu_reads = false}, inputs);
  // Measured on Zen 4 (VNNI): relative error 0.0083, cosine 0.99997; in i8 0.0111 and 0.999934.
  expect_closer(got[0], signed_[0], want[0], 0.95);
}

// A concatenation read only through ReLU (NASNet's cell outputs) is u8 over [0, max] even when
// one of its parts is read otherwise too (pooled here): that part keeps its own signed scale and
// is converted into the concatenation's; the other part is written straight in it.
TEST(QuantisedNetwork, ConcatenationsReadThroughReluAreUnsignedThoughAPartIsNot) {
  networks::NetBuilder b("cell", 1, 8, 12, 12);
  const graph::ValueId left = b.conv(b.input(), networks::square_conv(8, 3, 1, 1, true), "left");
  const graph::ValueId other = b.conv(b.input(), networks::square_conv(8, 1, 1, 0, true), "other");
  const graph::ValueId joined = b.concat({left, other}, "cat");
  const graph::ValueId next = b.conv(b.relu(joined, "act"), networks::square_conv(8, 1, 1, 0, true), "next");
  const graph::ValueId pooled = b.conv(b.avg_pool(left, 3, 1, 1), networks::square_conv(8, 1, 1, 0, true), "pooled");
  Model m = model_of(std::move(b).finish({next, pooled}), 1, kUnfused);
  for (float& bias : m.weights["other"].bias) bias -= 2.0f;  // mostly negative: the ReLU keeps little
  const Model qm = quantised(m);
  const graph::Graph& q = qm.graph;
  const graph::Op& cat = q.op(*q.find_op("cat"));
  EXPECT_EQ(q.value(cat.outputs[0]).desc.dtype, graph::DataType::kU8);
  EXPECT_EQ(q.value(q.op(*q.find_op("left")).outputs[0]).desc.dtype, graph::DataType::kI8) << "pooled too";
  EXPECT_EQ(q.op(q.value(cat.inputs[0]).producer).kind, graph::OpKind::kIdentity) << "left is converted";
  EXPECT_EQ(q.op(q.value(cat.inputs[1]).producer).name, "other") << "written in the concatenation's type";
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, sequential_schedule(m.graph), inputs);
  const auto got = run(q, qm.weights, sequential_schedule(q), inputs);
  quant::CalibrationOptions options;
  options.samples = 4;  // as quantised() calibrates
  const auto signed_ = run_int8(m, quant::calibrate(m.graph, m.weights, cpu(), options),
                                {.unsigned_relu_reads = false}, inputs);
  // Measured on Zen 4 (VNNI): relative error 0.0117, cosine 0.999947, the pooled output 0.0233;
  // with the part in the concatenation's class (both then i8) 0.0155, 0.999899 and 0.0327.
  expect_closer(got[0], signed_[0], want[0], 0.95);
  expect_closer(got[1], signed_[1], want[1], 0.95);
  // value_errors compares the u8 concatenation with the f32 one's positive part.
  for (const quant::ValueError& e : quant::value_errors(m.graph, m.weights, q, qm.weights, cpu(), inputs))
    if (e.value == "cat") EXPECT_LT(e.relative, 0.05);
}

// value_errors finds the op that adds the error: here convolution c1, whose int8 weights are
// made 10% too large. The part-scale concatenations are left out (one scale cannot dequantise
// them), and the graph's input has no error.
TEST(QuantisedNetwork, ValueErrorsPointAtTheOpThatAddsTheError) {
  const Model m = dense_block();
  Model qm = quantised(m);
  for (float& w : qm.weights["c1"].weight) w *= 1.1f;
  const std::vector<quant::ValueError> errors =
      quant::value_errors(m.graph, m.weights, qm.graph, qm.weights, cpu(), inputs_of(m.graph));
  ASSERT_FALSE(errors.empty());
  const auto worst = std::max_element(errors.begin(), errors.end(), [](const auto& a, const auto& b) {
    return a.growth < b.growth;
  });
  EXPECT_EQ(worst->value, "c1");
  EXPECT_EQ(worst->kind, "conv2d");
  EXPECT_GT(worst->growth, 0.05);
  for (const quant::ValueError& e : errors) {
    EXPECT_NE(e.value.rfind("cat", 0), 0u) << e.value << " holds a scale per channel";
    if (e.kind == "input") EXPECT_EQ(e.relative, 0.0) << e.value;
    if (e.value == "c0") EXPECT_LT(e.relative, 0.03) << "before c1, int8 is close to f32";
  }
}

}  // namespace
}  // namespace stagecraft::executor
