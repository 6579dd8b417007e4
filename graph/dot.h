#pragma once
/// Graphviz drawings of graphs: one node per op (name, kind, output shape), edges labelled by
/// tensor shape, blocks drawn as clusters.
///
/// Example:
///   write_text_file("net.dot", graph_to_dot(g, partition_blocks(g)));  // dot -Tsvg net.dot

#include <string>
#include <vector>

#include "graph/blocks.h"
#include "graph/graph.h"

namespace stagecraft::graph {

/// The graph in Graphviz dot; each block of `blocks` becomes a cluster (none when empty).
std::string graph_to_dot(const Graph& graph, const std::vector<Block>& blocks = {});

/// Escapes a string for a double-quoted dot label.
std::string dot_escape(const std::string& text);

/// Fill colour of an op kind (convolutions, pools, element-wise, data movement differ).
std::string dot_kind_color(OpKind kind);

}  // namespace stagecraft::graph
