#pragma once
// Internal to frontend/onnx/: Importer::Expansion, the nodes one ONNX node is written as (its
// expansions: onnx_import_expansions.cpp, the recurrent layers: onnx_import_recurrent.cpp).
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/onnx_patterns.h"

namespace stagecraft::graph::onnx_import {

// Input 0 of a node being expanded: its rank and dimensions, and the shape [C, 1, ...] of a
// per-channel parameter broadcast over [N, C, ...].
struct Importer::ExpandedInput {
  size_t rank = 0;
  std::vector<int64_t> dims;
  std::vector<int64_t> per_channel;
};

// The attributes of the nodes an expansion writes, by type.
inline onnx::AttributeProto typed_attr(const char* name, onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(type);
  return a;
}
inline onnx::AttributeProto int_attr(const char* name, int64_t v) {
  onnx::AttributeProto a = typed_attr(name, onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}
inline onnx::AttributeProto ints_attr(const char* name, const std::vector<int64_t>& v) {
  onnx::AttributeProto a = typed_attr(name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}
inline onnx::AttributeProto float_attr(const char* name, float v) {
  onnx::AttributeProto a = typed_attr(name, onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}
inline onnx::AttributeProto string_attr(const char* name, const std::string& v) {
  onnx::AttributeProto a = typed_attr(name, onnx::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

// The name of the node's output `slot` ("" when it has none).
inline std::string output_of(const onnx::NodeProto& node, int slot) {
  return slot < node.output_size() ? node.output(slot) : std::string();
}

// The names of `g`'s values renamed by `names` (inputs of its nodes and of nested subgraphs that
// read a renamed value; outputs of its nodes): a subgraph copied into the graph (Scan's body,
// FlexAttention's modifiers).
inline void rename_values(onnx::GraphProto& g, const std::map<std::string, std::string>& names) {
  const auto renamed = [&](std::string* name) {
    if (auto it = names.find(*name); it != names.end()) *name = it->second;
  };
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input()) renamed(&in);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_values(*a.mutable_g(), names);
      for (auto& sub : *a.mutable_graphs()) rename_values(sub, names);
    }
  }
  for (auto& out : *g.mutable_output()) renamed(out.mutable_name());
}

// The axes from `axis` to the last of a tensor of `rank` dimensions.
inline std::vector<int64_t> trailing_axes(int64_t axis, size_t rank) {
  std::vector<int64_t> axes(rank - static_cast<size_t>(axis));
  std::iota(axes.begin(), axes.end(), axis);
  return axes;
}

// The nodes one node is written as: made in order (each reading earlier ones, the node's inputs
// and constants), then imported in that order once all exist, so that every reader is known
// when its producer is translated.
class Importer::Expansion {
 public:
  Expansion(Importer& im, const onnx::NodeProto& node) : im_(im), node_(node) {
    for (const auto& in : node.input()) {
      if (!in.empty()) --im_.readers_[in];  // read by the nodes below instead
    }
  }

  // A node of `type` reading `inputs` with `attrs`, writing `output` (a new name when empty).
  std::string op(const char* type, const std::vector<std::string>& inputs,
                 const std::vector<onnx::AttributeProto>& attrs = {}, std::string output = "") {
    auto n = std::make_unique<onnx::NodeProto>();
    n->set_op_type(type);
    n->set_name(cat(node_name(node_), "/", type, "_", nodes_.size()));
    if (output.empty()) output = fresh(cat(node_.output(0), "/", type, "_", nodes_.size()));
    for (const auto& in : inputs) {
      n->add_input(in);
      if (in.empty()) continue;
      ++im_.readers_[in];
      im_.reader_kinds_[in].insert(type);
      im_.reader_nodes_[in].push_back(n.get());
    }
    for (const auto& a : attrs) *n->add_attribute() = a;
    n->add_output(output);
    im_.produced_.insert(output);
    im_.producers_[output] = n.get();
    nodes_.push_back(n.get());
    im_.expanded_.push_back(std::move(n));
    return output;
  }

  // `base`, or base_2, base_3, ... where that name is taken (an expansion within an expansion
  // names its values after the same output).
  std::string fresh(const std::string& base) const {
    std::string name = base;
    for (int i = 2; im_.produced_.count(name) || im_.constants_.count(name) || im_.values_.count(name); ++i) {
      name = cat(base, "_", i);
    }
    return name;
  }

  // A node given whole (its inputs and outputs already named: a copy of a subgraph's node),
  // imported with the others.
  void node(const onnx::NodeProto& given) {
    auto n = std::make_unique<onnx::NodeProto>(given);
    for (const auto& in : n->input()) {
      if (in.empty()) continue;
      ++im_.readers_[in];
      im_.reader_kinds_[in].insert(n->op_type());
      im_.reader_nodes_[in].push_back(n.get());
    }
    for (const std::string& name : outer_reads(*n)) ++im_.readers_[name];
    for (const auto& out : n->output()) {
      if (out.empty()) continue;
      im_.produced_.insert(out);
      im_.producers_[out] = n.get();
    }
    nodes_.push_back(n.get());
    im_.expanded_.push_back(std::move(n));
  }
  // A slice [begin, begin + 1) of `axis`, the axis removed.
  std::string element(const std::string& x, int64_t axis, int64_t at) {
    // (Slice-10's inputs at any opset: the translations read them where a node has them.)
    return unsqueeze("Squeeze", op("Slice", {x, ints({at}), ints({at + 1}), ints({axis})}), {axis});
  }

  // A constant: int64 values of `dims` (1-D when empty), or one float.
  std::string ints(const std::vector<int64_t>& values) {
    const std::string name = fresh(cat(node_.output(0), "/ints_", constants_++));
    im_.constants_[name] = ConstTensor::of_ints(values, {static_cast<int64_t>(values.size())});
    return name;
  }
  std::string floats(const std::vector<float>& values, const std::vector<int64_t>& dims) {
    const std::string name = fresh(cat(node_.output(0), "/floats_", constants_++));
    im_.constants_[name] = ConstTensor::of_floats(values, dims);
    return name;
  }
  std::string scalar(float value) {
    const std::string name = fresh(cat(node_.output(0), "/scalar_", constants_++));
    im_.constants_[name] = ConstTensor::of_floats({value}, {});
    return name;
  }

  // Mean or sum over `axes`, the reduced dimensions kept (axes an input from the opset that made
  // them one).
  std::string reduce(const char* type, const std::string& x, const std::vector<int64_t>& axes,
                     const std::string& output = "") {
    const bool input = reduce_axes_are_input(type, im_.opset_);
    if (input) return op(type, {x, ints(axes)}, {int_attr("keepdims", 1)}, output);
    return op(type, {x}, {ints_attr("axes", axes), int_attr("keepdims", 1)}, output);
  }
  std::string unsqueeze(const char* type, const std::string& x, const std::vector<int64_t>& axes,
                        const std::string& output = "") {
    if (im_.opset_ >= 13) return op(type, {x, ints(axes)}, {}, output);
    return op(type, {x}, {ints_attr("axes", axes)}, output);
  }
  std::string reshape(const std::string& x, const std::vector<int64_t>& dims, const std::string& output = "") {
    return op("Reshape", {x, ints(dims)}, {}, output);
  }

  // (x - mean) / sqrt(var + eps) over `axes`: the normalised tensor; the mean and 1 / sqrt(var +
  // eps) under the names given (none when empty).
  std::string normalised(const std::string& x, const std::vector<int64_t>& axes, float eps,
                         const std::string& mean_out = "", const std::string& inv_out = "") {
    const std::string mean = reduce("ReduceMean", x, axes, mean_out);
    const std::string d = op("Sub", {x, mean});
    const std::string var = reduce("ReduceMean", op("Mul", {d, d}), axes);
    const std::string inv = op("Reciprocal", {op("Sqrt", {op("Add", {var, scalar(eps)})})}, {}, inv_out);
    return op("Mul", {d, inv});
  }

  // K or V [B, Hkv, L, D] (`d`) with each head repeated for its group of `heads` query heads, in
  // place (grouped-query attention).
  std::string repeat_heads(const std::string& x, const std::vector<int64_t>& d, int64_t heads) {
    const int64_t reps = heads / d[1];
    const std::string wide = op("Expand", {reshape(x, {d[0], d[1], 1, d[2], d[3]}), ints({d[0], d[1], reps, d[2], d[3]})});
    return reshape(wide, {d[0], heads, d[2], d[3]});
  }
  // The attention scores (Q · √scale) · (K · √scale)ᵀ of [B, H, S, D] and [B, H, L, D], the
  // √scale on each side as ONNX's definitions of Attention and FlexAttention.
  std::string scaled_scores(const std::string& q, const std::string& k, float scale) {
    const std::string root = scalar(std::sqrt(scale));
    const std::string kt = op("Transpose", {op("Mul", {k, root})}, {ints_attr("perm", {0, 1, 3, 2})});
    return op("MatMul", {op("Mul", {q, root}), kt});
  }

  // Imports the nodes made.
  void finish() {
    for (const onnx::NodeProto* n : nodes_) im_.import_node(*n);
  }

 private:
  Importer& im_;
  const onnx::NodeProto& node_;
  std::vector<const onnx::NodeProto*> nodes_;
  int constants_ = 0;
};

}  // namespace stagecraft::graph::onnx_import
