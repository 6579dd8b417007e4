// ONNX import/export round trips on every network, tensor files, and malformed models.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/strings.h"
#include "executor/executor.h"
#include "graph/errors.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/tensor_files.h"
#include "graph/passes.h"
#include "networks/builder.h"
#include "networks/registry.h"
#include "support/compare.h"
#include "support/models.h"

namespace stagecraft::graph {
namespace {

using stagecraft::testing::Model;

constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

// The model's outputs on the CPU for `inputs` (default: the tests' inputs of its graph).
std::vector<executor::HostTensor> run_cpu(const Model& m, std::vector<executor::HostTensor> inputs = {}) {
  executor::ExecutionPlan plan(
      m.graph, stagecraft::testing::analytic_schedule(m.graph, scheduler::Strategy::kSequential),
      m.weights, cpu());
  executor::Executor executor(plan);
  return executor.run(inputs.empty() ? stagecraft::testing::inputs_of(m.graph) : inputs);
}

// Pads that feed only convolutions are folded into them on import.
size_t foldable_pads(const Graph& g) {
  size_t n = 0;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::kPad || op.attrs_as<PadAttrs>().value != 0) continue;
    bool all_convs = !g.consumers(op.outputs[0]).empty();
    for (OpId r : g.consumers(op.outputs[0])) all_convs = all_convs && g.op(r).kind == OpKind::kConv2d;
    const auto& p = op.attrs_as<PadAttrs>().pads;
    n += all_convs && p.top >= 0 && p.left >= 0 && p.bottom >= 0 && p.right >= 0;
  }
  return n;
}

class OnnxRoundTrip : public ::testing::TestWithParam<stagecraft::testing::NetworkCase> {};

TEST_P(OnnxRoundTrip, ExportedAndImportedBackGivesTheSameGraphAndOutputs) {
  const auto& c = GetParam();
  const Model m = stagecraft::testing::network(c.name, c.size, c.batch);
  const std::string bytes = export_onnx_bytes(m.graph, m.weights);
  OnnxModel back = import_onnx_bytes(bytes, c.name, {});
  EXPECT_EQ(back.opset, 17);
  PassLog log;
  const Graph imported = prepare_for_inference(back.graph, &log);
  // No op more than the original (pads fold into convolutions); fewer where the importer computes
  // equal ops once (NASNet's cells and RandWire's nodes apply one ReLU to one input in several
  // branches), exactly as many without such ops.
  const bool has_equal_ops = merge_duplicate_ops(m.graph, m.weights).num_ops() < m.graph.num_ops();
  if (has_equal_ops) {
    EXPECT_LT(imported.num_ops() + foldable_pads(m.graph), m.graph.num_ops()) << c.name;
  } else {
    EXPECT_EQ(imported.num_ops() + foldable_pads(m.graph), m.graph.num_ops()) << c.name;
  }
  EXPECT_EQ(count_ops(imported, OpKind::kConv2d), count_ops(m.graph, OpKind::kConv2d));
  EXPECT_EQ(total_macs(imported), total_macs(m.graph));
  ASSERT_EQ(imported.outputs().size(), m.graph.outputs().size());
  for (size_t i = 0; i < imported.outputs().size(); ++i) {
    EXPECT_EQ(imported.value(imported.outputs()[i]).desc, m.graph.value(m.graph.outputs()[i]).desc);
  }
  const Model again{imported, fold_weights(back.graph, back.weights, log)};
  const auto want = run_cpu(m);
  const auto got = run_cpu(again);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(executor::relative_error(got[i], want[i]), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Networks, OnnxRoundTrip,
                         ::testing::ValuesIn(stagecraft::testing::network_cases()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(Onnx, RawGraphKeepsBatchNormsAndEveryOpKind) {
  const Graph raw = stagecraft::testing::every_op_graph(2);
  const WeightStore w = random_weights(raw, 3);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, w), "every_op", {});
  EXPECT_EQ(back.graph.num_ops(), raw.num_ops());
  for (OpKind kind : all_op_kinds()) {
    EXPECT_EQ(count_ops(back.graph, kind), count_ops(raw, kind)) << to_string(kind);
  }
  const auto want = run_cpu(Model{raw, w});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());  // an empty result must not pass
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(executor::relative_error(got[i], want[i]), 1e-5);
}

