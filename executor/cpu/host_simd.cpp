// The FMA-width probe of host_simd.h.
#include "executor/cpu/host_simd.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace stagecraft::executor::cpu {

#ifdef STAGECRAFT_HOST_AVX2
namespace {

constexpr int kChains = 12;     // independent accumulators: more than latency x FMA ports (8), fewer
                                // than the 16 AVX2 registers
constexpr int kSteps = 2048;    // FMAs per chain per timing
constexpr int kTimings = 7;     // the fastest counts (a preempted timing only gets slower)

// Seconds per vector FMA, fastest of kTimings: kChains accumulators, each kSteps FMAs long.
// Written once per width (a lambda would not inherit the function's target ISA).
#define STAGECRAFT_FMA_PROBE(VEC, SET1, FMA, FIRST)                                        \
  double best = 1e9;                                                                      \
  volatile float sink = 0.0f, seed = 1e-3f; /* opaque: the chains cannot be merged */     \
  for (int t = 0; t < kTimings; ++t) {                                                    \
    VEC acc[kChains];                                                                     \
    for (int c = 0; c < kChains; ++c) acc[c] = SET1(seed * static_cast<float>(c + 1));    \
    const VEC x = SET1(seed);                                                             \
    const auto start = std::chrono::steady_clock::now();                                  \
    for (int s = 0; s < kSteps; ++s) {                                                    \
      _Pragma("GCC unroll 12") for (VEC & a : acc) a = FMA(x, x, a);                      \
    }                                                                                     \
    const double seconds =                                                                \
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();  \
    float total = 0.0f;                                                                   \
    for (const VEC& a : acc) total += FIRST(a);                                           \
    sink = sink + total;                                                                  \
    best = std::min(best, seconds / (kSteps * kChains));                                  \
  }                                                                                       \
  return best;

__attribute__((target("avx2,fma"))) double seconds_per_fma256() {
  STAGECRAFT_FMA_PROBE(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
}

__attribute__((target("avx512f"))) double seconds_per_fma512() {
  STAGECRAFT_FMA_PROBE(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
}
#undef STAGECRAFT_FMA_PROBE

// The measurement, once.
double measured_fma512_gain() {
  static const double gain = [] {
    if (!host_has_avx2() || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("avx512f")) return 0.0;
    seconds_per_fma256();  // wakes the vector units (and the frequency) before the timings count
    const double narrow = seconds_per_fma256(), wide = seconds_per_fma512();
    return 2.0 * narrow / wide;  // a 512-bit FMA does twice the work of a 256-bit one
  }();
  return gain;
}

}  // namespace
#else
namespace {
double measured_fma512_gain() { return 0.0; }
}  // namespace
#endif

namespace {
std::atomic<double> fma512_gain_override{-1.0};
}  // namespace

void override_fma512_gain(double gain) { fma512_gain_override.store(gain); }

bool fma512_gain_forced() { return fma512_gain_override.load() >= 0; }

double host_fma512_gain() {
  const double forced = fma512_gain_override.load();
  return forced >= 0 ? forced : measured_fma512_gain();
}

}  // namespace stagecraft::executor::cpu
