#pragma once
/// Stable, platform-independent hashing (FNV-1a, 64 bit) for content hashes of graphs and stage
/// keys that are written to files and must not change between runs or machines.

#include <cstdint>
#include <string>
#include <string_view>

namespace stagecraft {

/// Incremental FNV-1a 64-bit hasher. Only byte-exact inputs: feed integers through `add_int`.
class Fnv1a {
 public:
  /// Mixes raw bytes.
  void add_bytes(const void* data, size_t size);
  /// Mixes a string and its length (so "ab","c" differs from "a","bc").
  void add_string(std::string_view text);
  /// Mixes a 64-bit integer in little-endian byte order.
  void add_int(uint64_t value);
  /// The hash so far.
  uint64_t digest() const { return state_; }

 private:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t state_ = kOffsetBasis;
};

/// The hash as 16 lowercase hex digits.
std::string hex64(uint64_t value);

}  // namespace stagecraft