// A vision transformer's row-major ops export as ONNX writes them (MatMul by Wᵀ then Add of the
// bias, Transpose, Slice, Concat with the class token, Softmax over the last axis, Reshape) and
// import back to the same op kinds (the bias Add folded into its linear layer again) and outputs.
TEST(Onnx, TransformerOpsRoundTripAndRunTheSame) {
  const Graph raw = stagecraft::testing::vit_graph(2, 16, 2, 2);
  const WeightStore w = random_weights(raw, 5);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, w), "vit", {});
  const Graph a = prepare_for_inference(raw), b = prepare_for_inference(back.graph);
  for (OpKind kind : {OpKind::kMatMul, OpKind::kTranspose, OpKind::kNarrow, OpKind::kConcatConstant,
                      OpKind::kLinear, OpKind::kLayerNorm, OpKind::kSoftmax, OpKind::kReduceMean}) {
    EXPECT_EQ(count_ops(b, kind), count_ops(a, kind)) << to_string(kind);
  }
  const auto want = run_cpu(Model{raw, w});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(executor::relative_error(got[i], want[i]), 1e-5) << i;
}

TEST(Onnx, ModernOpKindsRoundTripAndRunTheSame) {
  for (int64_t width : {16, 12}) {
    const Graph raw = stagecraft::testing::modern_ops_graph(2, width);
    const WeightStore w = random_weights(raw, 4);
    const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, w), "modern_ops", {});
    // SiLU travels as x * sigmoid(x) and is recognised again when the graph is prepared.
    const Graph a = prepare_for_inference(raw), b = prepare_for_inference(back.graph);
    for (OpKind kind : all_op_kinds()) {
      EXPECT_EQ(count_ops(b, kind), count_ops(a, kind)) << to_string(kind);
    }
    const auto want = run_cpu(Model{raw, w});
    const auto got = run_cpu(Model{back.graph, back.weights});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(executor::relative_error(got[i], want[i]), 1e-5);
    // The prepared graph (a shuffle reading the parts of its concatenation) exports too.
    ASSERT_EQ(a.op(*a.find_op("shuffle")).inputs.size(), 2u);
    const OnnxModel prepared = import_onnx_bytes(export_onnx_bytes(a, w), "modern_ops_prepared", {});
    const auto got_prepared = run_cpu(Model{prepared.graph, prepared.weights});
    ASSERT_EQ(got_prepared.size(), want.size());
    for (size_t i = 0; i < got_prepared.size(); ++i) {
      EXPECT_LT(executor::relative_error(got_prepared[i], want[i]), 1e-5) << "output " << i;
    }
  }
}

