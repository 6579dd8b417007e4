#pragma once
/// ThreadLimiter: how many intra-op threads an executor's kernels use, decided from its own run
/// latencies. Kernels split their work evenly over their threads (oneDNN's OpenMP kernels,
/// statically), so when another process holds one of the cores every kernel waits for the thread
/// that shares it: on 2 cores with one kept busy, resnet50 and inception_v3 took 2.2-2.6x their
/// idle latency with 2 threads and 1.8-2.0x with 1 (bench/results/contention_zen4.md).
///
/// The rule: runs with the plan's threads set the reference (the fastest median of 5 runs so
/// far). When the median of the last 5 runs is 1.3x that or more, and something other than this
/// process held half a core or more lately (note_other_load: OtherLoad, the per-CPU counters;
/// unknown counts as yes), the kernels try half the threads. Slow runs with no other load are
/// noise or this process's own doing, which fewer threads do not cure: on a 16-core Xeon VM the
/// medians of an idle machine spread past 1.3x, and limits set off by that made resnet50 int8
/// 3.5 ms instead of 2.9 (bench/results/interleave_gap_amx_xeon16.md). The kernels they keep the limit while its runs are faster than the slow ones that set it off,
/// and go back when they are not, or when a probe run with every thread takes under 0.8x the
/// limited median (probes after 2 limited runs, then 4, 8 and every 16, and sooner when the cores
/// the limit leaves sat idle: note_idle_cores, at most once per 4 limited runs, less often after
/// each such probe that was slower).
/// After a try that did not help the next waits 16 runs, twice as long after each such try (up
/// to 1024). An idle machine never pays: the limit is tried only after slow runs.
///
/// Example (what Executor::execute does):
///   ThreadLimiter limiter(plan.parallelism());
///   for (...) {
///     const int limit = limiter.limit();  // 0: the plan's kernels
///     run(limit > 0 ? plan.limited_kernels(limit) : plan's kernels);
///     load.tick(); limiter.note_other_load(load.cores());
///     limiter.record(ms);
///   }

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace stagecraft::executor {

class ThreadLimiter {
 public:
  /// `threads`: the most intra-op threads a kernel of the plan uses (1: nothing to limit).
  explicit ThreadLimiter(int threads) : threads_(threads) {}
  /// The limit for the next run (0: none, each kernel its own threads).
  int limit() const;
  /// Whether the limit is on (a probe run then still uses every thread).
  bool limiting() const { return limited_; }
  /// The latency (ms) of a run made under limit().
  void record(double ms);
  /// While limited: the cores that sat idle over the last limited runs (IdleCores, over a few
  /// hundred ms). Half a core or more means the other process is gone: the next run probes.
  void note_idle_cores(double cores);
  /// Cores something other than this process held lately (OtherLoad::cores; nullopt: unknown).
  /// Below kOtherCore, slow runs do not set the limit off.
  void note_other_load(std::optional<double> cores) { other_load_ = cores; }
  /// Runs after which the median was slow but the other-load rule kept the limit off.
  int64_t unloaded_slow_runs() const { return unloaded_slow_; }
  /// Runs made under a limit so far.
  int64_t limited_runs() const { return limited_runs_; }

  static constexpr size_t kWindow = 5;       ///< runs per median
  static constexpr double kSlower = 1.3;     ///< median / reference that sets the limit off
  static constexpr double kGone = 0.8;       ///< probe / limited median that ends it
  static constexpr double kOtherCore = 0.5;  ///< cores held by others that let slow runs count
  static constexpr double kIdleCore = 0.5;   ///< idle cores (note_idle_cores) that call a probe,
  static constexpr int kFirstIdleProbeGap = 4;      ///< at most once per this many limited runs,
  static constexpr int kLongestIdleProbeGap = 128;  ///< doubling after each that was slower
  static constexpr int kFirstProbe = 2;      ///< limited runs before the first probe with every
  static constexpr int kProbeEvery = 16;     ///< thread, doubling up to this
  static constexpr int64_t kFirstWait = 16;  ///< full runs after a failed try, doubling up to
  static constexpr int64_t kLongestWait = 1024;

 private:
  static double median(const std::deque<double>& runs);
  void back_to_every_thread(bool failed);

  int threads_;
  bool limited_ = false;
  bool probing_ = false;                // the next run uses every thread
  bool helped_ = false;                 // a window of limited runs beat the slow ones
  std::deque<double> full_, reduced_;   // the last kWindow runs of each kind
  double reference_ = 0;                // fastest median of full runs (0: none yet)
  double trigger_ = 0;                  // the full median that set the limit off
  int since_probe_ = 0;
  int probe_after_ = kFirstProbe;
  bool idle_probe_ = false;             // the probe under way was called by idle cores
  int since_idle_probe_ = 0;
  int idle_probe_gap_ = kFirstIdleProbeGap;
  int64_t wait_ = 0;                    // full runs before the limit may be tried again
  int64_t backoff_ = kFirstWait;        // the next wait after a failed try
  int64_t limited_runs_ = 0;
  std::optional<double> other_load_;    // note_other_load
  int64_t unloaded_slow_ = 0;
};

}  // namespace stagecraft::executor
