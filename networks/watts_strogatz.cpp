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

// SplitMix64 constants: the golden-ratio increment and the two multipliers of the output mix.
constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kMixMultiplier1 = 0xbf58476d1ce4e5b9ULL;
constexpr uint64_t kMixMultiplier2 = 0x94d049bb133111ebULL;
constexpr int kMixShift1 = 30;
constexpr int kMixShift2 = 27;
constexpr int kMixShift3 = 31;
// A double has 53 significant bits: keep the top 53 bits and scale by 2^-53.
constexpr int kDoubleMantissaBits = 53;
constexpr int kDiscardedBits = 64 - kDoubleMantissaBits;
constexpr double kTwoToMinus53 = 1.0 / static_cast<double>(uint64_t{1} << kDoubleMantissaBits);

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

uint64_t SplitMix64::next() {
  state_ += kGoldenGamma;
  uint64_t z = state_;
  z = (z ^ (z >> kMixShift1)) * kMixMultiplier1;
  z = (z ^ (z >> kMixShift2)) * kMixMultiplier2;
  return z ^ (z >> kMixShift3);
}

double SplitMix64::uniform() {
  return static_cast<double>(next() >> kDiscardedBits) * kTwoToMinus53;
}

uint64_t SplitMix64::uniform_index(uint64_t bound) {
  assert(bound >= 1);
  // 2^64 mod bound: draws below it are rejected, so the accepted range is a multiple of bound.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t x = next();
    if (x >= threshold) return x % bound;
  }
}

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  // Hash the seed first so that (seed, stream) and (seed ^ stream, 0) do not collide trivially.
  SplitMix64 seed_hash(seed);
  SplitMix64 stream_hash(seed_hash.next() ^ stream);
  return stream_hash.next();
}

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
