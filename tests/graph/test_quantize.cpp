// The quantiser's decisions (types, scales, scale classes, conversions) on hand-made graphs with
// hand-made ranges, calibration files, and clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "graph/errors.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "networks/builder.h"

namespace stagecraft::graph {
namespace {

using networks::NetBuilder;

// Ranges for every value: ReLU outputs [0, 6], everything else [-4, 4], with overrides.
Calibration ranges_of(const Graph& g, const std::map<std::string, ValueRange>& overrides = {}) {
  Calibration c;
  c.network = g.name();
  c.method = "minmax";
  c.samples = 1;
  for (size_t v = 0; v < g.num_values(); ++v) {
    const Value& value = g.value(static_cast<ValueId>(v));
    bool relu = false;
    if (value.producer != kNoOp) {
      const Op& op = g.op(value.producer);
      relu = op.kind == OpKind::kConv2d && op.attrs_as<Conv2dAttrs>().activation == Activation::kRelu;
      relu = relu || op.kind == OpKind::kMaxPool || op.kind == OpKind::kConcat;
    }
    c.values[value.name] = relu ? ValueRange{0, 6, 6} : ValueRange{-4, 4, 4};
  }
  for (const auto& [name, r] : overrides) c.values[name] = r;
  return c;
}

const TensorDesc& desc_of(const Graph& g, const std::string& value) {
  return g.value(*g.find_value(value)).desc;
}

// An Inception-like block: two conv branches and a pooling branch concatenated, then a classifier.
Graph block() {
  NetBuilder b("block", 1, 8, 10, 10);
  const ValueId x = b.relu(b.conv(b.input(), networks::square_conv(16, 3, 1, 1, true), "stem"), "stem_relu");
  const ValueId a = b.relu(b.conv(x, networks::square_conv(8, 1, 1, 0, true), "a"), "a_relu");
  const ValueId c = b.relu(b.conv(x, networks::square_conv(8, 3, 1, 1, true), "c"), "c_relu");
  const ValueId p = b.max_pool(x, 3, 1, 1, false, "pool");
  const ValueId joined = b.concat({a, c, p}, "joined");
  const ValueId logits = b.linear(b.flatten(b.global_avg_pool(joined, "gap"), "flat"), 5, true, "fc");
  return prepare_for_inference(std::move(b).finish({b.softmax(logits, "prob")}), nullptr, {.fuse_residual_adds = false});
}

TEST(Quantize, TypesScalesAndScaleClasses) {
  const Graph g = block();
  // The concat's own range is the widest of its class: conv 'a' writes in the concat's scale.
  const Calibration cal = ranges_of(g, {{"joined", {0, 10, 10}}, {"a", {0, 2, 2}}});
  QuantizeReport report;
  const Graph q = quantize(g, cal, &report);
  EXPECT_TRUE(is_quantised(q));
  EXPECT_FALSE(is_quantised(g));
  // ReLU convolutions write u8 with scale absmax / 255; 'a' and 'c' share the concat's class.
  EXPECT_EQ(desc_of(q, "stem").dtype, DataType::kU8);
  EXPECT_FLOAT_EQ(desc_of(q, "stem").scale, 6.0f / 255);
  EXPECT_EQ(desc_of(q, "a").dtype, DataType::kU8);
  EXPECT_FLOAT_EQ(desc_of(q, "a").scale, 10.0f / 255);
  EXPECT_FLOAT_EQ(desc_of(q, "c").scale, 10.0f / 255);
  EXPECT_FLOAT_EQ(desc_of(q, "joined").scale, 10.0f / 255);
  // Max pooling keeps the stem's scale, so its part of the concat is requantised by a conversion.
  EXPECT_FLOAT_EQ(desc_of(q, "pool").scale, 6.0f / 255);
  const Op& concat = q.op(*q.find_op("joined"));
  const TensorDesc& pool_part = q.value(concat.inputs[2]).desc;
  EXPECT_EQ(q.op(q.value(concat.inputs[2]).producer).kind, OpKind::kIdentity);
  EXPECT_FLOAT_EQ(pool_part.scale, 10.0f / 255);
  // The classifier writes i8 (its range is signed); the softmax reads it dequantised.
  EXPECT_EQ(desc_of(q, "fc").dtype, DataType::kI8);
  const Op& prob = q.op(*q.find_op("prob"));
  EXPECT_EQ(q.value(prob.inputs[0]).desc.dtype, DataType::kF32);
  EXPECT_EQ(desc_of(q, "prob").dtype, DataType::kF32);
  EXPECT_EQ(q.value(q.outputs()[0]).desc.dtype, DataType::kF32);
  // The f32 input is quantised once (i8: it has negative values).
  const Op& stem = q.op(*q.find_op("stem"));
  EXPECT_EQ(q.value(stem.inputs[0]).desc.dtype, DataType::kI8);
  EXPECT_FLOAT_EQ(q.value(stem.inputs[0]).desc.scale, 4.0f / 127);
  EXPECT_EQ(report.int8_ops + report.f32_ops, g.num_ops());
  // The softmax, and the global average with the flatten after it (the averages keep their
  // own range: the classifier quantises them).
  EXPECT_EQ(report.f32_ops, 3u);
  const Op& fc = q.op(*q.find_op("fc"));
  EXPECT_EQ(q.op(q.value(fc.inputs[0]).producer).kind, OpKind::kIdentity);
  // Conversions: the input, the pool part, the map into the global average, the averages into
  // the classifier, and the fc output into the softmax.
  EXPECT_EQ(report.conversions, 5u);
  EXPECT_EQ(q.num_ops(), g.num_ops() + report.conversions);
  // Op names and attributes are kept: the f32 weights apply.
  for (const Op& op : g.ops()) ASSERT_TRUE(q.find_op(op.name)) << op.name;
}

TEST(Quantize, SignedValuesAreI8AndGraphOutputsAreF32) {
  NetBuilder b("signed", 1, 4, 6, 6);
  const ValueId y = b.conv(b.input(), networks::square_conv(4, 3, 1, 1, true), "conv");  // no ReLU
  const Graph g = prepare_for_inference(std::move(b).finish({b.add({y, b.input()}, "sum")}), nullptr, {.fuse_residual_adds = false});
  const Graph q = quantize(g, ranges_of(g));
  EXPECT_EQ(desc_of(q, "conv").dtype, DataType::kI8);
  EXPECT_FLOAT_EQ(desc_of(q, "conv").scale, 4.0f / 127);
  // The add is the graph output: it computes in int8 and writes f32.
  EXPECT_EQ(desc_of(q, "sum").dtype, DataType::kF32);
  EXPECT_EQ(q.outputs().size(), 1u);
}

// A residual block quantised, then its 8-bit addition fused into the convolution that produces
// an operand (fuse_residual_adds with `quantised`): the convolution takes the other operand (any
// 8-bit type, its own scale) as its residual and writes the addition's value, type and scale;
// without `quantised` the 8-bit addition stays.
TEST(Quantize, EightBitAdditionsFuseIntoConvolutionsOnRequest) {
  NetBuilder b("block", 1, 8, 6, 6);
  const ValueId x = b.relu(b.input(), "x");
  const ValueId inner = b.relu(b.conv(x, networks::square_conv(8, 3, 1, 1, true), "conv1"), "relu1");
  const ValueId y = b.conv(inner, networks::square_conv(8, 3, 1, 1, true), "conv");  // no ReLU; the deeper operand
  const ValueId shortcut = b.conv(x, networks::square_conv(8, 1, 1, 0, false), "shortcut");
  const ValueId z = b.relu(b.add({y, shortcut}, "sum"), "out");
  const Graph g = prepare_for_inference(std::move(b).finish({b.conv(z, networks::square_conv(4, 1, 1, 0, false), "head")}),
                                        nullptr, {.fuse_residual_adds = false});
  const Graph q = quantize(g, ranges_of(g));
  ASSERT_TRUE(q.find_op("sum"));
  const TensorDesc sum = desc_of(q, "sum");  // the ReLU fused: u8
  ASSERT_TRUE(is_int8(sum.dtype));
  EXPECT_TRUE(fuse_residual_adds(q).find_op("sum")) << "quantised additions stay without `quantised`";
  const Graph f = fuse_residual_adds(q, nullptr, /*quantised=*/true);
  EXPECT_FALSE(f.find_op("sum"));
  const Op& conv = f.op(*f.find_op("conv"));
  ASSERT_TRUE(conv.attrs_as<Conv2dAttrs>().residual);
  EXPECT_EQ(conv.attrs_as<Conv2dAttrs>().activation, Activation::kRelu);
  const TensorDesc& out = f.value(conv.outputs[0]).desc;
  EXPECT_EQ(out.dtype, sum.dtype);
  EXPECT_FLOAT_EQ(out.scale, sum.scale);
  const TensorDesc& residual = f.value(conv.inputs[1]).desc;
  EXPECT_EQ(residual.dtype, DataType::kI8);  // the shortcut has no ReLU: signed
  EXPECT_FLOAT_EQ(residual.scale, desc_of(q, "shortcut").scale);
  EXPECT_TRUE(is_quantised(f));
}

TEST(Quantize, CalibrationOfAnotherGraphIsAClearError) {
  const Graph g = block();
  Calibration cal = ranges_of(g);
  cal.network = "other";
  cal.values.erase("joined");
  try {
    quantize(g, cal);
    FAIL() << "a calibration without 'joined' was accepted";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'joined'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stagecraft calibrate"), std::string::npos) << e.what();
  }
}

TEST(Quantize, SetValueTypeRules) {
  NetBuilder b("t", 1, 4, 6, 6);
  const ValueId y = b.conv(b.input(), networks::square_conv(4, 1), "conv");
  Graph g = std::move(b).finish({b.relu(y, "relu")});
  EXPECT_THROW(g.set_value_type(g.inputs()[0], DataType::kU8, 0.1f), GraphError);  // an input
  EXPECT_THROW(g.set_value_type(*g.find_value("conv"), DataType::kU8, 0.1f), GraphError);  // read
  EXPECT_THROW(g.set_value_type(*g.find_value("relu"), DataType::kU8, 0.0f), GraphError);  // scale
  g.set_value_type(*g.find_value("relu"), DataType::kU8, 0.5f);
  EXPECT_EQ(desc_of(g, "relu").describe(), "1x4x6x6 u8 nchw scale 0.5");
  g.set_value_type(*g.find_value("relu"), DataType::kF32, 0.5f);
  EXPECT_FLOAT_EQ(desc_of(g, "relu").scale, 1.0f);  // floats have no scale
}

class CalibrationFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stagecraft_calib_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(CalibrationFiles, RoundTripAndErrors) {
  const Graph g = block();
  const Calibration cal = ranges_of(g, {{"joined", {0.25, 10.5, 9.75}}});
  const std::string path = (dir_ / "c.yaml").string();
  save_calibration(cal, path);
  const Calibration back = load_calibration(path);
  EXPECT_EQ(back.network, cal.network);
  EXPECT_EQ(back.samples, 1);
  ASSERT_EQ(back.values.size(), cal.values.size());
  EXPECT_DOUBLE_EQ(back.values.at("joined").min, 0.25);
  EXPECT_DOUBLE_EQ(back.values.at("joined").absmax, 9.75);

  const auto message = [&](const std::string& text) {
    try {
      load_calibration(write("bad.yaml", text));
    } catch (const GraphError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("{").find("not valid YAML"), std::string::npos);
  EXPECT_NE(message("x: 1").find("'calibration'"), std::string::npos);
  EXPECT_NE(message("calibration: {samples: 2}").find("'values'"), std::string::npos);
  EXPECT_NE(message("calibration: {samples: 2, values: {a: {min: 3, max: 1, absmax: 3}}}").find("min is larger"),
            std::string::npos);
  EXPECT_NE(message("calibration: {samples: 2, values: {a: {min: 0, max: x, absmax: 3}}}").find("'max' must be a number"),
            std::string::npos);
  EXPECT_NE(message("calibration: {samples: 2, values: {a: {min: 0, max: 1}}}").find(":1:"),
            std::string::npos);
  try {
    load_calibration((dir_ / "missing.yaml").string());
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("stagecraft calibrate"), std::string::npos);
  }
}

}  // namespace
}  // namespace stagecraft::graph
