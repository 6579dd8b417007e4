// Graph API: construction, adjacency, consumers, subgraph views, and construction errors.
#include <gtest/gtest.h>

#include "graph/errors.h"
#include "graph/graph.h"
#include "networks/builder.h"
#include "tests/support/graph_ops.h"

namespace stagecraft::graph {
namespace {

using networks::NetBuilder;

// input -> a -> {b, c} -> cat ; c -> d ; outputs: cat, d
struct Diamond {
  Graph g;
  OpId a, b, c, cat, d;
  Diamond() {
    NetBuilder nb("diamond", 1, 4, 8, 8);
    ValueId va = nb.relu(nb.input(), "a");
    ValueId vb = nb.relu(va, "b");
    ValueId vc = nb.relu(va, "c");
    ValueId vcat = nb.concat({vb, vc}, "cat");
    ValueId vd = nb.relu(vc, "d");
    g = std::move(nb).finish({vcat, vd});
    std::tie(a, b, c, cat, d) = stagecraft::testing::op_ids(g, "a", "b", "c", "cat", "d");
  }
};

TEST(Graph, AdjacencyAndConsumers) {
  Diamond t;
  EXPECT_EQ(t.g.num_ops(), 5u);
  EXPECT_EQ(t.g.successors(t.a), (std::vector<OpId>{t.b, t.c}));
  EXPECT_EQ(t.g.predecessors(t.cat), (std::vector<OpId>{t.b, t.c}));
  EXPECT_EQ(t.g.successors(t.c), (std::vector<OpId>{t.cat, t.d}));
  EXPECT_TRUE(t.g.predecessors(t.a).empty());
  EXPECT_EQ(t.g.consumers(t.g.op(t.a).outputs[0]), (std::vector<OpId>{t.b, t.c}));
  EXPECT_EQ(t.g.outputs().size(), 2u);
  EXPECT_TRUE(t.g.is_output(t.g.op(t.d).outputs[0]));
  EXPECT_EQ(t.g.value(t.g.op(t.cat).outputs[0]).desc.shape, (Shape{1, 8, 8, 8}));
}

TEST(Graph, TopologicalOrderRespectsEveryEdge) {
  Diamond t;
  const auto order = t.g.topological_order();
  std::vector<int> position(order.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  for (const Op& op : t.g.ops())
    for (OpId s : t.g.successors(op.id)) EXPECT_LT(position[op.id], position[s]);
}

TEST(Graph, ReadingTheSameValueTwiceIsOneEdge) {
  NetBuilder nb("twice", 1, 2, 4, 4);
  ValueId x = nb.relu(nb.input(), "x");
  ValueId y = nb.add({x, x}, "y");
  Graph g = std::move(nb).finish({y});
  EXPECT_EQ(g.predecessors(*g.find_op("y")), (std::vector<OpId>{*g.find_op("x")}));
  EXPECT_EQ(g.consumers(g.op(*g.find_op("x")).outputs[0]).size(), 1u);
}

TEST(Graph, MultiOutputValuesAreNamedByIndex) {
  NetBuilder nb("split", 1, 8, 4, 4);
  auto parts = nb.split(nb.input(), {3, 5}, "s");
  Graph g = std::move(nb).finish(parts);
  EXPECT_EQ(g.value(parts[1]).name, "s:1");
  EXPECT_EQ(g.find_value("s:0"), parts[0]);
  EXPECT_EQ(g.value(parts[1]).output_index, 1);
}

TEST(Graph, SubgraphViewInducedEdgesAndBoundary) {
  Diamond t;
  SubgraphView view(t.g, {t.c, t.b, t.cat});
  EXPECT_EQ(view.ops(), (std::vector<OpId>{t.b, t.c, t.cat}));
  EXPECT_TRUE(view.contains(t.b));
  EXPECT_FALSE(view.contains(t.a));
  EXPECT_EQ(view.successors(t.c), (std::vector<OpId>{t.cat}));  // d is outside
  EXPECT_TRUE(view.predecessors(t.b).empty());                   // a is outside
  EXPECT_EQ(view.entry_values(), (std::vector<ValueId>{t.g.op(t.a).outputs[0]}));
  // c is read by d (outside) and cat is a graph output.
  EXPECT_EQ(view.exit_values(),
            (std::vector<ValueId>{t.g.op(t.c).outputs[0], t.g.op(t.cat).outputs[0]}));
}

TEST(Graph, CopyIsDeep) {
  Diamond t;
  Graph copy = t.g;
  NetBuilder unused("u", 1, 1, 1, 1);
  copy.add_op("e", OpKind::kRelu, NoAttrs{}, {copy.op(t.d).outputs[0]});
  EXPECT_EQ(copy.num_ops(), 6u);
  EXPECT_EQ(t.g.num_ops(), 5u);
  EXPECT_EQ(t.g.successors(t.d).size(), 0u);
}

TEST(Graph, ConstructionErrorsNameTheCulprit) {
  Graph g("bad");
  ValueId x = g.add_input("x", make_desc(Shape{1, 3, 8, 8}));
  g.add_op("r", OpKind::kRelu, NoAttrs{}, {x});
  auto message_of = [&](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const GraphError& e) {
      return e.what();
    }
    return "<no error>";
  };
  EXPECT_NE(message_of([&] { g.add_op("r", OpKind::kRelu, NoAttrs{}, {x}); })
                .find("op 'r': the name is already used"),
            std::string::npos);
  EXPECT_NE(message_of([&] { g.add_op("q", OpKind::kRelu, NoAttrs{}, {42}); })
                .find("op 'q' (relu): input value id 42 does not exist"),
            std::string::npos);
  EXPECT_NE(message_of([&] { g.add_op("a:b", OpKind::kRelu, NoAttrs{}, {x}); }).find("':'"),
            std::string::npos);
  EXPECT_NE(message_of([&] { g.add_input("y", make_desc(Shape{1, 0, 8, 8})); }).find(">= 1"),
            std::string::npos);
  TensorDesc wrong = make_desc(Shape{1, 3});
  wrong.layout = Layout::kNHWC;
  EXPECT_NE(message_of([&] { g.add_input("z", wrong); }).find("does not fit"), std::string::npos);
  // A failed add leaves the graph unchanged.
  EXPECT_EQ(g.num_ops(), 1u);
  EXPECT_EQ(g.num_values(), 2u);
}

TEST(Graph, TensorDescBytesPadBlockedChannels) {
  TensorDesc d{Shape{1, 3, 2, 2}, DataType::kF32, Layout::kNCHW};
  EXPECT_EQ(d.bytes(), 48);
  d.layout = Layout::kNChw8c;
  EXPECT_EQ(d.bytes(), 8 * 4 * 4);
  d.dtype = DataType::kI8;
  d.layout = Layout::kNCHWVectC;
  EXPECT_EQ(d.bytes(), 4 * 4);
  EXPECT_EQ(parse_data_type("f16"), DataType::kF16);
  EXPECT_EQ(parse_layout("nChw16c"), Layout::kNChw16c);
  EXPECT_FALSE(parse_layout("nhcw").has_value());
}

}  // namespace
}  // namespace stagecraft::graph
