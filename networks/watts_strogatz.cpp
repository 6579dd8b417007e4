// Watts–Strogatz graph generation with a self-contained SplitMix64 generator.
//
// Input: node count n, lattice degree k, rewiring probability p, a 64-bit seed.
// Output: the n·k/2 undirected edges, each as (u, v) with u < v, sorted.
// Complexity: O(n²) memory for the adjacency matrix, O(n·k) rewiring draws (each expected O(1)
// while the graph is sparse) plus O(n²) to list the edges; n is at most a few hundred here.
#include "networks/watts_strogatz.h"

#include <cassert>

#include "common/strings.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {

// Symmetric adjacency matrix with per-node degrees, for O(1) edge tests.
class Adjacency {
 public:
  explicit Adjacency(int n)
      : n_(n), linked_(static_cast<size_t>(n) * static_cast<size_t>(n), false), degree_(n, 0) {}

  bool has(int a, int b) const { return linked_[index(a, b)]; }
  int degree(int a) const { return degree_[a]; }
  void add(int a, int b) {
    assert(a != b && !has(a, b));
    linked_[index(a, b)] = linked_[index(b, a)] = true;
    ++degree_[a];
    ++degree_[b];
  }
  void remove(int a, int b) {
    assert(has(a, b));
    linked_[index(a, b)] = linked_[index(b, a)] = false;
    --degree_[a];
    --degree_[b];
  }

 private:
  size_t index(int a, int b) const {
    return static_cast<size_t>(a) * static_cast<size_t>(n_) + static_cast<size_t>(b);
  }

  int n_;
  std::vector<bool> linked_;
  std::vector<int> degree_;
};

}  // namespace

std::vector<Edge> watts_strogatz_edges(int n, int k, double p, uint64_t seed) {
  if (k <= 0 || k % 2 != 0 || k >= n) {
    throw NetworkError(
        cat("Watts-Strogatz graph: k must be even with 0 < k < n, got k = ", k, " and n = ", n));
  }
  if (!(p >= 0.0 && p <= 1.0)) {
    throw NetworkError(cat("Watts-Strogatz graph: p must be in [0, 1], got ", p));
  }
  const int half_k = k / 2;
  Adjacency adjacency(n);
  for (int j = 1; j <= half_k; ++j) {
    for (int u = 0; u < n; ++u) adjacency.add(u, (u + j) % n);
  }

  SplitMix64 rng(seed);
  // As networkx: offsets outside, nodes inside, one coin per lattice edge in that order.
  for (int j = 1; j <= half_k; ++j) {
    for (int u = 0; u < n; ++u) {
      if (rng.uniform() >= p) continue;
      const int v = (u + j) % n;
      int w = static_cast<int>(rng.uniform_index(static_cast<uint64_t>(n)));
      bool skip = false;
      while (w == u || adjacency.has(u, w)) {
        if (adjacency.degree(u) >= n - 1) {  // u is linked to every node: nothing to rewire to
          skip = true;
          break;
        }
        w = static_cast<int>(rng.uniform_index(static_cast<uint64_t>(n)));
      }
      if (skip) continue;
      adjacency.remove(u, v);
      adjacency.add(u, w);
    }
  }

  std::vector<Edge> edges;
  edges.reserve(static_cast<size_t>(n) * static_cast<size_t>(half_k));
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (adjacency.has(a, b)) edges.push_back(Edge{a, b});
    }
  }
  return edges;
}

}  // namespace stagecraft::networks
