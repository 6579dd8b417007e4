#pragma once
// Internal to the CPU backend: host allocations for tensors, packed weights and workspaces.
//
// Large blocks (>= 2 MB) are aligned to and rounded up to 2 MB and marked MADV_HUGEPAGE, so that
// Linux backs them with transparent huge pages where it is set to "madvise" (Debian's default):
// a network's weights are streamed from memory once per run, and with 4 KB pages the cores'
// prefetchers stop at every page boundary and the TLB misses every 4 KB (resnet50 reads 100 MB of
// weights per run). Smaller blocks are kAlignment-aligned. Contents are zeroed.

#include <cstddef>
#include <memory>

namespace stagecraft::executor::cpu {

/// Alignment of buffers, scratchpads and temporaries.
inline constexpr size_t kAlignment = 64;
/// Bytes from which a block goes on huge pages (one 2 MB page).
inline constexpr size_t kHugePage = size_t{2} << 20;

struct HostFree {
  void operator()(void* p) const noexcept;
};
using HostMemory = std::unique_ptr<void, HostFree>;

/// `bytes` (at least 1) of zeroed host memory, aligned to `alignment` (a power of two; at least
/// kAlignment), on huge pages from kHugePage up where the kernel allows it; throws BackendError
/// when the allocation fails.
HostMemory host_allocate(size_t bytes, size_t alignment = kAlignment);

/// Like host_allocate, for constants (packed weights) that live as long as their kernel: blocks
/// under kHugePage are cut from shared huge-page chunks of 16 MB (a chunk is freed with the last
/// block cut from it, once a newer chunk has taken its place), so that small weights are on huge
/// pages too. Thread-safe.
std::shared_ptr<void> host_allocate_constant(size_t bytes);

/// Whether host_allocate asks for huge pages (false where the environment variable
/// STAGECRAFT_NO_HUGE_PAGES is set, for comparisons).
bool host_huge_pages();

}  // namespace stagecraft::executor::cpu
