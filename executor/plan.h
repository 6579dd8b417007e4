#pragma once
/// The execution plan: built once from (graph, schedule, weights, backend), it holds one kernel per
/// op or merged op, the stream each runs on, the events where a dependency crosses streams (no
/// device-wide synchronisation between stages), and a memory plan that places channel slices and
/// concatenations as views wherever the layout allows and reuses buffers by liveness.
///
/// It is built by passes over one plan representation (executor/plan/plan_ir.h), each in its own
/// file: layouts (descriptors, a native layout for every kernel, input conversions) → placement
/// (tasks, views, launch order, streams, threads) → synchronisation (events, happens-before) →
/// memory (liveness, reuse, addresses) → kernels (created, workspaces, bound).
///
/// Inputs: a validated schedule of the graph. Output: kernels in launch order. Streams: group g of
/// a stage runs on stream g mod max_streams; a stage with G groups gives each of its kernels
/// parallelism / min(G, max_streams) threads. Memory: a buffer is reused only when every access to
/// its previous tenant happens before (same stream, or through an event) every write of the new.
/// Layouts: where the backend has only a reference kernel for an op in its planned layout, the op
/// runs in a layout with a native kernel and conversions around it (PlanOptions::reference_kernels),
/// and the plan reports it (fallbacks()).
///
/// Example (the executor runs it, executor/executor.h):
///   ExecutionPlan plan(graph, schedule, weights, *backend);
///   Executor executor(plan);
///   std::vector<HostTensor> outputs = executor.run({input});

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/tensor.h"
#include "graph/layout_assignment.h"
#include "graph/weights.h"
#include "scheduler/schedule.h"

namespace stagecraft::executor {

/// Options of plan construction.
struct PlanOptions {
  /// The layouts of the rank-4 activations: the backend's default, one for all, or one per value
  /// (graph inputs keep theirs). Where a kernel cannot read an input in its layout, the plan
  /// converts it.
  graph::LayoutAssignment layouts;
  int max_streams = 8;                  ///< stream slots (groups beyond share streams)
  bool reuse_memory = true;             ///< reuse buffers by liveness
  /// Copy outputs into plain NCHW/NC tensors for download; the profiler turns this off so that a
  /// stage is timed with exactly the kernels the full plan runs.
  bool plain_outputs = true;
  /// Let graph inputs become views into concatenations, as op outputs do; the profiler sets this
  /// because a measured stage's inputs stand for op outputs of the full graph.
  bool inputs_may_be_views = false;
  /// Convert rank-4 graph inputs to `layout` where readers need it, before the first stage. Off
  /// (the layout profiler): inputs are treated as op outputs, converted per consumer only when
  /// its kernel cannot read them in their layout, as the plan does for op outputs.
  bool convert_inputs = true;
  /// What to do where the backend has only a reference kernel for an op in its planned layouts.
  enum class ReferenceKernels {
    kAvoid,   ///< run the op in the first layout of Backend::capabilities().layouts with a native
              ///< kernel, converting around it (reference only where none has one)
    kRefuse,  ///< throw BackendError (the layout profiler: such a layout is not an option)
    kAllow,   ///< run the reference kernel (tests of the kernels themselves)
  };
  ReferenceKernels reference_kernels = ReferenceKernels::kAvoid;
  /// Bytes of guard after every buffer, filled with a pattern that guards_intact() checks (tests:
  /// kernels must never write outside their tensors). 0: none.
  size_t guard_bytes = 0;
  /// Keep what it takes to build the kernels again with fewer intra-op threads
  /// (ExecutionPlan::limited_kernels, which Executor::execute uses when its runs show that another
  /// process holds cores). The weights the plan is made from must then outlive it.
  bool can_limit_threads = false;
};

/// An op that does not run in the layout the plan was asked for.
struct LayoutFallback {
  std::string op;                     ///< op name (or "merge(...)")
  graph::Layout wanted;               ///< its planned output layout
  std::optional<graph::Layout> used;  ///< the layout it runs in; empty: in `wanted`, by reference
  std::string reason;                 ///< the backend's answer for `wanted`
};

/// The rank-4 activation layout a plan of `graph` uses where `options.layouts` names none for a
/// value: the uniform layout, else the backend's
/// preferred one for the graph's compute type (int8 for quantised graphs).
graph::Layout activation_layout(const Backend& backend, const graph::Graph& graph,
                                const PlanOptions& options);

/// What the memory plan achieved.
struct MemoryReport {
  size_t activation_bytes_without_reuse = 0;  ///< every tensor in its own buffer (views shared)
  size_t activation_bytes = 0;                ///< allocated with reuse
  size_t workspace_bytes = 0;                 ///< kernel scratch, one arena per stream
  size_t views = 0;                           ///< tensors placed inside another (no copy)
  size_t copies = 0;                          ///< concatenation parts that had to be copied
};

/// One kernel of the plan, in launch order.
struct PlannedKernel {
  std::unique_ptr<Kernel> kernel;  ///< the backend kernel, bound to its tensors
  int stream = 0;                  ///< stream slot
  int stage = -1;                  ///< schedule stage (1-based), 0 for input/output copies
  std::vector<int> waits;          ///< events waited for before launch
  int record = -1;                 ///< event recorded after launch (-1: none)
  std::string label;               ///< op name(s), for traces
  std::vector<graph::OpId> ops;    ///< graph ops it computes (empty for copies)
};

/// The plan. Not copyable; owns kernels and buffers.
class ExecutionPlan {
 public:
  /// Builds the plan; throws ScheduleError for a schedule of another graph, BackendError when the
  /// backend cannot run an op (naming it), GraphError for missing weights.
  ExecutionPlan(const graph::Graph& graph, const scheduler::Schedule& schedule,
                const graph::WeightStore& weights, Backend& backend,
                const PlanOptions& options = {});
  ~ExecutionPlan();
  ExecutionPlan(const ExecutionPlan&) = delete;
  ExecutionPlan& operator=(const ExecutionPlan&) = delete;

