#pragma once
// Internal to the CPU backend: the AVX2 paths of our own host kernels (channel gather, max pool).
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