// The vision ops (reflect padding, space to depth, layer normalisation over channels and features,
// GELU in both forms, reductions over channels and single axes) export as ONNX Runtime reads them (Pad mode reflect, SpaceToDepth,
// Transpose-LayerNormalization-Transpose, GELU's decompositions) and import back to the same ops
// and outputs.
TEST(Onnx, VisionOpsRoundTripAndRunTheSame) {
  networks::NetBuilder b("vision_ops", 2, 3, 8, 12);
  graph::PadAttrs pad;
  pad.pads = {1, 2, 1, 0};
  pad.reflect = true;
  graph::SpaceToDepthAttrs s2d;
  s2d.block = 2;
  auto p = b.op("reflect", OpKind::kPad, pad, {b.input()});
  auto s = b.op("s2d", OpKind::kSpaceToDepth, s2d, {p});
  auto n = b.op("ln", OpKind::kLayerNorm, graph::LayerNormAttrs{}, {b.conv(s, networks::square_conv(16, 3, 1, 1), "c")});
  auto g = b.op("gelu", OpKind::kGelu, graph::NoAttrs{}, {n});
  auto t = b.op("gelu_tanh", OpKind::kGeluTanh, graph::NoAttrs{}, {b.conv(g, networks::square_conv(16, 1), "c2")});
  graph::ReduceAttrs channels, channels_and_width, height;
  channels.axes = {1};
  channels_and_width.axes = {1, 3};
  height.axes = {2};
  const Graph raw = std::move(b).finish({t, b.op("rmax", OpKind::kReduceMax, channels, {t}),
                                         b.op("rsum", OpKind::kReduceSum, channels_and_width, {t}),
                                         b.op("rmean", OpKind::kReduceMean, height, {t})});
  const Graph norms = stagecraft::testing::channel_norms_graph(2, 12);
  for (const Graph* graph : {&raw, &norms}) {
    const WeightStore w = random_weights(*graph, 4);
    const OnnxModel back = import_onnx_bytes(export_onnx_bytes(*graph, w), graph->name(), {});
    for (OpKind kind : {OpKind::kPad, OpKind::kSpaceToDepth, OpKind::kLayerNorm, OpKind::kGelu, OpKind::kGeluTanh,
                        OpKind::kReduceMax, OpKind::kReduceSum, OpKind::kReduceMean}) {
      EXPECT_EQ(count_ops(back.graph, kind), count_ops(*graph, kind)) << graph->name() << " " << to_string(kind);
    }
    const auto want = run_cpu(Model{*graph, w});
    const auto got = run_cpu(Model{back.graph, back.weights});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(executor::relative_error(got[i], want[i]), 1e-5) << graph->name();
  }
}

// Every unary function exports as its ONNX op (Mish and Swish, newer than the export's opset 17,
// as their definitions) and imports back with the same values.
TEST(Onnx, UnaryFunctionsRoundTripAndRunTheSame) {
  networks::NetBuilder b("unary", 2, 3, 4, 5);
  std::vector<ValueId> outputs;
  for (const std::string& name : unary_fn_names()) {
    const UnaryFn fn = *parse_unary_fn(name);
    if (fn == UnaryFn::kLog || fn == UnaryFn::kAcosh || fn == UnaryFn::kAtanh) continue;  // outside [-1, 1)
    UnaryAttrs a;
    a.fn = fn;
    a.alpha = fn == UnaryFn::kShrink ? 0.25 : 0.75;
    a.beta = fn == UnaryFn::kShrink ? 0.125 : 1.25;
    outputs.push_back(b.op(name, OpKind::kUnary, a, {b.input()}));
  }
  const Graph raw = std::move(b).finish(outputs);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, {}), "unary", {});
  // Mish comes back as softplus (a unary op), tanh and a product; Swish as a scale, sigmoid, product;
  // Not, IsNaN and IsInf (bool in ONNX) between casts, which come back as nothing. Mish's softplus
  // of the input is the Softplus op's: computed once.
  EXPECT_EQ(count_ops(back.graph, OpKind::kUnary), count_ops(raw, OpKind::kUnary) - 2);
  const auto want = run_cpu(Model{raw, {}});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_EQ(want.size(), outputs.size());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LT(stagecraft::testing::max_relative_error(got[i].data, want[i].data), 1e-6) << raw.value(outputs[i]).name;
  }
}

