// Host memory of the CPU backend: blocks aligned, zeroed and apart; large ones and the chunks small
// constants are cut from aligned to 2 MB (huge pages where Linux gives them on request).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "executor/cpu/host_memory.h"

namespace stagecraft::executor::cpu {
namespace {

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

bool all_zero(const void* p, size_t bytes) {
  const auto* c = static_cast<const unsigned char*>(p);
  return std::all_of(c, c + bytes, [](unsigned char x) { return x == 0; });
}

TEST(HostMemory, BlocksAreAlignedZeroedAndLargeOnesOnHugePageBoundaries) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, kHugePage - 1, kHugePage, 3 * kHugePage + 5}) {
    HostMemory m = host_allocate(bytes);
    ASSERT_NE(m.get(), nullptr);
    EXPECT_EQ(address(m.get()) % 64, 0u) << bytes;
    if (bytes >= kHugePage && host_huge_pages()) {
      EXPECT_EQ(address(m.get()) % kHugePage, 0u) << bytes;
    }
    EXPECT_TRUE(all_zero(m.get(), bytes)) << bytes;
  }
}

TEST(HostMemory, ConstantsAreDisjointZeroedAndOutliveTheirChunk) {
  // Enough small blocks to fill more than one 16 MB chunk, and a large one in between.
  std::vector<std::pair<std::shared_ptr<void>, size_t>> blocks;
  for (int i = 0; i < 40; ++i) {
    const size_t bytes = i == 7 ? 3 * kHugePage : (size_t{700} << 10) + static_cast<size_t>(i) * 13;
    blocks.emplace_back(host_allocate_constant(bytes), bytes);
    const auto& [p, n] = blocks.back();
    ASSERT_NE(p.get(), nullptr);
    EXPECT_EQ(address(p.get()) % 64, 0u) << i;
    EXPECT_TRUE(all_zero(p.get(), n)) << i;
    std::fill_n(static_cast<unsigned char*>(p.get()), n, static_cast<unsigned char>(i + 1));
  }
  // No block overlaps another: each still holds its own byte everywhere.
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto* c = static_cast<const unsigned char*>(blocks[i].first.get());
    EXPECT_TRUE(std::all_of(c, c + blocks[i].second, [&](unsigned char x) { return x == i + 1; })) << i;
  }
  // Dropping every other block frees nothing the others use.
  for (size_t i = 0; i < blocks.size(); i += 2) blocks[i].first.reset();
  for (size_t i = 1; i < blocks.size(); i += 2) {
    const auto* c = static_cast<const unsigned char*>(blocks[i].first.get());
    EXPECT_TRUE(std::all_of(c, c + blocks[i].second, [&](unsigned char x) { return x == i + 1; })) << i;
  }
}

}  // namespace
}  // namespace stagecraft::executor::cpu
