#pragma once
/// IEEE 754 binary16 conversions on the host (round to nearest even), for uploading and
/// downloading f16 tensors without a GPU compiler.

#include <cstdint>

namespace stagecraft {

/// The binary16 bits nearest to `value` (overflow gives infinity, NaN stays NaN).
uint16_t float_to_half(float value);

/// The float value of binary16 bits.
float half_to_float(uint16_t bits);

}  // namespace stagecraft