// pool_nd (a 3-D max pool with dilations and pads, a 3-D average with ceil_mode and the padding
// counted) exports as MaxPool / AveragePool with every attribute and imports back to the same ops.
TEST(Onnx, PoolNdRoundTripsAndRunsTheSame) {
  Graph raw("pool_nd");
  const ValueId x = raw.add_input("x", make_desc(Shape{1, 2, 6, 7, 8}));
  PoolNdAttrs m;
  m.kernel = {2, 3, 2}, m.stride = {1, 2, 2}, m.dilation = {2, 1, 1}, m.pad_begin = {1, 1, 0}, m.pad_end = {0, 1, 1};
  PoolNdAttrs a = m;
  a.max = false, a.ceil_mode = true, a.count_include_pad = true, a.dilation = {1, 1, 1};
  raw.add_output(raw.op(raw.add_op("max3d", OpKind::kPoolNd, m, {x})).outputs[0]);
  raw.add_output(raw.op(raw.add_op("avg3d", OpKind::kPoolNd, a, {x})).outputs[0]);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, {}), "pool_nd", {});
  ASSERT_EQ(count_ops(back.graph, OpKind::kPoolNd), 2u);
  for (const Op& op : back.graph.ops()) {
    if (op.kind == OpKind::kPoolNd) EXPECT_TRUE(op.attrs_as<PoolNdAttrs>() == (op.name == "max3d" ? m : a)) << op.name;
  }
  const auto want = run_cpu(Model{raw, {}});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape, want[i].shape);
    EXPECT_LT(stagecraft::testing::max_relative_error(got[i].data, want[i].data), 1e-6) << i;
  }
}

// top_k exports as TopK with its indices cast to float, gather_elements as GatherElements of
// indices cast to int64; both import back to the same ops and values (the casts of integers vanish).
TEST(Onnx, TopKAndGatherElementsRoundTripAndRunTheSame) {
  Graph raw("indices");
  const ValueId x = raw.add_input("x", make_desc(Shape{2, 30, 4}));
  TopKAttrs t;
  t.axis = 1, t.k = 5, t.largest = false;
  const Op& top = raw.op(raw.add_op("top", OpKind::kTopK, t, {x}));
  const ValueId values = top.outputs[0], indices = top.outputs[1];
  GatherElementsAttrs g;
  g.axis = 1;
  raw.add_output(values);
  raw.add_output(indices);
  raw.add_output(raw.op(raw.add_op("gather", OpKind::kGatherElements, g, {x, indices})).outputs[0]);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, {}), "indices", {});
  EXPECT_EQ(count_ops(back.graph, OpKind::kTopK), 1u);
  EXPECT_EQ(count_ops(back.graph, OpKind::kGatherElements), 1u);
  EXPECT_EQ(count_ops(back.graph, OpKind::kBinary), 0u);  // no truncation of integer indices
  const auto want = run_cpu(Model{raw, {}});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape, want[i].shape);
    EXPECT_EQ(got[i].data, want[i].data) << i;
  }
}

// A top_k of one with ArgMax's NaN rule exports as ArgMax (its indices) and GatherElements (its
// values) and imports back to the same rule: a NaN after the first element is skipped.
TEST(Onnx, ArgMaxsNaNRuleRoundTrips) {
  Graph raw("argmax");
  const ValueId x = raw.add_input("x", make_desc(Shape{3, 4}));
  TopKAttrs t;
  t.axis = 1, t.k = 1, t.ordered_nan = false;
  const Op& top = raw.op(raw.add_op("top", OpKind::kTopK, t, {x}));
  raw.add_output(top.outputs[0]);
  raw.add_output(top.outputs[1]);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, {}), "argmax", {});
  ASSERT_EQ(count_ops(back.graph, OpKind::kTopK), 1u);
  for (const auto& op : back.graph.ops()) {
    if (op.kind == OpKind::kTopK) EXPECT_FALSE(op.attrs_as<TopKAttrs>().ordered_nan);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const executor::HostTensor in{Shape{3, 4}, {1, nan, 4, 2, nan, 3, 9, 1, 5, 6, 6, nan}};
  const auto got = run_cpu(Model{back.graph, back.weights}, {in});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].data, (std::vector<float>{2, 0, 1}));
  EXPECT_EQ(got[0].data[0], 4);
  EXPECT_EQ(got[0].data[2], 6);
  EXPECT_TRUE(std::isnan(got[0].data[1]));
}

