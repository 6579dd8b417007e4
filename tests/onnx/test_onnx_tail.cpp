// The data-dependent tail (frontend/onnx/onnx_tail.h): the host folds of NonZero,
// NonMaxSuppression and Pad on ONNX's own examples, and a model whose output is NonZero's.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <span>
#include <string>

#include "frontend/onnx/onnx_constants.h"
#include "frontend/onnx/onnx_io.h"
#include "graph/errors.h"

namespace stagecraft::graph {
namespace {

using onnx_import::ConstTensor;
using onnx_import::FoldInput;

onnx::NodeProto node_of(const std::string& type, int inputs) {
  onnx::NodeProto n;
  n.set_op_type(type);
  n.set_name(type);
  for (int i = 0; i < inputs; ++i) n.add_input("in" + std::to_string(i));
  n.add_output("y");
  return n;
}

std::vector<int64_t> folded_ints(const onnx::NodeProto& node, const std::vector<ConstTensor>& in,
                                 std::vector<int64_t>* dims) {
  std::vector<FoldInput> inputs;
  for (const auto& t : in) inputs.push_back(FoldInput{&t, std::nullopt});
  auto out = onnx_import::fold(node, inputs, 17);
  EXPECT_TRUE(out.has_value());
  if (!out) return {};
  *dims = out->at(0).dims;
  return out->at(0).ints();
}

TEST(OnnxTail, NonMaxSuppressionFollowsOnnxExamples) {
  // ONNX's test_nonmaxsuppression_suppress_by_IOU: corners [y1, x1, y2, x2]; box 1 overlaps box 0
  // (IoU 0.82) and box 4 box 3, so the three kept are 3, 0, 5 in score order.
  const ConstTensor boxes = ConstTensor::of_floats(
      {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101}, {1, 6, 4});
  const ConstTensor scores = ConstTensor::of_floats({0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f}, {1, 1, 6});
  const ConstTensor max_out = ConstTensor::of_ints({3}, {1});
  const ConstTensor iou = ConstTensor::of_floats({0.5f}, {1});
  const ConstTensor threshold = ConstTensor::of_floats({0.0f}, {1});
  std::vector<int64_t> dims;
  EXPECT_EQ(folded_ints(node_of("NonMaxSuppression", 5), {boxes, scores, max_out, iou, threshold}, &dims),
            (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
  EXPECT_EQ(dims, (std::vector<int64_t>{3, 3}));
  // A score threshold of 0.4 drops box 5 (0.3); at most 2 per class keeps 3 and 0.
  const ConstTensor two = ConstTensor::of_ints({2}, {1});
  const ConstTensor high = ConstTensor::of_floats({0.4f}, {1});
  EXPECT_EQ(folded_ints(node_of("NonMaxSuppression", 5), {boxes, scores, two, iou, high}, &dims),
            (std::vector<int64_t>{0, 0, 3, 0, 0, 0}));
  // No max_output_boxes_per_class: none (ONNX's default 0).
  EXPECT_TRUE(folded_ints(node_of("NonMaxSuppression", 2), {boxes, scores}, &dims).empty());
  EXPECT_EQ(dims, (std::vector<int64_t>{0, 3}));
  // center_point_box 1: [x_center, y_center, width, height] of the same boxes.
  onnx::NodeProto centered = node_of("NonMaxSuppression", 5);
  auto* a = centered.add_attribute();
  a->set_name("center_point_box");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  const ConstTensor centers = ConstTensor::of_floats(
      {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1, 0.5f, 0.4f, 1, 1, 0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1},
      {1, 6, 4});
  EXPECT_EQ(folded_ints(centered, {centers, scores, max_out, iou, threshold}, &dims),
            (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));
}

TEST(OnnxTail, NonZeroGivesCoordinatesInRowMajorOrder) {
  const ConstTensor x = ConstTensor::of_floats({1, 0, 1, 1}, {2, 2});
  std::vector<int64_t> dims;
  EXPECT_EQ(folded_ints(node_of("NonZero", 1), {x}, &dims), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(dims, (std::vector<int64_t>{2, 3}));
}

// A model of x [2, 3]: y = NonZero(Relu(x)) (int64 [2, count]), z = Relu(x) (a graph output).
onnx::ModelProto nonzero_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* g = model.mutable_graph();
  g->set_name("nz");
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {2, 3}) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("z");
  auto* nz = g->add_node();
  nz->set_op_type("NonZero");
  nz->set_name("nz");
  nz->add_input("z");
  nz->add_output("y");
  for (const char* name : {"y", "z"}) {
    auto* out = g->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(name[0] == 'y' ? onnx::TensorProto::INT64
                                                                              : onnx::TensorProto::FLOAT);
  }
  return model;
}

TEST(OnnxTail, AModelEndingInNonZeroKeepsItForTheHost) {
  const OnnxModel m = import_onnx_bytes(nonzero_model().SerializeAsString(), "nz.onnx", {});
  ASSERT_TRUE(m.tail != nullptr);
  EXPECT_EQ(m.tail->size(), 1u);
  EXPECT_EQ(m.tail->summary(), "1 ONNX node on the host after the plan (NonZero)");
  // The graph's one output is Relu's value (a model output and what NonZero reads).
  ASSERT_EQ(m.graph.outputs().size(), 1u);
  const std::vector<float> relu = {0, 2, 0, 3, 0, 5};
  const auto outs = m.tail->outputs({{2, 3}}, {std::span<const float>(relu)});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].name, "y");
  EXPECT_EQ(outs[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(outs[0].data, (std::vector<float>{0, 1, 1, 1, 0, 2}));
  EXPECT_EQ(outs[1].name, "z");
  EXPECT_EQ(outs[1].data, relu);
  ASSERT_EQ(m.tail->declared().size(), 2u);
  EXPECT_EQ(m.tail->declared()[0].onnx_type, onnx::TensorProto::INT64);
}

TEST(OnnxTail, AnOpWithoutAHostRuleAfterNonZeroIsRefusedByName) {
  onnx::ModelProto model = nonzero_model();
  auto* g = model.mutable_graph();
  auto* erf = g->add_node();
  erf->set_op_type("Erf");
  erf->set_name("erf");
  erf->add_input("y");
  erf->add_output("w");
  g->mutable_output(0)->set_name("w");
  try {
    import_onnx_bytes(model.SerializeAsString(), "nz.onnx", {});
    FAIL() << "imported";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "nz.onnx: node 'erf' (Erf), evaluated on the host after the plan: the host "
                           "evaluation has no rule for Erf");
  }
}

}  // namespace
}  // namespace stagecraft::graph
