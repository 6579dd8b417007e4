// The executor: streams, events, uploads and downloads, launches and replays of a plan.
#include "executor/executor.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <numeric>
#include <optional>
#include <iostream>
#include <mutex>
#include <set>

#include "common/strings.h"
#include "executor/host_transfer.h"

namespace stagecraft::executor {

namespace {

// One warning per reason and process: the profiler builds thousands of plans, which would all fail
// for the same reason.
void warn_capture_failed(const std::string& reason) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (!warned.insert(reason).second) return;
  std::cerr << "stagecraft: warning: the plan cannot be captured into a CUDA Graph (" << reason
            << "); it runs kernel by kernel on its streams\n";
}

}  // namespace

std::vector<size_t> launch_order(const std::vector<PlannedKernel>& kernels, int caller_stream) {
  std::vector<size_t> order;
  order.reserve(kernels.size());
  std::deque<size_t> deferred;  // caller-stream kernels not yet enqueued, in plan order
  auto flush_through = [&](size_t last) {
    while (!deferred.empty() && deferred.front() <= last) {
      order.push_back(deferred.front());
      deferred.pop_front();
    }
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    const PlannedKernel& k = kernels[i];
    if (k.stream == caller_stream) {
      deferred.push_back(i);
      continue;
    }
    // The latest deferred kernel this one must follow: one recording an event it waits for, or
    // one waiting for the event it records (enqueued later, its wait would see a newer record).
    std::optional<size_t> needed;
    for (size_t d : deferred) {
      const PlannedKernel& c = kernels[d];
      const bool feeds = c.record >= 0 && std::find(k.waits.begin(), k.waits.end(), c.record) != k.waits.end();
      const bool reads = k.record >= 0 && std::find(c.waits.begin(), c.waits.end(), k.record) != c.waits.end();
      if (feeds || reads) needed = d;
    }
    if (needed) flush_through(*needed);
    order.push_back(i);
  }
  flush_through(kernels.size());
  return order;
}

Stream& StreamPool::get(size_t i) {
  while (streams_.size() <= i) {
    streams_.push_back(streams_.empty() ? backend_.create_caller_stream() : backend_.create_stream());
  }
  return *streams_[i];
}

Executor::Executor(ExecutionPlan& plan, StreamPool* pool, ExecutorOptions options)
    : plan_(plan),
      options_(options),
      limiter_(options.adapt_threads && plan.can_limit_threads() ? plan.parallelism() : 1) {
  for (int s = 0; s < plan.num_streams(); ++s) {
    if (pool) {
      streams_.push_back(&pool->get(static_cast<size_t>(s)));
    } else {
      owned_.push_back(s == 0 ? plan.backend().create_caller_stream() : plan.backend().create_stream());
      streams_.push_back(owned_.back().get());
    }
  }
  for (int e = 0; e < plan.num_events(); ++e) events_.push_back(plan.backend().create_event());
  int caller = -1;
  for (size_t s = 0; s < streams_.size(); ++s)
    if (streams_[s]->runs_on_caller()) caller = static_cast<int>(s);
  order_ = launch_order(plan.kernels(), caller);
}

Executor::~Executor() {
  // Streams must be idle before kernels (owned by the plan) can go away.
  for (Stream* s : streams_) {
    try {
      s->synchronize();
    } catch (...) {
    }
  }
}

void Executor::set_inputs(const std::vector<HostTensor>& inputs) {
  const auto& refs = plan_.inputs();
  if (inputs.size() != refs.size()) {
    throw BackendError(cat("the graph takes ", refs.size(), " input(s), got ", inputs.size()));
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    if (inputs[i].shape != refs[i].desc.shape) {
      throw BackendError(cat("input ", i, " has shape ", inputs[i].shape.to_string(),
                             " but the graph expects ", refs[i].desc.shape.to_string()));
    }
    set_input(i, inputs[i].data);
  }
}

void Executor::set_input(size_t index, std::span<const float> values) {
  const auto& refs = plan_.inputs();
  if (index >= refs.size()) throw BackendError(cat("the graph takes ", refs.size(), " input(s), not ", index + 1));
  if (values.size() != static_cast<size_t>(refs[index].desc.shape.numel())) {
    throw BackendError(cat("input ", index, " has ", values.size(), " values but the graph expects ",
                           refs[index].desc.shape.to_string()));
  }
  upload_tensor(plan_.backend(), refs[index], values);
}

void Executor::enqueue(std::vector<KernelTiming>* timings,
                       const std::vector<std::unique_ptr<Kernel>>* limited) {
  const auto& kernels = plan_.kernels();
  const auto start = std::chrono::steady_clock::now();
  if (timings) timings->assign(kernels.size(), KernelTiming{});
  auto now_us = [start] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
        .count();
  };
  for (size_t i : order_) {
    const PlannedKernel& k = kernels[i];
    Stream& stream = *streams_[k.stream];
    for (int e : k.waits) stream.wait(*events_[e]);
    if (timings) {
      KernelTiming* slot = &(*timings)[i];
      slot->kernel = i;
      stream.host_callback([slot, now_us] { slot->start_us = now_us(); });
    }
    Kernel* kernel = limited && (*limited)[i] ? (*limited)[i].get() : k.kernel.get();
    kernel->launch(stream);
    if (timings) {
      KernelTiming* slot = &(*timings)[i];
      stream.host_callback([slot, now_us] { slot->end_us = now_us(); });
    }
    if (k.record >= 0) stream.record(*events_[k.record]);
  }
}

