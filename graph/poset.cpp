#include "graph/poset.h"

#include <cassert>
#include <functional>

namespace stagecraft::graph {

namespace {

// Vertices in an order where every edge goes forward (Kahn).
std::vector<int> topological(const Adjacency& successors) {
  const int n = static_cast<int>(successors.size());
  std::vector<int> indegree(n, 0);
  for (const auto& outs : successors)
    for (int v : outs) ++indegree[v];
  std::vector<int> order;
  for (int u = 0; u < n; ++u)
    if (indegree[u] == 0) order.push_back(u);
  for (size_t i = 0; i < order.size(); ++i) {
    for (int v : successors[order[i]])
      if (--indegree[v] == 0) order.push_back(v);
  }
  assert(static_cast<int>(order.size()) == n && "graph must be acyclic");
  return order;
}

}  // namespace

std::vector<std::vector<bool>> transitive_closure(const Adjacency& successors) {
  const int n = static_cast<int>(successors.size());
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  const std::vector<int> order = topological(successors);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int u = *it;
    for (int v : successors[u]) {
      reach[u][v] = true;
      for (int w = 0; w < n; ++w)
        if (reach[v][w]) reach[u][w] = true;
    }
  }
  return reach;
}

std::vector<std::vector<int>> min_chain_cover(const Adjacency& successors, bool transitive) {
  const int n = static_cast<int>(successors.size());
  Adjacency edges = successors;
  if (transitive) {
    const auto reach = transitive_closure(successors);
    for (int u = 0; u < n; ++u) {
      edges[u].clear();
      for (int v = 0; v < n; ++v)
        if (reach[u][v]) edges[u].push_back(v);
    }
  }
  // Maximum matching between "left" copies (u) and "right" copies (v) of the vertices: a matched
  // edge u -> v means v follows u in its chain. Chains = n - matching size.
  std::vector<int> match_right(n, -1);  // right vertex -> matched left vertex
  std::vector<int> match_left(n, -1);   // left vertex -> matched right vertex
  std::vector<int> visited(n, -1);
  std::function<bool(int, int)> augment = [&](int u, int stamp) -> bool {
    for (int v : edges[u]) {
      if (visited[v] == stamp) continue;
      visited[v] = stamp;
      if (match_right[v] < 0 || augment(match_right[v], stamp)) {
        match_right[v] = u;
        match_left[u] = v;
        return true;
      }
    }
    return false;
  };
  for (int u = 0; u < n; ++u) augment(u, u);

  std::vector<std::vector<int>> chains;
  for (int u = 0; u < n; ++u) {
    if (match_right[u] >= 0) continue;  // not the head of a chain
    std::vector<int> chain;
    for (int v = u; v >= 0; v = match_left[v]) chain.push_back(v);
    chains.push_back(std::move(chain));
  }
  return chains;
}

int max_antichain_size(const Adjacency& successors) {
  return static_cast<int>(min_chain_cover(successors, /*transitive=*/true).size());
}

}  // namespace stagecraft::graph