  /// Kernels in launch order.
  const std::vector<PlannedKernel>& kernels() const { return kernels_; }
  /// Number of stream slots used.
  int num_streams() const { return num_streams_; }
  /// Number of events.
  int num_events() const { return num_events_; }
  /// The memory plan's figures.
  const MemoryReport& memory() const { return memory_; }
  /// Where each graph input is uploaded (plain layout), in graph input order.
  const std::vector<TensorRef>& inputs() const { return inputs_; }
  /// Where each graph output can be downloaded after a run (plain layout), in output order.
  const std::vector<TensorRef>& outputs() const { return outputs_; }
  /// The backend the plan was built for.
  Backend& backend() const { return backend_; }
  /// The activation layout asked for (uniform, or the default of per-value layouts).
  graph::Layout layout() const { return layout_; }
  /// Ops run in another layout than planned (or by reference); see PlanOptions::reference_kernels.
  const std::vector<LayoutFallback>& fallbacks() const { return fallbacks_; }
  /// The layouts of the rank-4 op outputs as run, e.g. "nChw8c" or "114 nhwc + 5 nChw16c".
  const std::string& layout_summary() const { return layout_summary_; }
  /// Intra-op threads of a kernel that has the device to itself (kernels of concurrent stages
  /// share them).
  int parallelism() const { return parallelism_; }
  /// Whether limited_kernels() can build kernels again (PlanOptions::can_limit_threads).
  bool can_limit_threads() const { return !rebuild_.empty(); }
  /// The kernels built again for at most `threads` intra-op threads, bound to the same tensors and
  /// workspace, in kernels() order; nullptr where a kernel already uses no more, or where the
  /// backend cannot build it so (its kernel then runs as planned). Built on the first call for a
  /// thread count, kept after; thread-safe. Needs can_limit_threads().
  const std::vector<std::unique_ptr<Kernel>>& limited_kernels(int threads);
  /// With PlanOptions::guard_bytes: whether every guard still holds its pattern (no kernel wrote
  /// past the end of a buffer); lists the overwritten ones in `damaged` when given.
  bool guards_intact(std::vector<std::string>* damaged = nullptr) const;

 private:
  friend class PlanBuilder;
  Backend& backend_;
  graph::Layout layout_;
  std::vector<PlannedKernel> kernels_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<std::unique_ptr<graph::OpWeights>> merged_weights_;  // kernels point into them
  std::vector<TensorRef> inputs_;
  std::vector<TensorRef> outputs_;
  int num_streams_ = 1;
  int num_events_ = 0;
  int parallelism_ = 1;
  // What a kernel is built again from (PlanOptions::can_limit_threads): its spec, its tensors and
  // its workspace (and how large that is). Empty: the plan does not keep them.
  struct Rebuild {
    KernelSpec spec;
    std::vector<TensorRef> srcs, dsts;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    bool copy = false;
  };
  std::vector<Rebuild> rebuild_;
  std::mutex limited_mutex_;
  std::map<int, std::vector<std::unique_ptr<Kernel>>> limited_;  // by thread count
  MemoryReport memory_;
  std::vector<LayoutFallback> fallbacks_;
  std::string layout_summary_;
  struct Guard {
    const unsigned char* begin;  // first guard byte (just past the buffer)
    size_t bytes;
    std::string what;
  };
  std::vector<Guard> guards_;
};

}  // namespace stagecraft::executor
