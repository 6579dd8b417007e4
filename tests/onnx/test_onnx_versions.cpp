// Op versions: which version of an op a model's opset selects, which the importer translates, and
// the one-line refusals of versions and ops it does not know.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "common/error.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/onnx_versions.h"

namespace stagecraft::graph::onnx_import {
namespace {

TEST(OnnxVersions, AnOpsetSelectsTheNewestVersionAtOrBelowIt) {
  EXPECT_EQ(op_version("Conv", 11), 11);
  EXPECT_EQ(op_version("Conv", 21), 11);
  EXPECT_EQ(op_version("Conv", 22), 22);
  EXPECT_EQ(op_version("Conv", newest_opset()), 22);
  EXPECT_EQ(op_version("Reshape", 13), 13);
  EXPECT_EQ(op_version("Reshape", 18), 14);
  EXPECT_EQ(op_version("LayerNormalization", 16), std::nullopt);  // added at 17
  EXPECT_EQ(op_version("NoSuchOp", 17), std::nullopt);
  EXPECT_GE(newest_opset(), 21);
}

// Every op type the importer claims to translate exists in ONNX, at a version ONNX has.
TEST(OnnxVersions, EveryTranslatedVersionIsAVersionOfItsOp) {
  for (const char* type : {"Conv", "Add", "Resize", "SpaceToDepth", "Split", "Pad", "ReduceMean", "Cast",
                           "Shape", "Where", "Einsum", "LayerNormalization", "Gelu", "ScatterND"}) {
    const auto translated = translated_version(type);
    ASSERT_TRUE(translated) << type;
    EXPECT_EQ(op_version(type, *translated), translated) << type << ": " << *translated
                                                        << " is not one of its versions";
  }
  EXPECT_EQ(translated_version("STFT"), std::nullopt);
}

TEST(OnnxVersions, ProblemsAreOneLineNamingTheOpAndTheOpset) {
  EXPECT_EQ(version_problem("Conv", 22), "");
  EXPECT_EQ(version_problem("SpaceToDepth", 28), "");
  EXPECT_EQ(version_problem("STFT", 22), "");  // not translated: the walk refuses it by name
  EXPECT_EQ(version_problem("LayerNormalization", 16), "ONNX has no LayerNormalization at opset 16");
}

onnx::ModelProto one_node(const std::string& type, int64_t opset, const std::vector<int64_t>& dims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("one");
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  auto* n = g->add_node();
  n->set_op_type(type);
  n->set_name("n");
  n->add_input("x");
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

std::string import_error(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  try {
    import_onnx_bytes(bytes, "m.onnx", {});
  } catch (const Error& e) {
    return e.what();
  }
  return "<imported>";
}

TEST(OnnxVersions, ModelsOfEveryOpsetToTheNewestLoadAndNewerOnesAreRefused) {
  for (int64_t opset = kOldestOpset; opset <= newest_opset(); ++opset) {
    EXPECT_EQ(import_error(one_node("Relu", opset, {1, 3, 4, 4})), "<imported>") << opset;
  }
  EXPECT_NE(import_error(one_node("Relu", newest_opset() + 1, {1, 3, 4, 4})).find("is not supported (supported: 7 to "),
            std::string::npos);
  const std::string e = import_error(one_node("LayerNormalization", 16, {2, 8}));
  EXPECT_EQ(e, "m.onnx: node 'n' (LayerNormalization): ONNX has no LayerNormalization at opset 16");
}

// Below opset 11 a node loads where its op's version is the one opset 11 selects (Relu-6) or one
// its translator also implements (Scan-8 with its batch axis, Scan-9, Upsample-7 and -9); any
// other is refused by name (BatchNormalization-7's spatial attribute, Slice-1's attributes).
TEST(OnnxVersions, OldOpsetsLoadOnlyTheVersionsTranslated) {
  EXPECT_EQ(version_problem("Relu", 7), "");
  EXPECT_EQ(version_problem("Scan", 9), "");
  EXPECT_EQ(version_problem("Upsample", 7), "");
  EXPECT_EQ(version_problem("Upsample", 9), "");
  EXPECT_EQ(version_problem("Scan", 8), "");
  EXPECT_EQ(version_problem("BatchNormalization", 8),
            "version 7 of BatchNormalization (opset 8) is not supported: this build translates BatchNormalization from version 9");
  EXPECT_EQ(version_problem("Slice", 10), "version 10 of Slice (opset 10) is not supported: this build translates Slice from version 11");
  EXPECT_EQ(import_error(one_node("Relu", 7, {1, 3, 4, 4})), "<imported>");
  EXPECT_NE(import_error(one_node("Relu", 6, {1, 3, 4, 4})).find("opset 6 is not supported (supported: 7 to "), std::string::npos);
}

// SpaceToDepth-28 added the order of the blocks: DCR (the old meaning) and CRD load, another is refused.
TEST(OnnxVersions, ANewAttributeOfANewVersionIsReadNotIgnored) {
  onnx::ModelProto m = one_node("SpaceToDepth", 28, {1, 4, 4, 4});
  auto* block = m.mutable_graph()->mutable_node(0)->add_attribute();
  block->set_name("blocksize");
  block->set_type(onnx::AttributeProto::INT);
  block->set_i(2);
  EXPECT_EQ(import_error(m), "<imported>");
  auto* mode = m.mutable_graph()->mutable_node(0)->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("CRD");
  EXPECT_EQ(import_error(m), "<imported>");  // read: CRD is a reshape, a transpose and a reshape
  mode->set_s("RCD");
  EXPECT_NE(import_error(m).find("(SpaceToDepth): mode 'RCD' is not supported"), std::string::npos) << import_error(m);
}

// Inputs of rank 1 to 8 are graph values (row-major outside ranks 2 and 4); a scalar input is
// refused in one line.
TEST(OnnxVersions, InputsOfAnyRankLoad) {
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{5}, {2, 3, 4}, {1, 2, 3, 4, 5}}) {
    EXPECT_EQ(import_error(one_node("Relu", 17, dims)), "<imported>") << dims.size();
  }
  EXPECT_NE(import_error(one_node("Relu", 17, {1, 1, 1, 1, 1, 1, 1, 1, 2})).find("has rank 9 (supported: 1 to 8)"),
            std::string::npos);
  EXPECT_NE(import_error(one_node("Relu", 17, {})).find("input 'x' is a scalar (rank 0)"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::graph::onnx_import
