#pragma once
/// The graph IR: ops connected by values, stored on a Boost.Graph adjacency_list that stays private
/// to this library. Ops are added after the values they read exist, so op ids are a topological
/// order and a Graph is acyclic by construction; loaders that accept ops in any order detect cycles
/// and dangling inputs before adding ops (see yaml_io.h).
///
/// Example:
///   Graph g("tiny");
///   ValueId x = g.add_input("x", make_desc(Shape{1, 3, 32, 32}));
///   Conv2dAttrs c; c.in_channels = 3; c.out_channels = 8; c.kernel = Hw::square(3);
///   OpId conv = g.add_op("conv", OpKind::kConv2d, c, {x});
///   OpId relu = g.add_op("relu", OpKind::kRelu, NoAttrs{}, {g.op(conv).outputs[0]});
///   g.add_output(g.op(relu).outputs[0]);

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/op.h"

namespace stagecraft::graph {

/// A directed acyclic graph of ops. Copyable (deep copy) and movable.
class Graph {
 public:
  /// An empty graph with a name (used in files and reports).
  explicit Graph(std::string name = "graph");
  ~Graph();
  Graph(const Graph& other);
  Graph& operator=(const Graph& other);
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;

  /// The graph's name.
  const std::string& name() const;
  /// Renames the graph.
  void set_name(std::string name);

  /// Adds a graph input value. Throws GraphError on an empty, duplicate or malformed name, or a
  /// layout that does not fit the shape's rank.
  ValueId add_input(std::string name, TensorDesc desc);

  /// Adds an op reading `inputs` (existing values), infers its output descriptors and returns
  /// its id. Throws GraphError (duplicate name, unknown input id, wrong input count, attributes of
  /// another kind) or ShapeError (attributes do not fit the inputs). On error nothing is added.
  OpId add_op(std::string name, OpKind kind, OpAttrs attrs, std::vector<ValueId> inputs);

  /// Marks a value as a graph output (once; order is kept).
  void add_output(ValueId value);

  /// Sets the element type and quantisation scale of an op's output (the quantiser's way to say
  /// what a kernel writes). Only before the value has readers, since their shapes were inferred
  /// from it. Throws GraphError for a graph input, a value with readers, or a scale <= 0.
  void set_value_type(ValueId value, DataType dtype, float scale);

  /// Number of ops.
  size_t num_ops() const;
  /// Number of values (graph inputs and op outputs).
  size_t num_values() const;
  /// Op by id.
  const Op& op(OpId id) const;
  /// Value by id.
  const Value& value(ValueId id) const;
  /// All ops, indexed by id.
  const std::vector<Op>& ops() const;
  /// Graph input values, in order.
  const std::vector<ValueId>& inputs() const;
  /// Graph output values, in order.
  const std::vector<ValueId>& outputs() const;
  /// Whether a value is a graph output.
  bool is_output(ValueId value) const;

  /// Descriptors of an op's inputs, in slot order.
  std::vector<TensorDesc> input_descs(OpId id) const;
  /// Descriptors of an op's outputs.
  std::vector<TensorDesc> output_descs(OpId id) const;

  /// Distinct ops producing this op's inputs, ascending.
  std::vector<OpId> predecessors(OpId id) const;
  /// Distinct ops reading this op's outputs, ascending.
  std::vector<OpId> successors(OpId id) const;
  /// Ops reading a value (each once), ascending.
  const std::vector<OpId>& consumers(ValueId value) const;

  /// A topological order of all ops (insertion order, which is one).
  std::vector<OpId> topological_order() const;

  /// Op with this name, if any.
  std::optional<OpId> find_op(std::string_view name) const;
  /// Value with this name ("op", "op:1" or an input name), if any.
  std::optional<ValueId> find_value(std::string_view name) const;
  /// A name no op or value has yet: "<base>.<tag><n>" for the first n >= `*counter` free, with
  /// ':' in `base` made '.'; `*counter` moves past it (conversion ops inserted by a pass).
  std::string unused_name(std::string base, std::string_view tag, int* counter) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Adds to `dst` a copy of op `id` of `src` (name, kind, attributes) reading `inputs` (values
/// of `dst`), with the element types and scales `src` gave its outputs; returns the new op's id.
OpId copy_op(Graph& dst, const Graph& src, OpId id, std::vector<ValueId> inputs);

/// Op `id` of `graph` alone in a graph named `name`: each distinct value it reads a graph input
/// (rank-4 ones in `input_layouts[slot]` of the first slot reading them), its outputs the outputs.
Graph op_alone(const Graph& graph, OpId id, const std::vector<Layout>& input_layouts,
               const std::string& name = "op");

/// Multiply-accumulates of the whole graph (convolutions and linear layers).
int64_t total_macs(const Graph& graph);
/// Learned parameters of the whole graph.
int64_t total_params(const Graph& graph);
/// Number of ops of one kind.
size_t count_ops(const Graph& graph, OpKind kind);

/// A non-owning view of a subset of a graph's ops, with induced edges. The graph must outlive it.
///
/// Example:
///   SubgraphView block(g, {3, 4, 5});
///   for (OpId id : block.ops()) for (OpId s : block.successors(id)) ...
class SubgraphView {
 public:
  /// A view of `ops` (any order, duplicates ignored) of `graph`.
  SubgraphView(const Graph& graph, std::vector<OpId> ops);

  /// The underlying graph.
  const Graph& graph() const { return *graph_; }
  /// The ops, ascending (a topological order).
  const std::vector<OpId>& ops() const { return ops_; }
  /// Number of ops.
  size_t size() const { return ops_.size(); }
  /// Whether the view contains an op.
  bool contains(OpId id) const { return local_index(id) >= 0; }
  /// Position of an op in `ops()`, or -1.
  int local_index(OpId id) const;
  /// Predecessors of an op inside the view.
  std::vector<OpId> predecessors(OpId id) const;
  /// Successors of an op inside the view.
  std::vector<OpId> successors(OpId id) const;
  /// Values read by ops of the view but produced outside it (graph inputs included), ascending.
  std::vector<ValueId> entry_values() const;
  /// Values produced inside and read outside the view or marked as graph outputs, ascending.
  std::vector<ValueId> exit_values() const;

 private:
  const Graph* graph_;
  std::vector<OpId> ops_;
  std::vector<int> local_;  // op id -> position in ops_, -1 when absent
};

}  // namespace stagecraft::graph