bool Executor::replay() {
  if (!options_.replay_cuda_graph || !plan_.backend().can_capture()) return false;
  if (!capture_tried_) {
    capture_tried_ = true;
    // One ordinary run first: libraries allocate workspaces and load kernels lazily on their first
    // call, which must not happen while a capture records.
    enqueue(nullptr);
    for (Stream* s : streams_) s->synchronize();
    std::vector<Stream*> others(streams_.begin() + 1, streams_.end());
    try {
      captured_ = plan_.backend().capture(*streams_[0], others, [this] { enqueue(nullptr); });
    } catch (const BackendError& e) {
      // An op or library call that cannot be captured: this plan runs in stream mode.
      captured_.reset();
      warn_capture_failed(e.what());
    }
  }
  if (!captured_) return false;
  captured_->launch(*streams_[0]);
  return true;
}

void Executor::execute(std::vector<KernelTiming>* timings) {
  const int limit = options_.threads > 0 && plan_.can_limit_threads() ? options_.threads
                    : timings                                          ? 0
                                                                       : limiter_.limit();
  const auto* limited = limit > 0 ? &plan_.limited_kernels(limit) : nullptr;
  const bool watch_idle = limit > 0 && options_.threads == 0;  // see below
  if (watch_idle) idle_.begin();
  const auto t0 = std::chrono::steady_clock::now();
  if (timings || limited || !replay()) enqueue(timings, limited);
  for (Stream* s : streams_) s->synchronize();
  if (timings || captured_) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (limit == 0 && options_.adapt_threads && plan_.can_limit_threads()) {
    other_load_.tick();
    limiter_.note_other_load(other_load_.cores());
  }
  limiter_.record(ms);
  // While limited, whether the cores the limit leaves sit idle during the runs (the other process
  // gone), over runs that add up to a quarter of a second (the counters tick every 10 ms).
  if (!watch_idle) {
    idle_.reset();
    return;
  }
  idle_.end();
  if (idle_.measured_s() >= 0.25) {
    if (const std::optional<double> idle = idle_.idle_cores()) limiter_.note_idle_cores(*idle);
    idle_.reset();
  }
}

double Executor::execute_repeated(int times) {
  const auto& kernels = plan_.kernels();
  if (barrier_.empty() && streams_.size() > 1) {
    for (size_t s = 0; s < streams_.size(); ++s) barrier_.push_back(plan_.backend().create_event());
  }
  // A caller stream blocks the host in its waits: at the barrier it waits last, after the others'
  // waits are queued.
  std::vector<size_t> waiting(streams_.size());
  std::iota(waiting.begin(), waiting.end(), size_t{0});
  std::stable_partition(waiting.begin(), waiting.end(),
                        [&](size_t s) { return !streams_[s]->runs_on_caller(); });
  const auto t0 = std::chrono::steady_clock::now();
  if (options_.replay_cuda_graph && (captured_ || !capture_tried_)) {
    // Replays on the origin stream follow each other: no barrier needed.
    bool replayed = true;
    for (int r = 0; r < times && replayed; ++r) replayed = replay();
    if (replayed) {
      for (Stream* s : streams_) s->synchronize();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                 .count() /
             std::max(1, times);
    }
  }
  for (int r = 0; r < times; ++r) {
    for (size_t i : order_) {
      const PlannedKernel& k = kernels[i];
      Stream& stream = *streams_[k.stream];
      for (int e : k.waits) stream.wait(*events_[e]);
      k.kernel->launch(stream);
      if (k.record >= 0) stream.record(*events_[k.record]);
    }
    if (streams_.size() > 1) {  // every stream waits for all others before the next repetition
      for (size_t s = 0; s < streams_.size(); ++s) streams_[s]->record(*barrier_[s]);
      for (size_t s : waiting)
        for (size_t o = 0; o < streams_.size(); ++o)
          if (o != s) streams_[s]->wait(*barrier_[o]);
    }
  }
  for (Stream* s : streams_) s->synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         std::max(1, times);
}

std::vector<double> Executor::isolated_kernel_ms(int repeats) {
  std::vector<double> result;
  for (const PlannedKernel& k : plan_.kernels()) {
    Stream& stream = *streams_[k.stream];
    k.kernel->launch(stream);  // warm
    stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) k.kernel->launch(stream);
    stream.synchronize();
    result.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        repeats);
  }
  return result;
}

std::vector<HostTensor> Executor::outputs() const {
  std::vector<HostTensor> result;
  for (const TensorRef& ref : plan_.outputs()) result.push_back(download_tensor(plan_.backend(), ref));
  return result;
}

void Executor::output_into(size_t index, std::span<float> out) const {
  const auto& refs = plan_.outputs();
  if (index >= refs.size()) throw BackendError(cat("the graph has ", refs.size(), " output(s), not ", index + 1));
  download_tensor(plan_.backend(), refs[index], out);
}

std::vector<HostTensor> Executor::run(const std::vector<HostTensor>& inputs) {
  set_inputs(inputs);
  execute();
  return outputs();
}

}  // namespace stagecraft::executor
