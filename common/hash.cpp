#include "common/hash.h"

#include <cstdio>

namespace stagecraft {

void Fnv1a::add_bytes(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    state_ ^= bytes[i];
    state_ *= kPrime;
  }
}

void Fnv1a::add_string(std::string_view text) {
  add_int(text.size());
  add_bytes(text.data(), text.size());
}

void Fnv1a::add_int(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  add_bytes(bytes, sizeof(bytes));
}

std::string hex64(uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

}  // namespace stagecraft
