#pragma once
// Internal to the CPU backend: worker-thread streams and counter events.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <sched.h>

#include <dnnl.hpp>

#include "executor/backend.h"

namespace stagecraft::executor::cpu {

/// Completion counter: the host counts records as it enqueues them; the worker that reaches a
/// record raises `completed` to that count. A wait captures the count at enqueue time.
class CpuEvent : public Event {
 public:
  /// Called on the host when a record is enqueued; returns its sequence number.
  uint64_t next_record() { return ++enqueued_; }
  /// The sequence number of the last record enqueued (0: never recorded).
  uint64_t last_record() const { return enqueued_.load(); }
  /// Called on a worker: the record `sequence` has been reached.
  void complete(uint64_t sequence);
  /// Called on a worker: blocks until record `sequence` has been reached.
  void block_until(uint64_t sequence);

 private:
  std::atomic<uint64_t> enqueued_{0};
  std::mutex mutex_;
  std::condition_variable reached_;
  uint64_t completed_ = 0;
};

/// An in-order queue executed by one worker thread, or — a caller stream — by the thread that
/// enqueues the work, at once.
///
/// Why a caller stream: GNU OpenMP keeps a team of workers for every thread that ever opened a
/// parallel region, and once the process holds more of them than there are cores, all teams stop
/// spinning between regions and put their workers to sleep (measured: 8-30 us more per kernel, a
/// third of mobilenet_v3_small's run). A user's host thread often has a team already (PyTorch
/// in the same process); kernels run on it, a worker thread would add a second team.
///
/// For the same reason a worker's team does not outlive its owner's turn: streams belong to an
/// owner (a backend, i.e. a session); the first kernel of more than one thread that another owner
/// runs makes the workers of owners not in a run end their teams (`omp_pause_resource`; made
/// again by their next kernel), and so does a run's end while another owner holds the cores. A
/// kept schedule with concurrent stages then slows only its own runs, not every session beside
/// it in the process. Owners running at once keep their teams (ending them would only churn).
class CpuStream : public Stream {
 public:
  /// Stream number `index` (used to give concurrent streams different cores) of `owner` (streams
  /// of one owner keep their teams while it runs); `on_caller`: a caller stream (no worker thread).
  CpuStream(const dnnl::engine& engine, int index, const void* owner, bool on_caller = false);
  ~CpuStream() override;

  bool runs_on_caller() const override { return on_caller_; }

  void record(Event& event) override;
  void wait(Event& event) override;
  /// Blocks until the queue is empty; rethrows the first failure of a task since the last call.
  void synchronize() override;
  void host_callback(std::function<void()> fn) override { enqueue(std::move(fn)); }

  /// Enqueues work; it runs on the worker thread (a caller stream: now, on this thread) with
  /// `dnnl_stream()` available.
  void enqueue(std::function<void()> task);
  /// The worker's oneDNN stream (valid on the worker thread).
  dnnl::stream& dnnl_stream() { return dnnl_stream_; }
  /// Called on the stream's thread before a kernel of `threads` threads: denormals flush to zero
  /// on it and its OpenMP team, and a worker stream keeps to its share of the process's cores
  /// when it runs beside other streams (threads < cores), else uses all of them (a caller stream
  /// keeps the caller's). Without this, Linux tends to wake a stream's worker on the core of the
  /// stream that signalled it, and two streams then share one core for milliseconds.
  void place(int threads);

  /// Worker streams whose thread now keeps an OpenMP team of more than one thread (all owners;
  /// for tests and diagnostics).
  static int kept_teams();

 private:
  friend class TeamLedger;
  void end_team();  // on the worker thread: ends its OpenMP team (the ledger asked)
  void run();
  void run_now(std::function<void()>& task);  // a caller stream's enqueue
  void restore_caller();  // gives the caller thread back its cores and OpenMP thread count
  void give_back_cores();  // the caller's cores, if place() changed them


  dnnl::stream dnnl_stream_;
  int index_;
  const void* owner_;
  bool keeps_team_ = false;  // in the ledger: this worker's thread keeps a team (guarded by the ledger)
  int placed_threads_ = -1;  // threads of the current placement (-1: not placed)
  int flushing_team_ = 0;    // the largest OpenMP team of flushing_thread_ whose threads flush denormals
  std::thread::id flushing_thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> tasks_;
  size_t busy_ = 0;  // tasks enqueued and not finished
  bool stop_ = false;
  std::exception_ptr error_;  // first failure of a task, rethrown by synchronize()
  bool on_caller_;
  // A caller stream changes the caller's affinity (place) and OpenMP thread count (kernels) only
  // between its first task and synchronize(), which puts them back.
  bool caller_changed_ = false;
  cpu_set_t caller_cores_{};
  int caller_threads_ = 0;
  unsigned caller_mxcsr_ = 0;  // the caller's floating-point control, put back by synchronize()
  std::thread worker_;  // none on a caller stream
};

}  // namespace stagecraft::executor::cpu
