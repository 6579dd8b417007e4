#pragma once
/// Automatic partition of a graph into blocks at single-entry/single-exit points.
///
/// Inputs: a graph. Output: blocks in topological order. A virtual source feeds every op without
/// op predecessors and a virtual sink collects every graph output and every op without successors;
/// an op is a cut vertex when it dominates the sink (every source-to-sink path passes through it),
/// found with Boost's Lengauer–Tarjan dominator tree. Block i holds the ops after cut vertex i-1
/// up to and including cut vertex i; ops after the last cut vertex form the last block. No two
/// ops of different blocks can ever run concurrently, so scheduling blocks one by one loses
/// nothing. Complexity: O(e·α(e)) for dominators plus O(n·e) for each block's width.

#include <vector>

#include "graph/graph.h"

namespace stagecraft::graph {

/// A block: a convex set of ops entered and left through single points.
struct Block {
  std::vector<OpId> ops;  ///< ascending (topological)
  int width = 0;          ///< maximum antichain: the most ops that could run at once
};

/// Partitions `graph` into blocks (see the file comment). Every op is in exactly one block.
std::vector<Block> partition_blocks(const Graph& graph);

/// The ops that every source-to-sink path passes through, ascending.
std::vector<OpId> cut_vertices(const Graph& graph);

/// Maximum antichain of the ops of `view` under the graph's dependency order.
int max_width(const SubgraphView& view);

}  // namespace stagecraft::graph
