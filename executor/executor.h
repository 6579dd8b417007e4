#pragma once
/// The executor: runs an ExecutionPlan on its backend — streams and events, uploads of the inputs
/// and downloads of the outputs, kernel by kernel or by replaying a captured run (CUDA Graph).
///
/// Example:
///   ExecutionPlan plan(graph, schedule, weights, *backend);
///   Executor executor(plan);
///   std::vector<HostTensor> outputs = executor.run({input});
///   double ms = executor.execute_repeated(10);  // mean of 10 back-to-back runs

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "executor/plan.h"
#include "executor/thread_limiter.h"
#include "common/cpu_counters.h"

namespace stagecraft::executor {

/// Timing of one kernel in one run (for traces).
struct KernelTiming {
  size_t kernel = 0;    ///< index in ExecutionPlan::kernels()
  double start_us = 0;  ///< from the start of the run
  double end_us = 0;
};

/// The order in which the executor enqueues `kernels` when `caller_stream` runs its work on the
/// enqueuing thread (-1: none): the other streams' kernels as early as the plan allows, the caller
/// stream's as late as the plan allows — a caller-stream kernel is enqueued only once a kernel of
/// another stream waits for what it records, or records what it waits for, or at the end — so
/// that the other streams are busy while the host works. Every wait still sees the record it sees
/// in plan order, and each stream keeps its plan order.
std::vector<size_t> launch_order(const std::vector<PlannedKernel>& kernels, int caller_stream);

/// Streams kept across executors (the profiler runs thousands of small plans: creating worker
/// threads for each would cost more than the stages it times).
class StreamPool {
 public:
  /// A pool of streams of `backend`.
  explicit StreamPool(Backend& backend) : backend_(backend) {}
  /// Stream `i`, created on first use; stream 0 is a caller stream (Backend::create_caller_stream).
  Stream& get(size_t i);
  /// Streams made so far.
  size_t size() const { return streams_.size(); }
  /// Destroys every stream (no executor may be using them): their worker threads end, and on the
  /// CPU their OpenMP teams with them. get() makes them again.
  void clear() { streams_.clear(); }

 private:
  Backend& backend_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

/// How an executor launches a plan.
struct ExecutorOptions {
  /// Capture the whole run once as a CUDA Graph and replay it when the backend can; otherwise,
  /// or when false, launch kernel by kernel on the streams ("stream mode").
  bool replay_cuda_graph = true;
  /// execute() runs the plan's kernels built for fewer intra-op threads while its runs show that
  /// another process holds cores (ThreadLimiter; needs PlanOptions::can_limit_threads).
  bool adapt_threads = true;
  /// At most this many intra-op threads per kernel on every run (the plan's kernels built again
  /// for it; needs PlanOptions::can_limit_threads); 0: the plan's, adapting as above.
  int threads = 0;
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
  /// Uploads graph input `index` from `values` (its shape's numel() floats, logical NCHW/NC
  /// order) without a copy of them on the way (for callers that hold the data elsewhere).
  void set_input(size_t index, std::span<const float> values);
  /// Launches every kernel (or replays the captured run) and blocks until all streams are done.
  /// With `timings`, runs in stream mode and records when each kernel started and ended (host
  /// callbacks on the streams; for traces, not for timing).
  void execute(std::vector<KernelTiming>* timings = nullptr);
  /// Runs of execute() made with kernels built for fewer intra-op threads (see ThreadLimiter).
  int64_t limited_runs() const { return limiter_.limited_runs(); }
  /// Whether runs are replayed from a capture (known after the first execute).
  bool captured() const { return captured_ != nullptr; }
  /// Downloads the outputs of the last run.
  std::vector<HostTensor> outputs() const;
  /// Downloads output `index` of the last run into `out` (its shape's numel() floats).
  void output_into(size_t index, std::span<float> out) const;
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
  std::vector<size_t> order_;                    // launch_order of the plan's kernels
  ExecutorOptions options_;
  ThreadLimiter limiter_;
  IdleCores idle_;  // during the current stretch of limited runs
  OtherLoad other_load_;  // whether slow runs come with another process holding cores
  bool capture_tried_ = false;
  std::unique_ptr<CapturedWork> captured_;

  // Launches the plan's kernels, or `limited`'s where it has one (ExecutionPlan::limited_kernels).
  void enqueue(std::vector<KernelTiming>* timings,
               const std::vector<std::unique_ptr<Kernel>>* limited = nullptr);
  bool replay();  // launches the captured run if there is (or can be) one
};

}  // namespace stagecraft::executor
