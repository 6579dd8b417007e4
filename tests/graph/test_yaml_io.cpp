// Graph YAML: byte-identical round trips for every network, and one clear error per bad input.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "graph/errors.h"
#include "graph/passes.h"
#include "graph/yaml_io.h"
#include "networks/registry.h"
#include "tests/support/messages.h"

namespace stagecraft::graph {
namespace {

using stagecraft::testing::expect_mentions;

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.num_ops(), b.num_ops());
  for (size_t i = 0; i < a.num_ops(); ++i) {
    const Op& x = a.op(static_cast<OpId>(i));
    const Op& y = b.op(static_cast<OpId>(i));
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.attrs, y.attrs) << x.name;
    EXPECT_EQ(a.input_descs(x.id), b.input_descs(y.id)) << x.name;
    EXPECT_EQ(a.output_descs(x.id), b.output_descs(y.id)) << x.name;
  }
}

// A graph with every kind added for PyTorch models (the test support's builder is not linked here).
struct NetBuilderForYaml {
  Graph graph() const {
    Graph g("modern");
    const ValueId x = g.add_input("x", make_desc(Shape{2, 6, 5, 5}));
    HardSigmoidAttrs hs;
    hs.alpha = 0.2;
    const ValueId a = g.op(g.add_op("hs", OpKind::kHardSigmoid, hs, {x})).outputs[0];
    const ValueId b = g.op(g.add_op("hw", OpKind::kHardSwish, NoAttrs{}, {a})).outputs[0];
    const ValueId c = g.op(g.add_op("si", OpKind::kSilu, NoAttrs{}, {b})).outputs[0];
    BinaryAttrs div;
    div.op = BinaryOp::kDiv;
    div.constant = {6, 1, 1};
    div.constant_first = true;
    div.activation = Activation::kHardSwish;
    const ValueId d = g.op(g.add_op("div", OpKind::kBinary, div, {c})).outputs[0];
    BinaryAttrs mul;
    mul.op = BinaryOp::kMul;
    const ValueId gap = g.op(g.add_op("gap", OpKind::kGlobalMaxPool, NoAttrs{}, {d})).outputs[0];
    const ValueId e = g.op(g.add_op("mul", OpKind::kBinary, mul, {d, gap})).outputs[0];
    ChannelShuffleAttrs sh;
    sh.groups = 3;
    const ValueId f = g.op(g.add_op("shuffle", OpKind::kChannelShuffle, sh, {e})).outputs[0];
    ReshapeAttrs r;
    r.dims = {150};
    const ValueId out = g.op(g.add_op("flat", OpKind::kReshape, r, {f})).outputs[0];
    g.add_output(out);
    return g;
  }
};

class NetworkRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(NetworkRoundTrip, WriteReadWriteIsByteIdentical) {
  networks::NetworkOptions options;
  options.batch = 2;
  const Graph raw = networks::build_network(GetParam(), options);
  for (const Graph& g : {raw, prepare_for_inference(raw)}) {
    const std::string first = graph_to_yaml(g);
    const Graph back = graph_from_yaml(first, GetParam());
    expect_same_graph(g, back);
    EXPECT_EQ(back.name(), g.name());
    EXPECT_EQ(graph_to_yaml(back), first);
  }
}

TEST(GraphYaml, ModernOpKindsRoundTrip) {
  // Hard sigmoid (custom slope), hard swish, SiLU, binary ops with constants (constant_first,
  // lower-rank constants), reshapes, channel shuffle, global max pool: byte-identical round trip.
  NetBuilderForYaml b;
  const Graph g = b.graph();
  const std::string first = graph_to_yaml(g);
  const Graph back = graph_from_yaml(first, "modern.yaml");
  expect_same_graph(g, back);
  EXPECT_EQ(graph_to_yaml(back), first);
  EXPECT_NE(first.find("op: div"), std::string::npos) << first;
  EXPECT_NE(first.find("constant_first: true"), std::string::npos);
  EXPECT_NE(first.find("kind: channel_shuffle"), std::string::npos);
  // A bad binary operation name is a clear error naming the known ones.
  std::string bad = first;
  bad.replace(bad.find("op: div"), 7, "op: exp");
  try {
    graph_from_yaml(bad, "modern.yaml");
    FAIL() << "an unknown binary operation was accepted";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown binary operation 'exp' (known: add, sub, mul, div, pow, max, min, mod, equal, less, less_equal, greater, greater_equal, and, or, xor)"),
              std::string::npos) << e.what();
  }
}

