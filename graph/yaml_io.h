#pragma once
/// Graph files in YAML: ops with their attributes and inferred shapes, and which value feeds which
/// input. Weights are not part of the file. Writing is canonical, so write -> read -> write is
/// byte-identical. Reading accepts ops in any order, and rejects with one clear line (file, line,
/// op, field, rule) a malformed file, an unknown op kind or attribute, a dangling input, a cycle,
/// a shape mismatch, or a declared shape that differs from the inferred one.
///
/// Format (version 1):
///   format: stagecraft-graph
///   version: 1
///   name: tiny
///   inputs:
///     - {name: input, shape: [1, 3, 32, 32], dtype: f32}
///   ops:
///     - {name: conv, kind: conv2d, inputs: [input], in_channels: 3, out_channels: 8, kernel: 3,
///        padding: 1, shape: [1, 8, 32, 32]}
///     - {name: split, kind: split, inputs: [conv], sizes: [4, 4], shapes: [[1, 4, 32, 32], ...]}
///   outputs: [split:0, split:1]
/// A value is named after its op ("conv"), or "op:i" for output i of a multi-output op.
///
/// Example:
///   save_graph(g, "net.yaml");
///   Graph h = load_graph("net.yaml");

#include <string>

#include "graph/graph.h"

namespace stagecraft::graph {

/// The graph as YAML text.
std::string graph_to_yaml(const Graph& graph);

/// Content hash of a graph (of its canonical YAML), 16 hex digits: equal graphs, equal hashes.
std::string graph_hash(const Graph& graph);

/// Parses YAML text; `source` names it in error messages (a file path or "<string>").
Graph graph_from_yaml(const std::string& text, const std::string& source = "<string>");

/// Writes the graph to a file; throws IoError when it cannot be written.
void save_graph(const Graph& graph, const std::string& path);

/// Reads a graph file; throws IoError when it cannot be read, FormatError/GraphError/ShapeError
/// when it is invalid.
Graph load_graph(const std::string& path);

}  // namespace stagecraft::graph