// Pow, Max, Min and Mod (fmod 1) of two tensors and of a tensor and a constant, and ReduceMin and
// ReduceProd over the batch and another axis, export as their ONNX ops and import back to the same
// ops and values.
TEST(Onnx, BinaryMathRoundTripsAndRunsTheSame) {
  networks::NetBuilder b("binary", 2, 3, 4, 5);
  UnaryAttrs exp;
  exp.fn = UnaryFn::kExp;
  const ValueId positive = b.op("exp", OpKind::kUnary, exp, {b.input()});
  const ValueId pooled = b.global_avg_pool(b.input(), "gap");
  std::vector<ValueId> outputs;
  for (BinaryOp op : {BinaryOp::kPow, BinaryOp::kMax, BinaryOp::kMin, BinaryOp::kMod}) {
    BinaryAttrs a;
    a.op = op;
    outputs.push_back(b.op(cat(to_string(op), "_tensors"), OpKind::kBinary, a, {positive, pooled}));
    a.constant = {3, 1, 1};
    outputs.push_back(b.op(cat(to_string(op), "_constant"), OpKind::kBinary, a, {positive}));
  }
  for (OpKind kind : {OpKind::kReduceMin, OpKind::kReduceProd}) {
    ReduceAttrs r;
    r.axes = {0, 2};
    outputs.push_back(b.op(cat(to_string(kind), "_n_h"), kind, r, {positive}));
  }
  const Graph raw = std::move(b).finish(outputs);
  const WeightStore w = random_weights(raw, 6);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(raw, w), "binary", {});
  EXPECT_EQ(count_ops(back.graph, OpKind::kBinary), 8u);
  EXPECT_EQ(count_ops(back.graph, OpKind::kReduceMin), 1u);
  EXPECT_EQ(count_ops(back.graph, OpKind::kReduceProd), 1u);
  const auto want = run_cpu(Model{raw, w});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_EQ(want.size(), 10u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LT(stagecraft::testing::max_relative_error(got[i].data, want[i].data), 1e-6) << raw.value(outputs[i]).name;
  }
}

TEST(Onnx, LrnRoundTripsAndAnEvenWindowIsRefusedByName) {
  networks::NetBuilder b("lrn", 1, 6, 3, 3);
  LrnAttrs a;
  a.size = 3;
  a.alpha = 0.25;
  a.bias = 1.5;
  const Graph raw = std::move(b).finish({b.op("lrn", OpKind::kLrn, a, {b.input()})});
  const std::string bytes = export_onnx_bytes(raw, {});
  const OnnxModel back = import_onnx_bytes(bytes, "lrn", {});
  ASSERT_EQ(count_ops(back.graph, OpKind::kLrn), 1u);
  EXPECT_EQ(back.graph.op(*back.graph.find_op("lrn")).attrs_as<LrnAttrs>(), a);
  const auto want = run_cpu(Model{raw, {}});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LT(stagecraft::testing::max_relative_error(got[0].data, want[0].data), 1e-6);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  for (auto& attr : *m.mutable_graph()->mutable_node(0)->mutable_attribute()) {
    if (attr.name() == "size") attr.set_i(4);
  }
  std::string even;
  m.SerializeToString(&even);
  try {
    import_onnx_bytes(even, "lrn.onnx", {});
    FAIL() << "an even LRN window was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lrn.onnx: node 'lrn' (LRN): size 4 is not supported"), std::string::npos) << e.what();
  }
}

// ---- Malformed and unsupported models ----------------------------------------------------------

onnx::ModelProto squeeze_model() {
  const Model m = stagecraft::testing::network("squeezenet1_1", 48);
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(export_onnx_bytes(m.graph, m.weights)));
  return model;
}