std::vector<std::string> all_network_names() {
  std::vector<std::string> names;
  for (const auto& info : networks::network_registry()) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllNetworks, NetworkRoundTrip, ::testing::ValuesIn(all_network_names()),
                         [](const auto& param_info) { return param_info.param; });

constexpr const char* kHeader = R"(format: stagecraft-graph
version: 1
name: t
inputs:
  - {name: x, shape: [1, 4, 8, 8], dtype: f32}
)";

// The FormatError/GraphError message for a file body after the header.
std::string error_for(const std::string& body) {
  try {
    graph_from_yaml(std::string(kHeader) + body, "t.yaml");
  } catch (const GraphError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(GraphYaml, OpsInAnyOrderAreSortedAndRoundTripKeepsFileOrder) {
  const Graph g = graph_from_yaml(std::string(kHeader) + R"(ops:
  - {name: b, kind: relu, inputs: [a]}
  - {name: a, kind: conv2d, inputs: [x], in_channels: 4, out_channels: 2, kernel: [1, 3], padding: [0, 1]}
outputs: [b]
)");
  EXPECT_EQ(g.op(0).name, "a");
  EXPECT_EQ(g.value(g.outputs()[0]).desc.shape, (Shape{1, 2, 8, 8}));
  const auto& conv = g.op(0).attrs_as<Conv2dAttrs>();
  EXPECT_EQ(conv.kernel, (Hw{1, 3}));
  EXPECT_EQ(conv.padding, (Pads{0, 1, 0, 1}));
}

TEST(GraphYaml, CycleIsReportedWithItsOps) {
  const std::string m = error_for(R"(ops:
  - {name: a, kind: relu, inputs: [c]}
  - {name: b, kind: relu, inputs: [a]}
  - {name: c, kind: add, inputs: [b, x]}
outputs: [c]
)");
  expect_mentions(m, {"t.yaml:", "the graph has a cycle: "});
  for (const char* op : {"a", "b", "c"}) EXPECT_NE(m.find(op), std::string::npos) << m;
}

TEST(GraphYaml, DanglingInputNamesOpAndValue) {
  const std::string m = error_for(R"(ops:
  - {name: a, kind: relu, inputs: [nope]}
outputs: [a]
)");
  expect_mentions(m, {"t.yaml:7:", "op 'a' (relu): input 'nope' is dangling"});
}

TEST(GraphYaml, ShapeMismatchNamesOpWithLine) {
  std::string m = error_for(R"(ops:
  - {name: a, kind: relu, inputs: [x]}
  - {name: p, kind: max_pool, inputs: [x], kernel: 2, stride: 2}
  - {name: cat, kind: concat, inputs: [a, p]}
outputs: [cat]
)");
  EXPECT_NE(m.find("t.yaml:9:"), std::string::npos) << m;
  EXPECT_NE(m.find("op 'cat' (concat): input 1 is 1x4x4x4 but input 0 is 1x4x8x8"),
            std::string::npos)
      << m;
  m = error_for(R"(ops:
  - {name: c, kind: conv2d, inputs: [x], in_channels: 3, out_channels: 2, kernel: 1}
outputs: [c]
)");
  EXPECT_NE(m.find("input has 4 channels but in_channels is 3"), std::string::npos) << m;
  m = error_for(R"(ops:
  - {name: a, kind: relu, inputs: [x], shape: [1, 4, 8, 9]}
outputs: [a]
)");
  EXPECT_NE(m.find("declared shape 1x4x8x9 does not match the inferred shape 1x4x8x8"),
            std::string::npos)
      << m;
}

TEST(GraphYaml, UnknownKindAndAttributeSuggestTheClosest) {
  std::string m = error_for(R"(ops:
  - {name: a, kind: conv2, inputs: [x]}
outputs: [a]
)");
  EXPECT_NE(m.find("op 'a': unknown op kind 'conv2' (did you mean 'conv2d'?)"), std::string::npos)
      << m;
  m = error_for(R"(ops:
  - {name: a, kind: conv2d, inputs: [x], in_channels: 4, out_channels: 2, kernal: 3}
outputs: [a]
)");
  EXPECT_NE(m.find("op 'a' (conv2d): unknown attribute 'kernal' (did you mean 'kernel'?)"),
            std::string::npos)
      << m;
  m = error_for(R"(ops:
  - {name: a, kind: relu, inputs: [x], slope: 2}
outputs: [a]
)");
  EXPECT_NE(m.find("relu takes no attributes"), std::string::npos) << m;
}

TEST(GraphYaml, UnaryFunctionsRoundTripAndAnUnknownOneIsNamed) {
  const Graph g = graph_from_yaml(std::string(kHeader) + R"(ops:
  - {name: a, kind: unary, inputs: [x], fn: selu, alpha: 1.5, beta: 2.25}
  - {name: b, kind: unary, inputs: [a], fn: erf}
outputs: [b]
)");
  const std::string text = graph_to_yaml(g);
  EXPECT_NE(text.find("fn: selu"), std::string::npos) << text;
  const Graph back = graph_from_yaml(text, "u.yaml");
  expect_same_graph(g, back);
  EXPECT_EQ(back.op(*back.find_op("a")).attrs_as<UnaryAttrs>().beta, 2.25);
  const std::string m = error_for(R"(ops:
  - {name: a, kind: unary, inputs: [x], fn: sinn}
outputs: [a]
)");
  expect_mentions(m, {"unknown unary function 'sinn'", "sinh"});
}

TEST(GraphYaml, MistypedAndMissingFields) {
  std::string m = error_for(R"(ops:
  - {name: a, kind: conv2d, inputs: [x], in_channels: four, out_channels: 2, kernel: 1}
outputs: [a]
)");
  EXPECT_NE(m.find("field 'in_channels' must be an integer, got 'four'"), std::string::npos) << m;
  m = error_for(R"(ops:
  - {name: a, kind: conv2d, inputs: [x], in_channels: 4, kernel: 1}
outputs: [a]
)");
  EXPECT_NE(m.find("missing required attribute 'out_channels'"), std::string::npos) << m;
  m = error_for(R"(ops:
  - {name: a, kind: max_pool, inputs: [x], kernel: 2, ceil_mode: maybe}
outputs: [a]
)");
  EXPECT_NE(m.find("must be true or false"), std::string::npos) << m;
  m = error_for(R"(ops:
  - {name: a, kind: conv2d, inputs: [x], in_channels: 4, out_channels: 4, kernel: 1, activation: swiglu}
outputs: [a]
)");
  EXPECT_NE(m.find("unknown activation 'swiglu'"), std::string::npos) << m;
  m = error_for(R"(ops:
  - {name: a, kind: relu, inputs: [x]}
outputs: [zzz]
)");
  EXPECT_NE(m.find("output 'zzz' is not a value of the graph"), std::string::npos) << m;
}

TEST(GraphYaml, MalformedFiles) {
  auto message = [](const std::string& text) -> std::string {
    try {
      graph_from_yaml(text, "bad.yaml");
    } catch (const FormatError& e) {
      return e.what();
    }
    return "<no FormatError>";
  };
  EXPECT_NE(message("ops: [ {name: a").find("bad.yaml:"), std::string::npos);
  EXPECT_NE(message("ops: [ {name: a").find("not valid"), std::string::npos);
  EXPECT_NE(message("- 1\n- 2\n").find("must be a YAML map"), std::string::npos);
  EXPECT_NE(message("format: other\nversion: 1\ninputs: []\nops: []\noutputs: []\n")
                .find("not a graph file"),
            std::string::npos);
  EXPECT_NE(message("format: stagecraft-graph\nversion: 9\ninputs: []\nops: []\noutputs: []\n")
                .find("unsupported graph file version"),
            std::string::npos);
  EXPECT_NE(message(std::string(kHeader) + "ops: {a: 1}\noutputs: []\n").find("must be a list"),
            std::string::npos);
  EXPECT_NE(message(std::string(kHeader) + "ops: []\noutputs: []\nextra: 1\n")
                .find("unknown top-level field 'extra'"),
            std::string::npos);
  EXPECT_NE(message(std::string(kHeader) + "ops:\n  - {name: a, kind: relu, inputs: [x], "
                                           "inputs: [x]}\noutputs: [a]\n")
                .find("bad.yaml:"),
            std::string::npos);
  EXPECT_NE(message(std::string(kHeader) + "ops:\n  - {? [a, b] : 1, name: a, kind: relu, "
                                           "inputs: [x]}\noutputs: [a]\n")
                .find("bad.yaml:"),
            std::string::npos);
}

TEST(GraphYaml, MissingFileIsAnIoError) {
  EXPECT_THROW(load_graph("/nonexistent/dir/graph.yaml"), IoError);
  const auto dir = std::filesystem::temp_directory_path() / "stagecraft_yaml_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "g.yaml").string();
  networks::NetworkOptions options;
  options.input_size = 64;
  const Graph g = networks::build_network("squeezenet1_1", options);
  save_graph(g, path);
  EXPECT_EQ(graph_to_yaml(load_graph(path)), graph_to_yaml(g));
  EXPECT_THROW(save_graph(g, (dir / "missing" / "g.yaml").string()), IoError);
}

}  // namespace
}  // namespace stagecraft::graph
