#pragma once
// IdleCores: how many of this process's cores sat idle during some stretches of time, from the
// kernel's per-CPU counters (Linux /proc/stat: idle and iowait time of each CPU in the process's
// affinity mask). Coarse (the counters tick 100 times a second): meant for stretches that add up
// to a few hundred ms. The file is opened once and read again for each reading.
//
// Example:
//   IdleCores meter;
//   meter.begin(); run(); meter.end();   // as many stretches as needed
//   if (meter.measured_s() > 0.25) idle = meter.idle_cores();  // e.g. 0.97: about one core idle

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace stagecraft {

class IdleCores {
 public:
  IdleCores() = default;
  ~IdleCores();
  IdleCores(const IdleCores&) = delete;
  IdleCores& operator=(const IdleCores&) = delete;
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
  std::optional<uint64_t> start_ticks_;  // idle + iowait ticks of the process's CPUs at begin()
  double seconds_ = 0;
  uint64_t idle_ticks_ = 0;
  bool readable_ = true;
  int fd_ = -1;  // /proc/stat, opened at the first begin() and read again from its start (no
                 // open per run)
  std::vector<char> buffer_;
  std::optional<uint64_t> idle_ticks();
};

}  // namespace stagecraft
