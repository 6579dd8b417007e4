#include "common/random.h"

#include <cassert>

namespace stagecraft {

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

}  // namespace stagecraft
