#include "common/half.h"

#include <cstring>

namespace stagecraft {

namespace {

constexpr uint32_t kSignMask = 0x80000000u;
constexpr int kFloatBias = 127;
constexpr int kHalfBias = 15;
constexpr int kHalfMaxExponent = 31;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

uint16_t float_to_half(float value) {
  const uint32_t u = bits_of(value);
  const uint16_t sign = static_cast<uint16_t>((u & kSignMask) >> 16);
  const int exponent = static_cast<int>((u >> 23) & 0xff);
  uint32_t mantissa = u & 0x7fffff;
  if (exponent == 0xff) {  // infinity or NaN
    return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 : 0));
  }
  const int e = exponent - kFloatBias + kHalfBias;
  if (e >= kHalfMaxExponent) return static_cast<uint16_t>(sign | 0x7c00);  // overflow
  if (e <= 0) {  // subnormal half (or zero)
    if (e < -10) return sign;
    mantissa |= 0x800000;  // implicit leading one
    const int shift = 14 - e;
    uint32_t half_mantissa = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1))) ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1fff;
  if (remainder > 0x1000 || (remainder == 0x1000 && (half & 1))) ++half;  // may carry to inf
  return static_cast<uint16_t>(sign | half);
}

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const int exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == kHalfMaxExponent) return float_of(sign | 0x7f800000 | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return float_of(sign);
    int e = -1;  // normalise the subnormal
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400) == 0);
    mantissa &= 0x3ff;
    return float_of(sign | (static_cast<uint32_t>(kFloatBias - kHalfBias - e) << 23) |
                    (mantissa << 13));
  }
  return float_of(sign | (static_cast<uint32_t>(exponent - kHalfBias + kFloatBias) << 23) |
                  (mantissa << 13));
}

uint16_t float_to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value = 0;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

}  // namespace stagecraft
