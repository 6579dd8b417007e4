#include "graph/dot.h"

#include <sstream>

#include "common/strings.h"

namespace stagecraft::graph {

std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string dot_kind_color(OpKind kind) {
  switch (kind) {
    case OpKind::kConv2d:
    case OpKind::kConvTranspose2d:
    case OpKind::kLinear:
      return "#9ecae1";
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool:
      return "#a1d99b";
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kSlice:
    case OpKind::kPad:
    case OpKind::kFlatten:
    case OpKind::kIdentity:
      return "#d9d9d9";
    default:
      return "#fdd0a2";
  }
}

namespace {

std::string op_label(const Graph& graph, const Op& op) {
  std::string detail;
  if (op.kind == OpKind::kConv2d) {
    const auto& a = op.attrs_as<Conv2dAttrs>();
    detail = cat(a.kernel.h, "x", a.kernel.w, a.stride.h > 1 ? cat(" /", a.stride.h) : "",
                 a.groups > 1 ? cat(" g", a.groups) : "",
                 a.activation != Activation::kNone ? cat(" +", to_string(a.activation)) : "");
  }
  const std::string shape = graph.value(op.outputs[0]).desc.shape.to_string();
  return dot_escape(cat(op.name, "\\n", to_string(op.kind), detail.empty() ? "" : " " + detail,
                        "\\n", shape));
}

}  // namespace

std::string graph_to_dot(const Graph& graph, const std::vector<Block>& blocks) {
  std::ostringstream out;
  out << "digraph \"" << dot_escape(graph.name()) << "\" {\n";
  out << "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
         "fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n";
  for (ValueId v : graph.inputs()) {
    out << "  \"v" << v << "\" [label=\"" << dot_escape(graph.value(v).name) << "\\n"
        << graph.value(v).desc.shape.to_string() << "\", shape=oval, fillcolor=\"#ffffff\"];\n";
  }
  auto emit_op = [&](const Op& op, const std::string& indent) {
    out << indent << "\"op" << op.id << "\" [label=\"" << op_label(graph, op)
        << "\", fillcolor=\"" << dot_kind_color(op.kind) << "\"];\n";
  };
  if (blocks.empty()) {
    for (const Op& op : graph.ops()) emit_op(op, "  ");
  } else {
    for (size_t b = 0; b < blocks.size(); ++b) {
      out << "  subgraph cluster_block" << b << " {\n    label=\"block " << b << " ("
          << blocks[b].ops.size() << " ops, width " << blocks[b].width
          << ")\";\n    style=dashed; color=\"#888888\";\n";
      for (OpId id : blocks[b].ops) emit_op(graph.op(id), "    ");
      out << "  }\n";
    }
  }
  for (const Op& op : graph.ops()) {
    for (ValueId v : op.inputs) {
      const Value& value = graph.value(v);
      const std::string src = value.producer == kNoOp ? cat("v", v) : cat("op", value.producer);
      out << "  \"" << src << "\" -> \"op" << op.id << "\";\n";
    }
  }
  for (ValueId v : graph.outputs()) {
    out << "  \"out" << v << "\" [label=\"output\\n" << graph.value(v).desc.shape.to_string()
        << "\", shape=oval, fillcolor=\"#ffffff\"];\n";
    const OpId producer = graph.value(v).producer;
    const std::string src = producer == kNoOp ? cat("v", v) : cat("op", producer);
    out << "  \"" << src << "\" -> \"out" << v << "\";\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace stagecraft::graph
