#include "executor/cpu/cpu_stream.h"

#include <cassert>
#include <utility>

namespace stagecraft::executor::cpu {

void CpuEvent::complete(uint64_t sequence) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (sequence > completed_) completed_ = sequence;
  }
  reached_.notify_all();
}

void CpuEvent::block_until(uint64_t sequence) {
  std::unique_lock<std::mutex> lock(mutex_);
  reached_.wait(lock, [&] { return completed_ >= sequence; });
}

CpuStream::CpuStream(const dnnl::engine& engine)
    : dnnl_stream_(engine), worker_([this] { run(); }) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void CpuStream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ++busy_;
  }
  wake_.notify_one();
}

void CpuStream::record(Event& event) {
  auto& e = static_cast<CpuEvent&>(event);
  const uint64_t sequence = e.next_record();
  enqueue([&e, sequence] { e.complete(sequence); });
}

void CpuStream::wait(Event& event) {
  auto& e = static_cast<CpuEvent&>(event);
  const uint64_t sequence = e.last_record();
  if (sequence == 0) return;
  enqueue([&e, sequence] { e.block_until(sequence); });
}

void CpuStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return busy_ == 0; });
  if (error_) {
    std::exception_ptr error = std::exchange(error_, nullptr);
    std::rethrow_exception(error);
  }
}

void CpuStream::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stop requested and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::exception_ptr failure;
    try {
      task();
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure && !error_) error_ = failure;
      --busy_;
    }
    idle_.notify_all();
  }
}

}  // namespace stagecraft::executor::cpu
