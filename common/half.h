#pragma once
/// IEEE 754 binary16 and bfloat16 conversions on the host (round to nearest even), for uploading
/// and downloading f16 / bf16 tensors without a GPU compiler.

#include <cstdint>

namespace stagecraft {

/// The binary16 bits nearest to `value` (overflow gives infinity, NaN stays NaN).
uint16_t float_to_half(float value);

/// The float value of binary16 bits.
float half_to_float(uint16_t bits);

/// The bfloat16 bits nearest to `value` (the top 16 bits of the float, rounded to nearest even;
/// NaN stays a quiet NaN).
uint16_t float_to_bf16(float value);

/// The float value of bfloat16 bits.
float bf16_to_float(uint16_t bits);

}  // namespace stagecraft
