#pragma once
/// Seeded Watts–Strogatz small-world graphs, the random wiring of RandWire. The generator uses its
/// own random number generator (SplitMix64), never the standard library's distributions, so the
/// same seed gives the same graph with every compiler and standard library.
///
/// Example:
///   std::vector<Edge> edges = watts_strogatz_edges(32, 4, 0.75, /*seed=*/7);
///   // 64 edges, each with u < v, sorted; orient them u -> v to get a DAG.

#include <compare>
#include <cstdint>
#include <vector>

#include "common/random.h"

namespace stagecraft::networks {

/// An undirected edge between nodes `u` < `v`.
struct Edge {
  int u = 0;  ///< lower node index
  int v = 0;  ///< higher node index
  auto operator<=>(const Edge&) const = default;
};

/// The edges of a Watts–Strogatz graph on nodes 0..n-1, as networkx's `watts_strogatz_graph`
/// builds it: a ring lattice linking each node to its k/2 nearest neighbours on each side, then,
/// for each offset j = 1..k/2 and each node u in order, the lattice edge (u, u+j mod n) is rewired
/// with probability `p` to (u, w) with w uniform among the nodes, redrawn while w would make a
/// self-loop or a duplicate edge (skipped when u is already linked to every node). Returns the
/// n·k/2 edges with u < v, sorted. Throws NetworkError unless k is even, 0 < k < n and 0 <= p <= 1.
std::vector<Edge> watts_strogatz_edges(int n, int k, double p, uint64_t seed);

}  // namespace stagecraft::networks
