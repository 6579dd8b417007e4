#pragma once
// The kernel's per-CPU counters (Linux /proc/stat: the cpuN lines of the CPUs in the process's
// affinity mask), for the thread limiter. Coarse (the counters tick 100 times a second): meant
// for stretches that add up to a few hundred ms. /proc/stat is opened once and read again for
// each reading.
//
// IdleCores: how many of the process's cores sat idle during some stretches of time.
//   IdleCores meter;
//   meter.begin(); run(); meter.end();   // as many stretches as needed
//   if (meter.measured_s() > 0.25) idle = meter.idle_cores();  // e.g. 0.97: about one core idle
//
// OtherLoad: how many of the process's cores something other than this process held lately:
// the busy time of its CPUs (user, nice, system, irq, softirq and steal: a hypervisor running
// another guest holds the core as surely as a process does) less this process's own CPU time
// (getrusage; every thread of the process counts as its own). Sampled at most every kSampleGap,
// so calling tick() once per run costs a clock read.
//   OtherLoad load;
//   for (...) { run(); load.tick(); if (auto c = load.cores(); c && *c >= 0.5) ...; }

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace stagecraft {

/// Ticks (1/sysconf(_SC_CLK_TCK) s) of the CPUs in the process's affinity mask, summed.
struct CpuTicks {
  uint64_t idle = 0;  ///< idle + iowait
  uint64_t busy = 0;  ///< user + nice + system + irq + softirq + steal
};

/// /proc/stat, opened once and read again for each reading.
class ProcStat {
 public:
  ProcStat() = default;
  ~ProcStat();
  ProcStat(const ProcStat&) = delete;
  ProcStat& operator=(const ProcStat&) = delete;
  /// nullopt where the counters cannot be read (not Linux, no /proc).
  std::optional<CpuTicks> read();

 private:
  int fd_ = -1;
  std::vector<char> buffer_;
};

class IdleCores {
 public:
  /// A stretch begins (a begin() without end() before it is forgotten).
  void begin();
  /// The stretch ends: its idle time and its length are added to the totals.
  void end();
  /// Seconds measured so far (the stretches' lengths added up).
  double measured_s() const { return seconds_; }
  /// Average number of the process's cores idle over the measured stretches; nullopt where the
  /// counters cannot be read (not Linux, no /proc) or nothing was measured.
  std::optional<double> idle_cores() const;
  /// Forgets every stretch.
  void reset();

 private:
  std::chrono::steady_clock::time_point start_;
  std::optional<uint64_t> start_ticks_;  // idle ticks of the process's CPUs at begin()
  double seconds_ = 0;
  uint64_t idle_ticks_ = 0;
  bool readable_ = true;
  ProcStat stat_;
};

class OtherLoad {
 public:
  /// One reading of the counters.
  struct Sample {
    std::chrono::steady_clock::time_point at;
    uint64_t busy_ticks = 0;  ///< CpuTicks::busy
    double own_s = 0;         ///< this process's user + system CPU seconds
  };
  static constexpr double kSampleGap = 0.05;  ///< s between samples, at least
  static constexpr double kSpan = 0.4;        ///< s an estimate spans, at least
  static constexpr double kKeep = 4.0;        ///< s of samples kept

  /// Samples the counters when kSampleGap has passed since the last sample.
  void tick();
  /// Cores held by others, averaged from the newest sample at least kSpan older than the latest
  /// to the latest; nullopt while no two samples are that far apart or the counters cannot be
  /// read.
  std::optional<double> cores() const;
  /// A reading now (nullopt: the counters cannot be read).
  std::optional<Sample> sample();
  /// Cores held by others between two readings (0 when they are the same instant).
  static double cores_between(const Sample& from, const Sample& to);
  /// Cores the process's CPUs were busy between two readings (this process's threads included).
  static double busy_cores_between(const Sample& from, const Sample& to);
  /// Cores this process's threads used between two readings.
  static double own_cores_between(const Sample& from, const Sample& to);

 private:
  ProcStat stat_;
  std::deque<Sample> samples_;
  bool readable_ = true;
};

}  // namespace stagecraft