std::string import_error(const std::string& bytes, const OnnxImportOptions& options = {}) {
  try {
    import_onnx_bytes(bytes, "m.onnx", options);
  } catch (const Error& e) {
    return e.what();
  }
  return "<imported>";
}

std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

TEST(Onnx, MalformedFilesAreClearErrors) {
  const std::string good = serialize(squeeze_model());
  EXPECT_NE(import_error(good.substr(0, good.size() / 3)).find("m.onnx: not an ONNX model"),
            std::string::npos);
  EXPECT_NE(import_error("format: stagecraft-graph\nversion: 1\n").find("not an ONNX model"),
            std::string::npos);
  EXPECT_NE(import_error(std::string("\x08\x07\x12\x00", 4)).find("opset"), std::string::npos);

  onnx::ModelProto missing = squeeze_model();
  missing.mutable_graph()->mutable_initializer()->erase(
      missing.mutable_graph()->mutable_initializer()->begin());
  std::string m = import_error(serialize(missing));
  EXPECT_NE(m.find("node 'conv1/conv' (Conv)"), std::string::npos) << m;
  EXPECT_NE(m.find("a missing initializer"), std::string::npos) << m;

  onnx::ModelProto cyclic = squeeze_model();
  auto* nodes = cyclic.mutable_graph()->mutable_node();
  std::swap(*nodes->Mutable(0), *nodes->Mutable(1));  // a node reads a value produced later
  m = import_error(serialize(cyclic));
  EXPECT_NE(m.find("which no earlier node produces"), std::string::npos) << m;

  onnx::ModelProto unsupported = squeeze_model();
  unsupported.mutable_graph()->mutable_node(1)->set_op_type("StringNormalizer");
  m = import_error(serialize(unsupported));
  EXPECT_NE(m.find("(StringNormalizer): this op is not supported"), std::string::npos) << m;

  onnx::ModelProto old = squeeze_model();
  old.mutable_opset_import(0)->set_version(6);
  EXPECT_NE(import_error(serialize(old)).find("opset 6 is not supported (supported: 7 to "), std::string::npos);

  onnx::ModelProto symbolic = squeeze_model();
  auto* dim = symbolic.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()
                  ->mutable_shape()->mutable_dim(0);
  dim->set_dim_param("N");
  m = import_error(serialize(symbolic));
  EXPECT_NE(m.find("symbolic batch dimension 'N': give the batch size"), std::string::npos) << m;
  OnnxImportOptions batch4;
  batch4.batch = 4;
  const OnnxModel four = import_onnx_bytes(serialize(symbolic), "m.onnx", batch4);
  EXPECT_EQ(four.graph.value(four.graph.outputs()[0]).desc.shape[0], 4);

  // Input shapes (the CLI's --input files) fill symbolic dimensions and may change the batch; a
  // fixed dimension must agree, and the rank must.
  auto* spatial = symbolic.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()
                      ->mutable_shape()->mutable_dim(2);
  spatial->set_dim_param("H");
  OnnxImportOptions shaped;
  shaped.input_shapes = {{3, 3, 64, 48}};
  const OnnxModel three = import_onnx_bytes(serialize(symbolic), "m.onnx", shaped);
  EXPECT_EQ(three.graph.value(three.graph.inputs()[0]).desc.shape, (Shape{3, 3, 64, 48}));
  shaped.input_shapes = {{3, 3, 64, 64}};
  m = import_error(serialize(symbolic), shaped);
  EXPECT_NE(m.find("has dimension 3 = 48 in the model; the given shape [3, 3, 64, 64] says 64"), std::string::npos) << m;
  shaped.input_shapes = {{3, 64, 48}};
  m = import_error(serialize(symbolic), shaped);
  EXPECT_NE(m.find("has rank 4; the given shape [3, 64, 48] has rank 3"), std::string::npos) << m;

  EXPECT_THROW(import_onnx("/nonexistent/model.onnx", {}), IoError);
}

