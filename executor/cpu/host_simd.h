#pragma once
// Internal to the CPU backend: the AVX2 paths of our own host kernels (channel gather, max pool,
// Winograd convolutions).
// They are compiled where the compiler targets x86 (STAGECRAFT_HOST_AVX2, functions marked
// target("avx2")) and taken where the CPU running them has AVX2 (host_has_avx2()).

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STAGECRAFT_HOST_AVX2 1

namespace stagecraft::executor::cpu {

/// Whether this CPU has AVX2 (asked once).
inline bool host_has_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

}  // namespace stagecraft::executor::cpu
#endif

namespace stagecraft::executor::cpu {

/// How many times more floating-point work per second this CPU does with 512-bit FMAs than with
/// 256-bit ones, measured once (a ~0.1 ms probe of independent FMA chains, fastest of several
/// timings); 0 without AVX-512. About 2 on cores with two 512-bit FMA ports (Intel server
/// parts), about 1 where 512-bit operations run as two 256-bit halves (AMD Zen 4): there,
/// oneDNN's AVX-512 kernels do no more multiply-adds per cycle than our AVX2 ones.
double host_fma512_gain();

/// Makes host_fma512_gain() answer `gain` instead of the measurement (a negative value restores
/// it): lets tests check both kernel choices on any machine, whatever its timings.
void override_fma512_gain(double gain);
/// Whether host_fma512_gain() answers a forced value (override_fma512_gain): tests then fix the
/// kernel choice by the FMA-width rule instead of measuring each convolution.
bool fma512_gain_forced();

}  // namespace stagecraft::executor::cpu
