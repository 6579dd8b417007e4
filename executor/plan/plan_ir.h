#pragma once
// Internal to the plan builder: the one representation its passes read and extend.
//
//   values   every tensor of the plan: the graph's values (same ids) and the ones the passes add
//            (converted copies, merged outputs, staged outputs); a value may be a view into another
//   tasks    kernels to create, in launch order, with the values they read and write
//
// Passes, in order (each in its own file):
//   layouts.cpp    describe_values, legalise_layouts, convert_inputs
//   placement.cpp  place_tasks: per-op tasks and views, launch order, streams, threads, outputs
//   sync.cpp       synchronise: dependencies, events, happens-before
//   memory.cpp     plan_memory: liveness, reuse, buffers, addresses
//   kernels.cpp    create_kernels: backend kernels, workspaces, binding

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "executor/plan.h"

namespace stagecraft::executor::planning {

// The names every pass uses.
using graph::Layout;
using graph::OpId;
using graph::OpKind;
using graph::TensorDesc;
using graph::ValueId;
using scheduler::Stage;
using scheduler::StageKind;

/// A fixed-size bit set over tasks (happens-before sets).
class Bits {
 public:
  explicit Bits(size_t n = 0) : words_((n + 63) / 64, 0) {}
  void set(size_t i) { words_[i / 64] |= uint64_t{1} << (i % 64); }
  bool test(size_t i) const { return (words_[i / 64] >> (i % 64)) & 1; }
  void merge(const Bits& o) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
  }
  bool subset_of(const Bits& o) const {
    for (size_t i = 0; i < words_.size(); ++i)
      if ((words_[i] & ~o.words_[i]) != 0) return false;
    return true;
  }
  static Bits all(size_t n) {
    Bits b(n);
    for (size_t i = 0; i < n; ++i) b.set(i);
    return b;
  }

 private:
  std::vector<uint64_t> words_;
};

/// A tensor of the plan.
struct ValueInfo {
  graph::TensorDesc desc;
  int parent = -1;      ///< value this one is a view into
  size_t offset = 0;    ///< byte offset inside the parent
  bool pinned = false;  ///< never shares memory (graph inputs, outputs)
  std::vector<int> children;
};

/// A kernel to create.
struct Task {
  KernelSpec spec;
  bool copy = false;  ///< a layout/slice copy made with Backend::create_copy
  std::vector<int> srcs, dsts;
  int stream = 0;
  int stage = 0;  ///< schedule stage (1-based), 0 for input/output copies
  std::string label;
  std::vector<graph::OpId> ops;
};

/// The plan under construction.
struct PlanIR {
  PlanIR(const graph::Graph& graph, const scheduler::Schedule& schedule,
         const graph::WeightStore& weights, Backend& backend, const PlanOptions& options);

  // ---- What the plan is built from
  const graph::Graph& g;
  const scheduler::Schedule& schedule;
  const graph::WeightStore& weights;
  Backend& backend;
  const PlanOptions& options;
  graph::Layout layout;  ///< the uniform activation layout (default of per-value layouts)
  int parallelism;

  // ---- Values and tasks (layouts, placement)
  std::vector<ValueInfo> values;
  std::vector<int> alias;                   ///< graph value -> value its non-conv readers read
  std::set<graph::ValueId> convert_for_conv;  ///< graph inputs convolutions read converted
  std::vector<std::vector<Task>> op_tasks;  ///< tasks of each graph op (or of a merge's first conv)
  std::vector<Task> tasks;                  ///< in launch order
  std::vector<int> output_values;           ///< per graph output: the value downloaded
  std::vector<std::unique_ptr<graph::OpWeights>> merged_weights;  ///< of merged convolutions
  std::vector<LayoutFallback> fallbacks;
  MemoryReport memory;

  // ---- Synchronisation
  std::vector<Bits> before;              ///< before[t]: tasks that happen before task t
  std::vector<std::vector<int>> waits;   ///< events each task waits for
  std::vector<int> record;               ///< event each task records (-1: none)
  int num_events = 0;
  int num_streams = 1;

  // ---- Memory
  std::vector<void*> address;            ///< of every value
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<size_t> buffer_bytes;      ///< usable bytes of each buffer (guards follow)
  std::vector<void*> workspace;          ///< of each stream (create_kernels; nullptr: none)
  std::vector<size_t> workspace_bytes;   ///< its size

  /// Adds a value; returns its id.
  int new_value(const graph::TensorDesc& desc);
  /// Makes `child` a view at `offset` bytes into `parent`.
  void make_view(int child, int parent, size_t offset);
  /// A task computing `op` (or `attrs` instead of its own) from `srcs` into `dsts`.
  Task op_task(const graph::Op& op, const graph::OpAttrs& attrs, std::vector<int> srcs,
               std::vector<int> dsts, const graph::OpWeights* w) const;
  /// A copy task (layout conversion, slice or concatenation part).
  Task copy_task(int src, int dst, const std::string& label) const;
  /// The value op input `slot` reads (a converted copy where one was made).
  int src_value(const graph::Op& op, size_t slot) const;
  /// The value a view chain ends in.
  int root(int v) const;
  /// Byte offset of `v` inside its root.
  size_t offset_in_root(int v) const;
  /// Allocates a buffer of `bytes` (plus the guard of PlanOptions::guard_bytes).
  void* allocate(size_t bytes);
};

// The passes (see the file comment).
void describe_values(PlanIR& ir);
void legalise_layouts(PlanIR& ir);
void convert_inputs(PlanIR& ir);
void place_tasks(PlanIR& ir);
void synchronise(PlanIR& ir);
void plan_memory(PlanIR& ir);
std::vector<PlannedKernel> create_kernels(PlanIR& ir);

/// Whether channels [c0, c0 + c) of a tensor with descriptor `d` form a dense tensor of the same
/// layout, and at which byte offset.
bool dense_slice(const graph::TensorDesc& d, int64_t c0, int64_t c, size_t* offset);
/// Whether two tensors hold their elements the same way (layout, type, quantisation scale), so
/// that one can be a view of (a slice of) the other.
bool same_storage(const graph::TensorDesc& a, const graph::TensorDesc& b);
/// `d` with `channels` channels.
graph::TensorDesc with_channels(graph::TensorDesc d, int64_t channels);

/// The byte the guards after buffers are filled with.
inline constexpr unsigned char kGuardPattern = 0xA5;

}  // namespace stagecraft::executor::planning
