// Recurrences over a sequence, unrolled (onnx_import_recurrent.cpp has RNN, GRU and LSTM).
//
// Scan unrolled over its sequence (the length is known once the input shapes are): iteration t
// slices element t (or T-1-t, reversed) of every scan input along its axis, imports a copy of the
// body whose values are renamed for that iteration (the values it reads from the graph around it
// keep their names), and hands the body's state outputs to the next iteration; each scan output
// is the iterations' outputs stacked along its axis (prepended when reversed). The body's ops are
// translated like any others, so a body of the supported ops runs as they do: right for the short
// sequences of the models that use it (a linear attention's tokens); a long sequence is slow to
// plan (about one copy of the body per element).
//
// LinearAttention (opset 27) as its definition's recurrence, one step per token: the state S of
// each key / value head [d_k, d_v] decays by exp(g_t) (gated rules), the value is corrected by
// β_t (v_t - Sᵀ k_t) (delta rules), k_t ⊗ v_t is added, and each query head reads scale · q_tᵀ S
// from its key / value head (grouped-query attention: heads h·G .. h·G + G-1 share head h).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"
#include "frontend/onnx/onnx_versions.h"

namespace stagecraft::graph::onnx_import {

void Importer::scan_batched(const onnx::NodeProto& node) {
  // Scan-8: input 0 the sequence lengths (optional), then the states and scan inputs, each with a
  // batch axis first and the sequence along axis 1 ("directions" per scan input). Each batch
  // element is a Scan of version 9 over its slices (scan_input_axes given, which marks it so);
  // the results are stacked along the batch.
  const int64_t scans = attr_int(node, "num_scan_inputs", 0);
  const int values = node.input_size() - 1;
  if (values < 1 || scans < 1 || scans > values) fail(node, cat("num_scan_inputs ", scans, " must be between 1 and the ", values, " tensors"));
  const int64_t batch = dims_at(node, 1)[0];
  for (int i = 1; i <= values; ++i) {
    if (dims_at(node, i).empty() || dims_at(node, i)[0] != batch) fail(node, cat("input ", i, " must have the batch (", batch, ") first"));
  }
  const int64_t steps = dims_at(node, values - static_cast<int>(scans) + 1).size() > 1 ? dims_at(node, values - static_cast<int>(scans) + 1)[1] : 0;
  if (has_input(node, 0)) {
    const std::vector<int64_t> lengths = constant_ints(node, 0, "sequence_lens");
    for (int64_t n : lengths) {
      if (n != steps) fail(node, cat("sequence_lens ", n, " differs from the sequence's ", steps, " elements (only full sequences are supported)"));
    }
  }
  std::vector<int64_t> directions = attr_ints(node, "directions");
  if (directions.empty()) directions.assign(static_cast<size_t>(scans), 0);
  Expansion e(*this, node);
  for (const std::string& name : outer_reads(node)) --readers_[name];  // read by the copies instead
  std::vector<std::vector<std::string>> outputs(static_cast<size_t>(node.output_size()));
  for (int64_t b = 0; b < batch; ++b) {
    onnx::NodeProto one;
    one.set_op_type("Scan");
    one.set_name(cat(node_name(node), "/batch_", b));
    for (int i = 1; i <= values; ++i) one.add_input(e.element(node.input(i), 0, b));
    for (const auto& a : node.attribute()) {
      if (a.name() != "directions") *one.add_attribute() = a;
    }
    *one.add_attribute() = ints_attr("scan_input_directions", directions);
    *one.add_attribute() = ints_attr("scan_input_axes", std::vector<int64_t>(static_cast<size_t>(scans), 0));
    for (int k = 0; k < node.output_size(); ++k) {
      const std::string out = node.output(k).empty() ? std::string() : e.fresh(cat(node.output(k), "/batch_", b));
      one.add_output(out);
      if (!out.empty()) outputs[static_cast<size_t>(k)].push_back(out);
    }
    e.node(one);
  }
  for (int k = 0; k < node.output_size(); ++k) {
    if (node.output(k).empty()) continue;
    std::vector<std::string> parts;
    for (const std::string& part : outputs[static_cast<size_t>(k)]) parts.push_back(e.unsqueeze("Unsqueeze", part, {0}));
    if (parts.size() == 1) {
      e.op("Identity", parts, {}, node.output(k));
    } else {
      e.op("Concat", parts, {int_attr("axis", 0)}, node.output(k));
    }
  }
  e.finish();
}

void Importer::scan(const onnx::NodeProto& node) {
  if (op_version("Scan", opset_) == 8 && !attribute(node, "scan_input_axes")) return scan_batched(node);
  const onnx::AttributeProto* body_attr = attribute(node, "body");
  if (!body_attr || !body_attr->has_g()) fail(node, "has no body graph");
  const onnx::GraphProto& body = body_attr->g();
  const int64_t scans = attr_int(node, "num_scan_inputs", 0);
  const int64_t states = node.input_size() - scans;
  const int64_t scan_outputs = body.output_size() - states;
  if (scans < 1 || states < 0) {
    fail(node, cat("num_scan_inputs ", scans, " must be between 1 and the ", node.input_size(), " inputs"));
  }
  if (body.input_size() != node.input_size() || scan_outputs < 0 || node.output_size() > body.output_size()) {
    fail(node, cat("the body takes ", body.input_size(), " inputs and gives ", body.output_size(),
                   " outputs: it must take the node's ", node.input_size(), " and give at least its ",
                   node.output_size()));
  }
  const auto per_input = [&](const char* name, int64_t count) {
    std::vector<int64_t> v = attr_ints(node, name);
    if (v.empty()) v.assign(static_cast<size_t>(count), 0);
    if (static_cast<int64_t>(v.size()) != count) fail(node, cat(name, " has ", v.size(), " values for ", count, " tensors"));
    return v;
  };
  const std::vector<int64_t> in_axes = per_input("scan_input_axes", scans);
  const std::vector<int64_t> in_reversed = per_input("scan_input_directions", scans);
  const std::vector<int64_t> out_axes = per_input("scan_output_axes", scan_outputs);
  const std::vector<int64_t> out_reversed = per_input("scan_output_directions", scan_outputs);

  // The sequence length: every scan input's extent along its axis.
  int64_t steps = -1;
  std::vector<int64_t> axes(static_cast<size_t>(scans));
  for (int64_t j = 0; j < scans; ++j) {
    const std::string& x = node.input(static_cast<int>(states + j));
    const std::vector<int64_t> dims = dims_at(node, static_cast<int>(states + j));
    const int64_t axis = axis_in(node, in_axes[static_cast<size_t>(j)], dims.size());
    axes[static_cast<size_t>(j)] = axis;
    const int64_t length = dims[static_cast<size_t>(axis)];
    if (steps >= 0 && length != steps) {
      fail(node, cat("scan input '", x, "' has ", length, " elements along axis ", axis, ", the first ", steps));
    }
    steps = length;
  }
  if (steps < 1) fail(node, "the sequence is empty");

  Expansion e(*this, node);
  for (const std::string& name : outer_reads(node)) --readers_[name];  // read by the copies instead
  const std::string prefix = cat(node_name(node), "/scan");
  // The body's initializers: constants under names of their own, shared by the iterations.
  std::map<std::string, std::string> shared;
  for (const auto& init : body.initializer()) {
    std::string why;
    auto t = from_proto(init, &why, &external_);
    if (!t) fail(node, cat("body initializer '", init.name(), "': ", why));
    const std::string name = cat(prefix, "/", init.name());
    constants_[name] = std::move(*t);
    shared[init.name()] = name;
  }
  std::vector<std::string> state(node.input().begin(), node.input().begin() + states);
  std::vector<std::vector<std::string>> outputs(static_cast<size_t>(scan_outputs));
  for (int64_t t = 0; t < steps; ++t) {
    std::map<std::string, std::string> names = shared;
    for (int64_t i = 0; i < states; ++i) names[body.input(static_cast<int>(i)).name()] = state[static_cast<size_t>(i)];
    for (int64_t j = 0; j < scans; ++j) {
      const int64_t at = in_reversed[static_cast<size_t>(j)] != 0 ? steps - 1 - t : t;
      names[body.input(static_cast<int>(states + j)).name()] =
          e.element(node.input(static_cast<int>(states + j)), axes[static_cast<size_t>(j)], at);
    }
    for (const auto& n : body.node()) {
      for (const auto& out : n.output()) {
        if (!out.empty()) names[out] = cat(prefix, t, "/", out);
      }
    }
    onnx::GraphProto copy = body;
    rename_values(copy, names);
    for (auto& n : *copy.mutable_node()) {
      n.set_name(cat(prefix, t, "/", node_name(n)));
      for (auto& out : *n.mutable_output()) {
        if (!out.empty()) out = names.at(out);
      }
      e.node(n);
    }
    for (int64_t i = 0; i < states; ++i) state[static_cast<size_t>(i)] = copy.output(static_cast<int>(i)).name();
    for (int64_t k = 0; k < scan_outputs; ++k) {
      outputs[static_cast<size_t>(k)].push_back(copy.output(static_cast<int>(states + k)).name());
    }
  }
  for (int64_t i = 0; i < states && i < node.output_size(); ++i) {
    if (!node.output(static_cast<int>(i)).empty()) e.op("Identity", {state[static_cast<size_t>(i)]}, {}, node.output(static_cast<int>(i)));
  }
  for (int64_t k = 0; k < scan_outputs && states + k < node.output_size(); ++k) {
    const std::string& out = node.output(static_cast<int>(states + k));
    if (out.empty()) continue;
    // Unsqueeze and Concat take an axis of the stacked tensor's rank, negative ones included.
    const int64_t axis = out_axes[static_cast<size_t>(k)];
    std::vector<std::string> parts;
    for (const std::string& part : outputs[static_cast<size_t>(k)]) parts.push_back(e.unsqueeze("Unsqueeze", part, {axis}));
    if (out_reversed[static_cast<size_t>(k)] != 0) std::reverse(parts.begin(), parts.end());
    e.op(parts.size() == 1 ? "Identity" : "Concat", parts, parts.size() == 1 ? std::vector<onnx::AttributeProto>{}
                                                                          : std::vector{int_attr("axis", axis)}, out);
  }
  e.finish();
}

void Importer::expand_linear_attention(const onnx::NodeProto& node, Expansion& e, const ExpandedInput&) {
  const std::string rule = attr_string(node, "update_rule").empty() ? "gated_delta" : attr_string(node, "update_rule");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta") {
    fail(node, cat("update_rule '", rule, "' is not one of linear, gated, delta, gated_delta"));
  }
  const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  const int64_t hq = attr_int(node, "q_num_heads", 0), hkv = attr_int(node, "kv_num_heads", 0);
  if (hq < 1 || hkv < 1 || hq % hkv != 0) {
    fail(node, cat("q_num_heads (", hq, ") must be a positive multiple of kv_num_heads (", hkv, ")"));
  }
  if (gated != has_input(node, 4)) fail(node, cat("update_rule '", rule, "' ", gated ? "needs" : "takes no", " decay (input 4)"));
  if (delta != has_input(node, 5)) fail(node, cat("update_rule '", rule, "' ", delta ? "needs" : "takes no", " beta (input 5)"));
  const std::vector<int64_t> q = dims_at(node, 0), k = dims_at(node, 1), v = dims_at(node, 2);
  for (const auto& [name, d] : {std::pair{"query", q}, std::pair{"key", k}, std::pair{"value", v}}) {
    if (d.size() != 3) fail(node, cat(name, " must have rank 3 [B, T, heads · size], got [", join(d, ", "), "]"));
  }
  const int64_t b = q[0], steps = q[1], dk = q[2] / hq, dv = v[2] / hkv, group = hq / hkv;
  if (q[2] % hq != 0 || k[2] != hkv * dk || v[2] % hkv != 0 || k[0] != b || v[0] != b || k[1] != steps || v[1] != steps) {
    fail(node, cat("query [", join(q, ", "), "], key [", join(k, ", "), "] and value [", join(v, ", "),
                   "] do not fit ", hq, " query and ", hkv, " key / value heads"));
  }
  float scale = attr_float(node, "scale", 0.0f);
  if (scale == 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // [B, T, H · D] as [B, H, T, D].
  const auto heads = [&](const std::string& x, int64_t h, int64_t d) {
    return e.op("Transpose", {e.reshape(x, {b, steps, h, d})}, {ints_attr("perm", {0, 2, 1, 3})});
  };
  const std::string q4 = heads(node.input(0), hq, dk), k4 = heads(node.input(1), hkv, dk), v4 = heads(node.input(2), hkv, dv);
  std::string decay4, beta4;
  if (gated) {
    const int64_t last = dims_at(node, 4).back();
    if (last != hkv && last != hkv * dk) fail(node, cat("decay's last dimension ", last, " must be ", hkv, " or ", hkv * dk));
    decay4 = heads(node.input(4), hkv, last / hkv);
  }
  if (delta) {
    const int64_t last = dims_at(node, 5).back();
    if (last != hkv && last != 1) fail(node, cat("beta's last dimension ", last, " must be ", hkv, " or 1"));
    beta4 = heads(node.input(5), last, 1);
  }
  std::string state;  // "" while it is zero
  if (has_input(node, 3)) {
    if (dims_at(node, 3) != std::vector<int64_t>{b, hkv, dk, dv}) {
      fail(node, cat("past_state must be [", b, ", ", hkv, ", ", dk, ", ", dv, "], got [", join(dims_at(node, 3), ", "), "]"));
    }
    state = node.input(3);
  }
  std::vector<std::string> out;
  for (int64_t t = 0; t < steps; ++t) {
    const std::string kt = e.unsqueeze("Unsqueeze", e.element(k4, 2, t), {-1});  // [B, Hkv, dk, 1]
    std::string vt = e.element(v4, 2, t);                                        // [B, Hkv, dv]
    if (gated && !state.empty()) state = e.op("Mul", {state, e.unsqueeze("Unsqueeze", e.op("Exp", {e.element(decay4, 2, t)}), {-1})});
    if (delta) {
      if (!state.empty()) {
        const std::string st = e.op("Transpose", {state}, {ints_attr("perm", {0, 1, 3, 2})});
        vt = e.op("Sub", {vt, e.unsqueeze("Squeeze", e.op("MatMul", {st, kt}), {-1})});
      }
      vt = e.op("Mul", {e.element(beta4, 2, t), vt});
    }
    const std::string written = e.op("MatMul", {kt, e.unsqueeze("Unsqueeze", vt, {-2})});
    state = state.empty() ? written : e.op("Add", {state, written});
    const std::string qt = e.reshape(e.element(q4, 2, t), {b, hkv, group, dk});
    const std::string read = e.reshape(e.op("MatMul", {qt, state}), {b, hq, 1, dv});
    out.push_back(e.op("Mul", {read, e.scalar(scale)}));
  }
  const std::string all = out.size() == 1 ? out[0] : e.op("Concat", out, {int_attr("axis", 2)});
  e.reshape(e.op("Transpose", {all}, {ints_attr("perm", {0, 2, 1, 3})}), {b, steps, hq * dv}, output_of(node, 0));
  if (node.output_size() > 1 && !node.output(1).empty()) e.op("Identity", {state}, {}, node.output(1));
}

}  // namespace stagecraft::graph::onnx_import