// Resizes travel as ONNX Resize (scales where they give the size back, sizes otherwise) and come
// back with the same attributes and outputs; the coordinate rules and modes PyTorch does not
// export without align_corners are refused naming the node and the attribute.
TEST(Onnx, ResizesRoundTripAndOtherCoordinateRulesAreClearErrors) {
  networks::NetBuilder b("resizes", 2, 3, 7, 6);
  auto x = b.conv(b.input(), networks::square_conv(12, 3, 1, 1, true), "stem");
  ResizeAttrs nearest;
  nearest.size = {14, 12};
  nearest.scale_h = nearest.scale_w = 2;
  ResizeAttrs linear;
  linear.size = {9, 17};
  linear.scale_h = 9.0 / 14.0;
  linear.scale_w = 17.0 / 12.0;
  linear.linear = true;
  auto up = b.op("up", OpKind::kResize, nearest, {x});
  const Graph g = std::move(b).finish({b.op("fit", OpKind::kResize, linear, {up})});
  const WeightStore w = random_weights(g, 4);
  const OnnxModel back = import_onnx_bytes(export_onnx_bytes(g, w), "resizes", {});
  std::vector<ResizeAttrs> attrs;
  for (const Op& op : back.graph.ops())
    if (op.kind == OpKind::kResize) attrs.push_back(op.attrs_as<ResizeAttrs>());
  ASSERT_EQ(attrs.size(), 2u);
  EXPECT_EQ(attrs[0], nearest);
  EXPECT_EQ(attrs[1], linear);
  const auto want = run_cpu(Model{g, w});
  const auto got = run_cpu(Model{back.graph, back.weights});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LT(executor::relative_error(got[0], want[0]), 1e-6);

  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(export_onnx_bytes(g, w)));
  auto with = [&](const char* name, const std::string& value) {
    onnx::ModelProto m = model;
    for (auto& node : *m.mutable_graph()->mutable_node()) {
      if (node.op_type() != "Resize" || node.name() != "fit") continue;
      for (auto& a : *node.mutable_attribute())
        if (a.name() == name) a.set_s(value);
    }
    return import_error(serialize(m));
  };
  EXPECT_EQ(with("coordinate_transformation_mode", "align_corners"), "<imported>");  // align_corners=True
  // Not PyTorch's: a resize_nd of a row-major copy (ONNX's rule in full).
  EXPECT_EQ(with("coordinate_transformation_mode", "half_pixel_symmetric"), "<imported>");
  EXPECT_EQ(with("mode", "cubic"), "<imported>");  // PyTorch's bicubic (half_pixel, a = -0.75)
  const std::string m = with("mode", "area");
  EXPECT_NE(m.find("node 'fit' (Resize): mode 'area' is not nearest, linear or cubic"), std::string::npos) << m;
}

// ---- Tensor files -----------------------------------------------------------------------------

TEST(TensorFiles, NpyAndTensorProtoRoundTrip) {
  const auto dir = std::filesystem::temp_directory_path() / "stagecraft_tensor_files";
  std::filesystem::create_directories(dir);
  const executor::HostTensor t = executor::random_host_tensor(Shape{2, 3, 4, 5}, 9);
  for (const char* name : {"x.npy", "x.pb"}) {
    const std::string path = (dir / name).string();
    write_tensor_file(path, TensorFile{t.shape, t.data});
    const TensorFile back = read_tensor_file(path);
    EXPECT_EQ(back.shape, t.shape) << name;
    EXPECT_EQ(back.data, t.data) << name;
  }
  const std::string bad = (dir / "bad.npy").string();
  std::ofstream(bad) << "not numpy";
  EXPECT_THROW(read_tensor_file(bad), FormatError);
  EXPECT_THROW(read_tensor_file((dir / "x.txt").string()), Error);
}

}  // namespace
}  // namespace stagecraft::graph
