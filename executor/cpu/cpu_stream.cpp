#include "executor/cpu/cpu_stream.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <atomic>
#include <cassert>
#include <map>
#include <vector>
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

CpuStream::CpuStream(const dnnl::engine& engine, int index, const void* owner, bool on_caller)
    : dnnl_stream_(engine), index_(index), owner_(owner), on_caller_(on_caller) {
  if (!on_caller_) worker_ = std::thread([this] { run(); });
}

/// The worker streams whose thread keeps an OpenMP team, the owner that ran a kernel last, and
/// the owners in a run. GNU OpenMP counts every team's threads, idle ones included, against the
/// cores; one team too many and all of them sleep between kernels instead of spinning
/// (cpu_stream.h). An owner's teams end when another owner runs while it is not in a run, or when
/// its run ends while another owner holds the cores; owners running at once (sessions served
/// from several threads) keep theirs: ending them would only make them again and again.
class TeamLedger {
 public:
  static TeamLedger& get() {
    // Never destroyed: streams of static objects may go after it at exit.
    static TeamLedger* const ledger = new TeamLedger;
    return *ledger;
  }

  /// On a stream's thread, before a kernel of more than one thread of `owner`.
  void claim(const void* owner) {
    if (owner_.load(std::memory_order_acquire) == owner) return;  // the common case: no lock
    std::lock_guard<std::mutex> lock(mutex_);
    owner_.store(owner, std::memory_order_release);
    end_teams([&](const void* o) { return o != owner && !running(o); });
  }
  /// On worker `s`'s thread, after claim(): it keeps a team from now on.
  void keep(CpuStream& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (s.keeps_team_) return;
    s.keeps_team_ = true;
    kept_.push_back(&s);
  }
  /// `s` is going away (its thread's team ends with the thread).
  void forget(CpuStream& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase(kept_, &s);
    s.keeps_team_ = false;
  }
  /// A run of `owner` begins (its caller stream's first task) or ends (its synchronize()).
  void run_begins(const void* owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++runs_[owner];
  }
  void run_ends(const void* owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = runs_.find(owner); it != runs_.end() && --it->second == 0) runs_.erase(it);
    if (owner_.load(std::memory_order_relaxed) != owner && !running(owner))
      end_teams([&](const void* o) { return o == owner; });
  }
  int size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(kept_.size());
  }

 private:
  bool running(const void* owner) const { return runs_.count(owner) > 0; }
  // Ends the teams of the kept workers whose owner `ends` (each after the work queued on it).
  template <typename Pred>
  void end_teams(Pred ends) {
    std::erase_if(kept_, [&](CpuStream* s) {
      if (!ends(s->owner_)) return false;
      s->keeps_team_ = false;
      s->enqueue([s] { s->end_team(); });
      return true;
    });
  }

  std::mutex mutex_;
  std::atomic<const void*> owner_{nullptr};
  std::vector<CpuStream*> kept_;
  std::map<const void*, int> runs_;  // owners in a run: how many of their caller streams are
};

int CpuStream::kept_teams() { return TeamLedger::get().size(); }

void CpuStream::end_team() {
  // Joins the team's threads (GNU OpenMP: the calling thread's pool is freed, its threads are
  // no longer counted). The next team is a new one, whose threads flush denormals from its first
  // kernel again (place()).
  omp_pause_resource(omp_pause_soft, omp_get_initial_device());
  flushing_team_ = 0;
}

namespace {

// The cores this process may run on (what the OS, taskset or a container gave it), read once.
const std::vector<int>& process_cores() {
  static const std::vector<int> cores = [] {
    std::vector<int> ids;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) ids.push_back(c);
    }
    return ids;
  }();
  return cores;
}

// Flush-to-zero and denormals-are-zero on this thread: a denormal operand costs x86 cores a
// microcode assist of about a hundred cycles per instruction (a tensor of denormals made a run
// many times slower, a cheap denial of service for a server); as zeros they cost nothing, and a
// result differs by less than 1.2e-38.
void flush_denormals_here() {
#if defined(__SSE__) || defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
#endif
}

}  // namespace

void CpuStream::place(int threads) {
  if (threads > 1) {
    TeamLedger::get().claim(owner_);
    if (!on_caller_) TeamLedger::get().keep(*this);
  }
  // This thread's OpenMP team flushes from the first kernel of each larger team size (GNU OpenMP
  // keeps a team per thread: a caller stream run from another thread starts over); the thread
  // itself on every run of a caller stream, whose mode synchronize() gives back.
  if (const auto self = std::this_thread::get_id(); self != flushing_thread_) {
    flushing_thread_ = self;
    flushing_team_ = 0;
  }
  if (threads > flushing_team_) {
    flushing_team_ = threads;
#pragma omp parallel num_threads(threads)
    flush_denormals_here();
  }
  flush_denormals_here();
  // A caller stream (a sequential plan, the first stream of others) keeps the cores the caller
  // has: pinning it to fixed cores put the single stream of every one-thread server replica on
  // core 0, so that two replicas shared one core (each at half speed).
  if (on_caller_) return;
  const std::vector<int>& allowed = process_cores();
  const int cores = static_cast<int>(allowed.size());
  if (cores <= 1 || threads == placed_threads_) return;
  placed_threads_ = threads;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (threads >= cores) {
    for (int c : allowed) CPU_SET(c, &set);
  } else {
    for (int k = 0; k < threads; ++k) CPU_SET(allowed[static_cast<size_t>((index_ * threads + k) % cores)], &set);
  }
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
}

CpuStream::~CpuStream() {
  if (on_caller_) {
    restore_caller();
    return;
  }
  TeamLedger::get().forget(*this);  // before the thread ends: no end_team() is queued after this
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void CpuStream::run_now(std::function<void()>& task) {
  if (!caller_changed_) {
    caller_changed_ = true;
    TeamLedger::get().run_begins(owner_);
    caller_threads_ = omp_get_max_threads();
    if (pthread_getaffinity_np(pthread_self(), sizeof(caller_cores_), &caller_cores_) != 0)
      CPU_ZERO(&caller_cores_);
#if defined(__SSE__) || defined(__x86_64__)
    caller_mxcsr_ = _mm_getcsr();
#endif
  }
  try {
    task();
  } catch (...) {
    if (!error_) error_ = std::current_exception();
  }
}

void CpuStream::restore_caller() {
  if (!caller_changed_) return;
  caller_changed_ = false;
  TeamLedger::get().run_ends(owner_);
  omp_set_num_threads(caller_threads_);
  give_back_cores();
#if defined(__SSE__) || defined(__x86_64__)
  _mm_setcsr(caller_mxcsr_);  // the caller's own floating-point mode (its OpenMP team keeps flushing)
#endif
}

void CpuStream::give_back_cores() {
  if (placed_threads_ >= 0 && CPU_COUNT(&caller_cores_) > 0)
    pthread_setaffinity_np(pthread_self(), sizeof(caller_cores_), &caller_cores_);
  placed_threads_ = -1;
}

void CpuStream::enqueue(std::function<void()> task) {
  if (on_caller_) {
    run_now(task);
    return;
  }
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
  if (on_caller_) {
    restore_caller();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return;
  }
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
    bool idle = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure && !error_) error_ = failure;
      idle = --busy_ == 0;
    }
    // Wake a synchronising host only when the queue is empty: waking it after every task would
    // take a core from the kernels for nothing.
    if (idle) idle_.notify_all();
  }
}

}  // namespace stagecraft::executor::cpu
