#pragma once
// Internal to the CPU backend: worker-thread streams and counter events.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

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

/// An in-order queue executed by one worker thread.
class CpuStream : public Stream {
 public:
  /// Stream number `index` (used to give concurrent streams different cores).
  CpuStream(const dnnl::engine& engine, int index);
  ~CpuStream() override;

  void record(Event& event) override;
  void wait(Event& event) override;
  /// Blocks until the queue is empty; rethrows the first failure of a task since the last call.
  void synchronize() override;
  void host_callback(std::function<void()> fn) override { enqueue(std::move(fn)); }

  /// Enqueues work; it runs on the worker thread with `dnnl_stream()` available.
  void enqueue(std::function<void()> task);
  /// The worker's oneDNN stream (valid on the worker thread).
  dnnl::stream& dnnl_stream() { return dnnl_stream_; }
  /// Called on the worker before a kernel of `threads` threads: restricts the worker to its share
  /// of the cores when it runs beside other streams (threads < cores), else lets it use all.
  /// Without this, Linux tends to wake a stream's worker on the core of the stream that signalled
  /// it, and two streams then share one core for milliseconds.
  void place(int threads);

 private:
  void run();

  dnnl::stream dnnl_stream_;
  int index_;
  int placed_threads_ = -1;  // threads of the current placement (-1: not placed)
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> tasks_;
  size_t busy_ = 0;  // tasks enqueued and not finished
  bool stop_ = false;
  std::exception_ptr error_;  // first failure of a task, rethrown by synchronize()
  std::thread worker_;
};

}  // namespace stagecraft::executor::cpu
