// The ONNX importer's FlexAttention (domain ai.onnx.preview, version 1): attention over rank-4
// Q [B, Hq, Lq, d], K [B, Hkv, Lk, d], V [B, Hkv, Lk, dv] whose scores and probabilities pass
// through the model's own subgraphs:
//   scores = (Q · √scale) · (K · √scale)ᵀ; scores = score_mod(scores); probs = softmax(scores)
//   over the last axis; probs = prob_mod(probs); Y = probs · V
// (the √scale on each side as ONNX's function body). Grouped queries: query head h reads K / V
// head h / (Hq / Hkv). Each modifier is copied into the graph with its values renamed (the values
// it reads from around the node keep their names), its initializers made constants: a causal
// mask or relative-position bias written with Shape, Range and Where folds at load.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"

namespace stagecraft::graph::onnx_import {

std::string Importer::inline_modifier(const onnx::NodeProto& node, Expansion& e, const char* name, const std::string& x) {
  const onnx::AttributeProto* attr = attribute(node, name);
  if (!attr) return x;
  if (!attr->has_g()) fail(node, cat(name, " must be a graph"));
  const onnx::GraphProto& g = attr->g();
  if (g.input_size() != 1 || g.output_size() != 1) {
    fail(node, cat(name, " must take one tensor and give one, got ", g.input_size(), " inputs and ", g.output_size(), " outputs"));
  }
  const std::string prefix = cat(node_name(node), "/", name);
  std::map<std::string, std::string> names = {{g.input(0).name(), x}};
  for (const auto& init : g.initializer()) {
    std::string why;
    auto t = from_proto(init, &why, &external_);
    if (!t) fail(node, cat(name, " initializer '", init.name(), "': ", why));
    names[init.name()] = e.fresh(cat(prefix, "/", init.name()));
    constants_[names[init.name()]] = std::move(*t);
  }
  for (const auto& n : g.node()) {
    for (const auto& out : n.output()) {
      if (!out.empty()) names[out] = e.fresh(cat(prefix, "/", out));
    }
  }
  onnx::GraphProto copy = g;
  rename_values(copy, names);
  for (auto& n : *copy.mutable_node()) {
    n.set_name(cat(prefix, "/", node_name(n)));
    for (auto& out : *n.mutable_output()) {
      if (!out.empty()) out = names.at(out);
    }
    e.node(n);
  }
  return copy.output(0).name();
}

void Importer::expand_flex_attention(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  for (int slot = 0; slot < 3; ++slot) {
    if (!has_input(node, slot)) fail(node, cat("input ", slot, " (Q, K, V) is missing"));
    if (dims_at(node, slot).size() != 4) fail(node, cat("input ", slot, " must have rank 4 [B, heads, L, d]"));
  }
  if (const int64_t precision = attr_int(node, "softmax_precision", onnx::TensorProto::FLOAT);
      precision != onnx::TensorProto::FLOAT) {
    fail(node, cat("softmax_precision ", precision, " is not supported (float, 1, only)"));
  }
  for (const std::string& name : outer_reads(node)) --readers_[name];  // read by the copies instead
  const std::vector<int64_t>& q = in.dims;
  const std::vector<int64_t> k = dims_at(node, 1), v = dims_at(node, 2);
  if (k[0] != q[0] || v[0] != q[0] || k[3] != q[3] || v[1] != k[1] || v[2] != k[2]) {
    fail(node, cat("Q ", Shape(q).to_string(), ", K ", Shape(k).to_string(), " and V ", Shape(v).to_string(),
                   " do not fit [B, Hq, Lq, d], [B, Hkv, Lk, d], [B, Hkv, Lk, dv]"));
  }
  const int64_t q_heads = q[1], kv_heads = k[1];
  if (q_heads % kv_heads != 0) fail(node, cat(q_heads, " query heads are not a multiple of ", kv_heads, " key heads"));
  std::string ks = node.input(1), vs = node.input(2);
  if (q_heads != kv_heads) {  // each K and V head repeated for its group of query heads
    ks = e.repeat_heads(ks, k, q_heads);
    vs = e.repeat_heads(vs, v, q_heads);
  }
  const float scale = attr_float(node, "scale", 1.0f / std::sqrt(static_cast<float>(q[3])));
  std::string scores = e.scaled_scores(node.input(0), ks, scale);
  scores = inline_modifier(node, e, "score_mod", scores);
  std::string probs = e.op("Softmax", {scores}, {int_attr("axis", 3)});
  probs = inline_modifier(node, e, "prob_mod", probs);
  e.op("MatMul", {probs, vs}, {}, output_of(node, 0));
}

}  // namespace stagecraft::graph::onnx_import
