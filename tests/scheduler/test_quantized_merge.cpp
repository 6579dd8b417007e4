// Merging quantised convolutions: only convolutions writing the same element type merge.
#include <gtest/gtest.h>

#include "graph/passes.h"
#include "graph/quantize.h"
#include "networks/builder.h"
#include "scheduler/schedule.h"

namespace stagecraft::scheduler {
namespace {

using namespace graph;
using networks::NetBuilder;

// Ranges: outputs of ReLU convolutions [0, 6], everything else [-4, 4], with overrides.
Calibration ranges_of(const Graph& g, const std::map<std::string, ValueRange>& overrides = {}) {
  Calibration c;
  c.samples = 1;
  for (size_t v = 0; v < g.num_values(); ++v) {
    const Value& value = g.value(static_cast<ValueId>(v));
    const bool relu = value.producer != kNoOp && g.op(value.producer).kind == OpKind::kConv2d &&
                      g.op(value.producer).attrs_as<Conv2dAttrs>().activation == Activation::kRelu;
    c.values[value.name] = relu ? ValueRange{0, 6, 6} : ValueRange{-4, 4, 4};
  }
  for (const auto& [name, r] : overrides) c.values[name] = r;
  return c;
}

const TensorDesc& desc_of(const Graph& g, const std::string& value) {
  return g.value(*g.find_value(value)).desc;
}

TEST(Quantize, MergedConvolutionsNeedTheSameOutputType) {
  NetBuilder b("merge", 1, 4, 6, 6);
  const ValueId r = b.relu(b.conv(b.input(), networks::square_conv(4, 1, 1, 0, true), "r"), "rr");
  const ValueId t = b.relu(b.conv(b.input(), networks::square_conv(4, 3, 1, 1, true), "t"), "tr");
  const ValueId u = b.conv(b.input(), networks::square_conv(4, 1, 1, 0, true), "u");
  const ValueId v = b.conv(b.input(), networks::square_conv(4, 3, 1, 1, true), "v");
  const Graph g = prepare_for_inference(std::move(b).finish({b.concat({r, t}, "cat"), b.add({u, v}, "sum")}), nullptr, {.fuse_residual_adds = false});
  // u's range is non-negative (u8), v's is not (i8): same input, same activation, other types.
  const Graph q = quantize(g, ranges_of(g, {{"u", {0, 3, 3}}, {"cat", {0, 6, 6}}}));
  EXPECT_EQ(desc_of(q, "r").dtype, DataType::kU8);
  EXPECT_EQ(desc_of(q, "t").dtype, DataType::kU8);
  EXPECT_EQ(desc_of(q, "u").dtype, DataType::kU8);
  EXPECT_EQ(desc_of(q, "v").dtype, DataType::kI8);
  EXPECT_TRUE(can_merge(q, {*q.find_op("r"), *q.find_op("t")}));
  EXPECT_FALSE(can_merge(q, {*q.find_op("u"), *q.find_op("v")}));
  EXPECT_NE(merge_conflict(q, *q.find_op("u"), *q.find_op("v")).find("element types"),
            std::string::npos);
  // The same f32 graph merges them.
  EXPECT_TRUE(can_merge(g, {*g.find_op("u"), *g.find_op("v")}));
}

}  // namespace
}  // namespace stagecraft::scheduler
