// The per-CPU counters (cpu_counters.h): /proc/stat's cpuN lines for the CPUs of the process's
// affinity mask; this process's CPU time from getrusage.
#include "common/cpu_counters.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace stagecraft {
namespace {

double ticks_per_s() {
  static const double t = static_cast<double>(sysconf(_SC_CLK_TCK));
  return t;
}

double seconds(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

ProcStat::~ProcStat() {
  if (fd_ >= 0) close(fd_);
}

std::optional<CpuTicks> ProcStat::read() {
  if (fd_ < 0) fd_ = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return std::nullopt;
  buffer_.resize(1 << 16);  // the cpuN lines of 500 CPUs
  const ssize_t n = pread(fd_, buffer_.data(), buffer_.size() - 1, 0);
  if (n <= 0) return std::nullopt;
  buffer_[static_cast<size_t>(n)] = '\0';
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool masked = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  CpuTicks total;
  bool any = false;
  // The cpuN lines come first: "cpuN user nice system idle iowait irq softirq steal ...".
  for (const char* line = buffer_.data(); std::strncmp(line, "cpu", 3) == 0;) {
    int cpu = -1;
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                       steal = 0;
    const int fields = line[3] >= '0' && line[3] <= '9'
                           ? std::sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user,
                                         &nice, &system, &idle, &iowait, &irq, &softirq, &steal)
                           : 0;
    if (fields >= 6 && (!masked || (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)))) {
      total.idle += idle + iowait;
      total.busy += user + nice + system + irq + softirq + steal;  // fields missing on old kernels: 0
      any = true;
    }
    const char* next = std::strchr(line, '\n');
    if (next == nullptr) break;
    line = next + 1;
  }
  if (!any) return std::nullopt;
  return total;
}

void IdleCores::begin() {
  const std::optional<CpuTicks> t = stat_.read();
  start_ticks_ = t ? std::optional<uint64_t>(t->idle) : std::nullopt;
  start_ = std::chrono::steady_clock::now();
}

void IdleCores::end() {
  if (!start_ticks_) {
    readable_ = false;
    return;
  }
  const double s = seconds(start_, std::chrono::steady_clock::now());
  const std::optional<CpuTicks> now = stat_.read();
  if (!now || now->idle < *start_ticks_) {
    readable_ = false;
    return;
  }
  idle_ticks_ += now->idle - *start_ticks_;
  seconds_ += s;
  start_ticks_.reset();
}

std::optional<double> IdleCores::idle_cores() const {
  if (!readable_ || seconds_ <= 0) return std::nullopt;
  return static_cast<double>(idle_ticks_) / ticks_per_s() / seconds_;
}

void IdleCores::reset() {
  start_ticks_.reset();
  seconds_ = 0;
  idle_ticks_ = 0;
  readable_ = true;
}

std::optional<OtherLoad::Sample> OtherLoad::sample() {
  const std::optional<CpuTicks> t = stat_.read();
  rusage u{};
  if (!t || getrusage(RUSAGE_SELF, &u) != 0) return std::nullopt;
  const auto s = [](const timeval& v) { return static_cast<double>(v.tv_sec) + 1e-6 * static_cast<double>(v.tv_usec); };
  return Sample{std::chrono::steady_clock::now(), t->busy, s(u.ru_utime) + s(u.ru_stime)};
}

double OtherLoad::own_cores_between(const Sample& from, const Sample& to) {
  const double span = seconds(from.at, to.at);
  return span > 0 ? (to.own_s - from.own_s) / span : 0.0;
}

double OtherLoad::busy_cores_between(const Sample& from, const Sample& to) {
  const double span = seconds(from.at, to.at);
  if (span <= 0 || to.busy_ticks < from.busy_ticks) return 0.0;
  return static_cast<double>(to.busy_ticks - from.busy_ticks) / ticks_per_s() / span;
}

double OtherLoad::cores_between(const Sample& from, const Sample& to) {
  return std::max(0.0, busy_cores_between(from, to) - own_cores_between(from, to));
}

void OtherLoad::tick() {
  if (!readable_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!samples_.empty() && seconds(samples_.back().at, now) < kSampleGap) return;
  const std::optional<Sample> s = sample();
  if (!s) {
    readable_ = false;
    samples_.clear();
    return;
  }
  samples_.push_back(*s);
  // Keep the newest sample older than kKeep too: an estimate can always span kSpan.
  while (samples_.size() > 2 && seconds(samples_[1].at, now) > kKeep) samples_.pop_front();
}

std::optional<double> OtherLoad::cores() const {
  if (samples_.size() < 2) return std::nullopt;
  const Sample& last = samples_.back();
  for (auto it = samples_.rbegin() + 1; it != samples_.rend(); ++it) {
    if (seconds(it->at, last.at) >= kSpan) return cores_between(*it, last);
  }
  return std::nullopt;
}

}  // namespace stagecraft
