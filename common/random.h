#pragma once
/// Deterministic random numbers that are the same with every compiler and standard library (the
/// standard distributions are not): seeded weights, random wiring, test data.

#include <cstdint>

namespace stagecraft {

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny 64-bit generator with a full period; its output
/// function is also a good integer hash for deriving seeds.
class SplitMix64 {
 public:
  /// A generator starting from `seed` (every seed is valid).
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  /// The next 64 random bits.
  uint64_t next();
  /// A double uniform in [0, 1) with 53 random bits.
  double uniform();
  /// An integer uniform in [0, bound), without modulo bias; `bound` must be >= 1.
  uint64_t uniform_index(uint64_t bound);

 private:
  uint64_t state_;
};

/// A seed for sub-stream `stream` of `seed` (e.g. one per RandWire stage): distinct streams and
/// distinct seeds give unrelated values.
uint64_t derive_seed(uint64_t seed, uint64_t stream);

}  // namespace stagecraft
