#include "executor/cpu/host_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/strings.h"
#include "executor/backend.h"

namespace stagecraft::executor::cpu {

void HostFree::operator()(void* p) const noexcept { std::free(p); }

bool host_huge_pages() {
  static const bool on = std::getenv("STAGECRAFT_NO_HUGE_PAGES") == nullptr;
  return on;
}

HostMemory host_allocate(size_t bytes, size_t alignment) {
  bytes = std::max<size_t>(bytes, 1);
  const bool huge = bytes >= kHugePage && host_huge_pages();
  const size_t align = std::max(huge ? kHugePage : kAlignment, alignment);
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw BackendError(cat("cpu: cannot allocate ", byte_size(static_cast<double>(bytes))));
#ifdef MADV_HUGEPAGE
  // Before the first touch (the memset), so that the pages are faulted in huge; advice only: a
  // kernel without transparent huge pages leaves them small.
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  std::memset(p, 0, rounded);
  return HostMemory(p);
}

std::shared_ptr<void> host_allocate_constant(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes >= kHugePage || !host_huge_pages()) return std::shared_ptr<void>(host_allocate(bytes).release(), HostFree());
  constexpr size_t kChunk = 8 * kHugePage;
  static std::mutex mutex;
  static std::shared_ptr<void> chunk;  // the chunk blocks are cut from now
  static size_t used = kChunk;
  const std::lock_guard<std::mutex> lock(mutex);
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (used + rounded > kChunk) {
    chunk = std::shared_ptr<void>(host_allocate(kChunk).release(), HostFree());
    used = 0;
  }
  // Aliasing constructor: the block shares the chunk's ownership.
  std::shared_ptr<void> block(chunk, static_cast<char*>(chunk.get()) + used);
  used += rounded;
  return block;
}

}  // namespace stagecraft::executor::cpu
