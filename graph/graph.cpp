#include "graph/graph.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <cassert>
#include <map>
#include <unordered_map>

#include "common/strings.h"
#include "graph/errors.h"
#include "graph/shape_inference.h"

namespace stagecraft::graph {

namespace {

// Vertex i is op i; one edge per (value, consuming op) pair, labelled with the value.
using Dag = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property,
                                  boost::property<boost::edge_name_t, ValueId>>;

void check_name(const std::string& name, const char* what) {
  if (name.empty()) throw GraphError(cat(what, " name must not be empty"));
  for (char c : name) {
    if (c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '#') {
      throw GraphError(cat(what, " name '", name,
                           "' must not contain ':', '#' or whitespace (':' separates output "
                           "indices, as in 'split:1')"));
    }
  }
}

}  // namespace

struct Graph::Impl {
  std::string name;
  Dag dag;
  std::vector<Op> ops;
  std::vector<Value> values;
  std::vector<std::vector<OpId>> consumers;  // per value
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<bool> is_output;  // per value
  std::unordered_map<std::string, OpId> op_by_name;
  std::unordered_map<std::string, ValueId> value_by_name;

  ValueId new_value(std::string value_name, TensorDesc desc, OpId producer, int index) {
    const auto id = static_cast<ValueId>(values.size());
    value_by_name.emplace(value_name, id);
    values.push_back(Value{id, std::move(value_name), std::move(desc), producer, index});
    consumers.emplace_back();
    is_output.push_back(false);
    return id;
  }
};

Graph::Graph(std::string name) : impl_(std::make_unique<Impl>()) { impl_->name = std::move(name); }
Graph::~Graph() = default;
Graph::Graph(const Graph& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Graph& Graph::operator=(const Graph& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Graph::Graph(Graph&& other) noexcept = default;
Graph& Graph::operator=(Graph&& other) noexcept = default;

const std::string& Graph::name() const { return impl_->name; }
void Graph::set_name(std::string name) { impl_->name = std::move(name); }

ValueId Graph::add_input(std::string name, TensorDesc desc) {
  check_name(name, "input");
  if (impl_->value_by_name.count(name) || impl_->op_by_name.count(name)) {
    throw GraphError(cat("input '", name, "': the name is already used"));
  }
  if (!layout_fits(desc.layout, desc.shape.rank())) {
    throw GraphError(cat("input '", name, "': layout ", to_string(desc.layout),
                         " does not fit shape ", desc.shape.to_string()));
  }
  for (int64_t d : desc.shape.dims()) {
    if (d < 1) throw GraphError(cat("input '", name, "': every dimension must be >= 1, got ",
                                    desc.shape.to_string()));
  }
  const ValueId id = impl_->new_value(name, std::move(desc), kNoOp, 0);
  impl_->inputs.push_back(id);
  return id;
}

OpId Graph::add_op(std::string name, OpKind kind, OpAttrs attrs, std::vector<ValueId> inputs) {
  check_name(name, "op");
  if (impl_->op_by_name.count(name) || impl_->value_by_name.count(name)) {
    throw GraphError(cat("op '", name, "': the name is already used"));
  }
  Op op;
  op.id = static_cast<OpId>(impl_->ops.size());
  op.name = std::move(name);
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.inputs = std::move(inputs);

  std::vector<TensorDesc> in_descs;
  for (ValueId v : op.inputs) {
    if (v < 0 || static_cast<size_t>(v) >= impl_->values.size()) {
      throw GraphError(cat("op '", op.name, "' (", to_string(kind), "): input value id ", v,
                           " does not exist"));
    }
    in_descs.push_back(impl_->values[v].desc);
  }
  std::vector<TensorDesc> out_descs = infer_output_descs(op, in_descs);  // may throw

  const auto vertex = boost::add_vertex(impl_->dag);
  assert(static_cast<OpId>(vertex) == op.id);
  (void)vertex;
  for (ValueId v : op.inputs) {
    auto& readers = impl_->consumers[v];
    if (std::find(readers.begin(), readers.end(), op.id) == readers.end()) readers.push_back(op.id);
    const OpId producer = impl_->values[v].producer;
    if (producer != kNoOp) boost::add_edge(producer, op.id, v, impl_->dag);
  }
  const bool single = out_descs.size() == 1;
  for (size_t i = 0; i < out_descs.size(); ++i) {
    std::string value_name = single ? op.name : cat(op.name, ":", i);
    op.outputs.push_back(
        impl_->new_value(std::move(value_name), std::move(out_descs[i]), op.id, static_cast<int>(i)));
  }
  impl_->op_by_name.emplace(op.name, op.id);
  impl_->ops.push_back(std::move(op));
  return impl_->ops.back().id;
}

void Graph::add_output(ValueId value) {
  if (value < 0 || static_cast<size_t>(value) >= impl_->values.size()) {
    throw GraphError(cat("graph '", impl_->name, "': output value id ", value, " does not exist"));
  }
  if (impl_->is_output[value]) return;
  impl_->is_output[value] = true;
  impl_->outputs.push_back(value);
}

void Graph::set_value_type(ValueId value, DataType dtype, float scale) {
  if (value < 0 || static_cast<size_t>(value) >= impl_->values.size()) {
    throw GraphError(cat("graph '", impl_->name, "': value id ", value, " does not exist"));
  }
  Value& v = impl_->values[value];
  if (v.producer == kNoOp) {
    throw GraphError(cat("value '", v.name, "' is a graph input: its type is given with the input"));
  }
  if (!impl_->consumers[value].empty()) {
    throw GraphError(cat("value '", v.name, "' already has readers: set its type before adding them"));
  }
  if (!(scale > 0.0f)) {
    throw GraphError(cat("value '", v.name, "': the quantisation scale must be > 0 (got ", scale, ")"));
  }
  v.desc.dtype = dtype;
  v.desc.scale = is_int8(dtype) ? scale : 1.0f;
}

OpId copy_op(Graph& dst, const Graph& src, OpId id, std::vector<ValueId> inputs) {
  const Op& op = src.op(id);
  const OpId copy = dst.add_op(op.name, op.kind, op.attrs, std::move(inputs));
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const TensorDesc& want = src.value(op.outputs[i]).desc;
    const ValueId v = dst.op(copy).outputs[i];
    const TensorDesc& have = dst.value(v).desc;
    if (have.dtype != want.dtype || have.scale != want.scale) {
      dst.set_value_type(v, want.dtype, want.scale);
    }
  }
  return copy;
}

Graph op_alone(const Graph& graph, OpId id, const std::vector<Layout>& input_layouts,
               const std::string& name) {
  const Op& op = graph.op(id);
  Graph alone(name);
  std::map<ValueId, ValueId> mapped;
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    auto it = mapped.find(op.inputs[i]);
    if (it == mapped.end()) {
      TensorDesc desc = graph.value(op.inputs[i]).desc;
      if (desc.shape.rank() == 4) desc.layout = input_layouts.at(i);
      it = mapped.emplace(op.inputs[i], alone.add_input(cat("in", mapped.size()), desc)).first;
    }
    inputs.push_back(it->second);
  }
  const OpId copy = copy_op(alone, graph, id, inputs);
  for (ValueId v : alone.op(copy).outputs) alone.add_output(v);
  return alone;
}

size_t Graph::num_ops() const { return impl_->ops.size(); }
size_t Graph::num_values() const { return impl_->values.size(); }
const Op& Graph::op(OpId id) const { return impl_->ops.at(id); }
const Value& Graph::value(ValueId id) const { return impl_->values.at(id); }
const std::vector<Op>& Graph::ops() const { return impl_->ops; }
const std::vector<ValueId>& Graph::inputs() const { return impl_->inputs; }
const std::vector<ValueId>& Graph::outputs() const { return impl_->outputs; }
bool Graph::is_output(ValueId value) const { return impl_->is_output.at(value); }

std::vector<TensorDesc> Graph::input_descs(OpId id) const {
  std::vector<TensorDesc> descs;
  for (ValueId v : op(id).inputs) descs.push_back(impl_->values[v].desc);
  return descs;
}

std::vector<TensorDesc> Graph::output_descs(OpId id) const {
  std::vector<TensorDesc> descs;
  for (ValueId v : op(id).outputs) descs.push_back(impl_->values[v].desc);
  return descs;
}

namespace {
// Sorted, without repeats (parallel edges: an op reading one value twice).
std::vector<OpId> sorted_unique(std::vector<OpId> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}
}  // namespace

std::vector<OpId> Graph::predecessors(OpId id) const {
  std::vector<OpId> result;
  for (auto [it, end] = boost::in_edges(id, impl_->dag); it != end; ++it) {
    result.push_back(static_cast<OpId>(boost::source(*it, impl_->dag)));
  }
  return sorted_unique(std::move(result));
}

std::vector<OpId> Graph::successors(OpId id) const {
  std::vector<OpId> result;
  for (auto [it, end] = boost::out_edges(id, impl_->dag); it != end; ++it) {
    result.push_back(static_cast<OpId>(boost::target(*it, impl_->dag)));
  }
  return sorted_unique(std::move(result));
}

const std::vector<OpId>& Graph::consumers(ValueId value) const {
  return impl_->consumers.at(value);
}

std::vector<OpId> Graph::topological_order() const {
  std::vector<OpId> order(impl_->ops.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<OpId>(i);
#ifndef NDEBUG
  // Insertion order is topological by construction; Boost agrees that the DAG has no cycle.
  std::vector<Dag::vertex_descriptor> reversed;
  boost::topological_sort(impl_->dag, std::back_inserter(reversed));
#endif
  return order;
}

std::optional<OpId> Graph::find_op(std::string_view name) const {
  auto it = impl_->op_by_name.find(std::string(name));
  if (it == impl_->op_by_name.end()) return std::nullopt;
  return it->second;
}

std::string Graph::unused_name(std::string base, std::string_view tag, int* counter) const {
  std::replace(base.begin(), base.end(), ':', '.');
  std::string name;
  do {
    name = cat(base, ".", tag, (*counter)++);
  } while (find_op(name) || find_value(name));
  return name;
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  auto it = impl_->value_by_name.find(std::string(name));
  if (it == impl_->value_by_name.end()) return std::nullopt;
  return it->second;
}

int64_t total_macs(const Graph& graph) {
  int64_t total = 0;
  for (const Op& op : graph.ops()) {
    total += op_macs(op, graph.input_descs(op.id), graph.output_descs(op.id));
  }
  return total;
}

int64_t total_params(const Graph& graph) {
  int64_t total = 0;
  for (const Op& op : graph.ops()) total += op_params(op, graph.input_descs(op.id));
  return total;
}

size_t count_ops(const Graph& graph, OpKind kind) {
  return static_cast<size_t>(std::count_if(graph.ops().begin(), graph.ops().end(),
                                           [kind](const Op& op) { return op.kind == kind; }));
}

SubgraphView::SubgraphView(const Graph& graph, std::vector<OpId> ops)
    : graph_(&graph), ops_(std::move(ops)), local_(graph.num_ops(), -1) {
  std::sort(ops_.begin(), ops_.end());
  ops_.erase(std::unique(ops_.begin(), ops_.end()), ops_.end());
  for (size_t i = 0; i < ops_.size(); ++i) {
    assert(ops_[i] >= 0 && static_cast<size_t>(ops_[i]) < graph.num_ops());
    local_[ops_[i]] = static_cast<int>(i);
  }
}

int SubgraphView::local_index(OpId id) const {
  if (id < 0 || static_cast<size_t>(id) >= local_.size()) return -1;
  return local_[id];
}

std::vector<OpId> SubgraphView::predecessors(OpId id) const {
  std::vector<OpId> result = graph_->predecessors(id);
  std::erase_if(result, [this](OpId p) { return !contains(p); });
  return result;
}

std::vector<OpId> SubgraphView::successors(OpId id) const {
  std::vector<OpId> result = graph_->successors(id);
  std::erase_if(result, [this](OpId s) { return !contains(s); });
  return result;
}

std::vector<ValueId> SubgraphView::entry_values() const {
  std::vector<ValueId> result;
  for (OpId id : ops_) {
    for (ValueId v : graph_->op(id).inputs) {
      const OpId producer = graph_->value(v).producer;
      if (producer == kNoOp || !contains(producer)) result.push_back(v);
    }
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

std::vector<ValueId> SubgraphView::exit_values() const {
  std::vector<ValueId> result;
  for (OpId id : ops_) {
    for (ValueId v : graph_->op(id).outputs) {
      const auto& readers = graph_->consumers(v);
      const bool read_outside = std::any_of(readers.begin(), readers.end(),
                                            [this](OpId r) { return !contains(r); });
      if (read_outside || graph_->is_output(v)) result.push_back(v);
    }
  }
  return result;  // ops_ ascending and outputs ascending per op: already sorted
}

}  // namespace stagecraft::graph
