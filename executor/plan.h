#pragma once
/// The execution plan: built once from (graph, schedule, weights, backend), it holds one kernel per
/// op or merged op, the stream each runs on, the events where a dependency crosses streams (no
/// device-wide synchronisation between stages), and a memory plan that places channel slices and
/// concatenations as views wherever the layout allows and reuses buffers by liveness.
///
/// Inputs: a validated schedule of the graph. Output: kernels in launch order. Streams: group g of
/// a stage runs on stream g mod max_streams; a stage with G groups gives each of its kernels
/// parallelism / min(G, max_streams) threads. Memory: a buffer is reused only when every access to
/// its previous tenant happens before (same stream, or through an event) every write of the new.
///
/// Example:
///   ExecutionPlan plan(graph, schedule, weights, *backend);
///   Executor executor(*backend, plan);
///   std::vector<HostTensor> outputs = executor.run({input});

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/tensor.h"
#include "graph/weights.h"
#include "scheduler/schedule.h"

namespace stagecraft::executor {

/// Options of plan construction.
struct PlanOptions {
  std::optional<graph::Layout> layout;  ///< rank-4 activation layout; default: the backend's
  /// Per graph value (by id): the layout of each rank-4 op output, overriding `layout` (empty:
  /// one layout for all). Where a kernel cannot read an input in its layout, the plan converts it.
  std::vector<graph::Layout> value_layouts;
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
};

/// The rank-4 activation layout a plan of `graph` uses: `options.layout`, else the backend's
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

/// A graph output: where it lives and its logical shape.
struct OutputSlot {
  TensorRef ref;  ///< plain (NCHW / NC) tensor after the run
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
  /// The activation layout used.
  graph::Layout layout() const { return layout_; }

 private:
  struct Builder;
  Backend& backend_;
  graph::Layout layout_;
  std::vector<PlannedKernel> kernels_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<graph::OpWeights> merged_weights_;
  std::vector<TensorRef> inputs_;
  std::vector<TensorRef> outputs_;
  int num_streams_ = 1;
  int num_events_ = 0;
  MemoryReport memory_;
};

/// Timing of one kernel in one run (for traces).
struct KernelTiming {
  size_t kernel = 0;    ///< index in ExecutionPlan::kernels()
  double start_us = 0;  ///< from the start of the run
  double end_us = 0;
};

/// Streams kept across executors (the profiler runs thousands of small plans: creating worker
/// threads for each would cost more than the stages it times).
class StreamPool {
 public:
  /// A pool of streams of `backend`.
  explicit StreamPool(Backend& backend) : backend_(backend) {}
  /// Stream `i`, created on first use.
  Stream& get(size_t i);

 private:
  Backend& backend_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

/// How an executor launches a plan.
struct ExecutorOptions {
  /// Capture the whole run once and replay it (CUDA Graph) when the backend can; otherwise, or
  /// when false, launch kernel by kernel on the streams ("stream mode").
  bool graph = true;
};

/// Runs a plan on its backend: streams and events, uploads and downloads.
class Executor {
 public:
  /// Streams and events for `plan` (which must outlive the executor); streams come from `pool`
  /// when given (it must outlive the executor), else the executor creates its own.
  explicit Executor(ExecutionPlan& plan, StreamPool* pool = nullptr,
                    ExecutorOptions options = {});
  ~Executor();

  /// Uploads inputs (logical NCHW/NC, one per graph input), runs once, returns the outputs.
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs);
  /// Uploads inputs without running.
  void set_inputs(const std::vector<HostTensor>& inputs);
  /// Launches every kernel (or replays the captured run) and blocks until all streams are done.
  /// With `timings`, runs in stream mode and records when each kernel started and ended (host
  /// callbacks on the streams; for traces, not for timing).
  void execute(std::vector<KernelTiming>* timings = nullptr);
  /// Whether runs are replayed from a capture (known after the first execute).
  bool captured() const { return captured_ != nullptr; }
  /// Downloads the outputs of the last run.
  std::vector<HostTensor> outputs() const;
  /// Launches all kernels `times` times back to back, with an event barrier across streams
  /// between repetitions (no host synchronisation), then blocks until done; returns the mean
  /// time of one repetition (ms). Used to time stages without the cost of waking the host.
  double execute_repeated(int times);
  /// Time of each kernel run alone: `repeats` back-to-back launches on its stream, one
  /// synchronisation, per-launch mean (ms). Run once first so that inputs hold data.
  std::vector<double> isolated_kernel_ms(int repeats);

 private:
  ExecutionPlan& plan_;
  std::vector<std::unique_ptr<Stream>> owned_;
  std::vector<Stream*> streams_;
  std::vector<std::unique_ptr<Event>> events_;
  std::vector<std::unique_ptr<Event>> barrier_;  // one per stream, for execute_repeated
  ExecutorOptions options_;
  bool capture_tried_ = false;
  std::unique_ptr<CapturedWork> captured_;

  void enqueue(std::vector<KernelTiming>* timings);
  bool replay();  // launches the captured run if there is (or can be) one
};

}  // namespace stagecraft::executor
