#pragma once
/// Partial-order algorithms on a DAG given as local adjacency (vertices 0..n-1, edges u -> v with
/// u < v not required): transitive closure, minimum chain covers (Dilworth, by maximum bipartite
/// matching) and the maximum antichain size.
///
/// Complexity: closure O(n·e/64); chain cover O(n·e) with augmenting paths (Kuhn), where e is
/// the number of edges (closure edges for the transitive cover). Blocks have at most a few hundred
/// ops, so this is well under a millisecond per block.

#include <cstdint>
#include <vector>

namespace stagecraft::graph {

/// Adjacency of a DAG: successors[u] lists the v with an edge u -> v.
using Adjacency = std::vector<std::vector<int>>;

/// reach[u][v] is true when v is reachable from u by a non-empty path.
std::vector<std::vector<bool>> transitive_closure(const Adjacency& successors);

/// A minimum set of vertex-disjoint chains covering every vertex. With `transitive` false, each
/// chain is a path of edges (consecutive vertices are joined by an edge); with `transitive` true,
/// consecutive vertices only need to be ordered (a path in the transitive closure), and the number
/// of chains equals the maximum antichain size (Dilworth). Each chain lists vertices in order.
std::vector<std::vector<int>> min_chain_cover(const Adjacency& successors, bool transitive);

/// Size of a maximum antichain (a largest set of pairwise unordered vertices).
int max_antichain_size(const Adjacency& successors);

}  // namespace stagecraft::graph
