// Plan pass 4: memory. Views resolve to their root tensor; roots are placed in buffers in the
// order they are first used, and a root reuses a buffer when every access to the buffer's earlier
// tenants happens before every write of the new one (same stream, or through events), choosing
// the buffer that wastes the fewest bytes. Graph inputs and outputs never share.
#include <algorithm>

#include "executor/plan/plan_ir.h"

namespace stagecraft::executor::planning {

void plan_memory(PlanIR& ir) {
  const size_t n = ir.tasks.size();
  const size_t nv = ir.values.size();
  std::vector<int> root_of(nv);
  for (size_t v = 0; v < nv; ++v) root_of[v] = ir.root(static_cast<int>(v));
  // Which roots are in use at all (views of unused values still count through their root).
  std::vector<bool> used_root(nv, false);
  std::vector<Bits> accessors(nv, Bits(n));
  std::vector<std::vector<int>> root_writers(nv);
  std::vector<int> first_access(nv, static_cast<int>(n));
  for (size_t t = 0; t < n; ++t) {
    const int ti = static_cast<int>(t);
    for (int v : ir.tasks[t].srcs) {
      const int r = root_of[v];
      used_root[r] = true;
      accessors[r].set(t);
      first_access[r] = std::min(first_access[r], ti);
    }
    for (int v : ir.tasks[t].dsts) {
      const int r = root_of[v];
      used_root[r] = true;
      accessors[r].set(t);
      root_writers[r].push_back(ti);
      first_access[r] = std::min(first_access[r], ti);
    }
  }
  for (graph::ValueId v : ir.g.inputs()) used_root[root_of[v]] = true;
  for (int v : ir.output_values) used_root[root_of[v]] = true;
  for (size_t v = 0; v < nv; ++v) {
    if (ir.values[v].pinned) ir.values[root_of[v]].pinned = true;
  }

  std::vector<int> roots;
  for (size_t v = 0; v < nv; ++v) {
    if (root_of[v] == static_cast<int>(v) && used_root[v]) roots.push_back(static_cast<int>(v));
  }
  std::sort(roots.begin(), roots.end(), [&](int a, int b) { return first_access[a] < first_access[b]; });

  struct Slot {
    size_t bytes = 0;
    Bits accessors;
  };
  std::vector<Slot> slots;
  std::vector<int> slot_of(nv, -1);
  for (int r : roots) {
    const size_t bytes = static_cast<size_t>(ir.values[r].desc.bytes());
    ir.memory.activation_bytes_without_reuse += bytes;
    const bool pinned = ir.values[r].pinned;
    int chosen = -1;
    if (ir.options.reuse_memory && !pinned) {
      size_t best_waste = SIZE_MAX;
      for (size_t s = 0; s < slots.size(); ++s) {
        bool free = true;
        for (int w : root_writers[r]) free = free && slots[s].accessors.subset_of(ir.before[w]);
        if (!free) continue;
        const size_t waste = std::max(slots[s].bytes, bytes) - std::min(slots[s].bytes, bytes);
        if (waste < best_waste) {
          best_waste = waste;
          chosen = static_cast<int>(s);
        }
      }
    }
    if (chosen < 0) {
      slots.push_back(Slot{0, pinned ? Bits::all(n) : Bits(n)});  // pinned: never shared
      chosen = static_cast<int>(slots.size()) - 1;
    }
    slots[chosen].bytes = std::max(slots[chosen].bytes, bytes);
    slots[chosen].accessors.merge(accessors[r]);
    slot_of[r] = chosen;
  }
  std::vector<void*> slot_data(slots.size(), nullptr);
  for (size_t s = 0; s < slots.size(); ++s) {
    slot_data[s] = ir.allocate(slots[s].bytes);
    ir.memory.activation_bytes += slots[s].bytes;
  }
  // Absolute addresses of every value.
  ir.address.assign(nv, nullptr);
  for (size_t v = 0; v < nv; ++v) {
    const int r = root_of[v];
    if (slot_of[r] < 0) continue;
    size_t offset = 0;
    for (int u = static_cast<int>(v); u != r; u = ir.values[u].parent) offset += ir.values[u].offset;
    ir.address[v] = static_cast<char*>(slot_data[slot_of[r]]) + offset;
  }
}

}  // namespace stagecraft::executor::planning
