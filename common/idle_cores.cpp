// IdleCores (idle_cores.h): the idle and iowait columns of /proc/stat's cpuN lines, for the CPUs
// of the process's affinity mask.
#include "common/idle_cores.h"

#include <sched.h>
#include <unistd.h>

#include <fcntl.h>

#include <cstdio>
#include <cstring>

namespace stagecraft {

IdleCores::~IdleCores() {
  if (fd_ >= 0) close(fd_);
}

std::optional<uint64_t> IdleCores::idle_ticks() {
  if (fd_ < 0) fd_ = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return std::nullopt;
  buffer_.resize(1 << 16);  // the cpuN lines of 500 CPUs
  const ssize_t n = pread(fd_, buffer_.data(), buffer_.size() - 1, 0);
  if (n <= 0) return std::nullopt;
  buffer_[static_cast<size_t>(n)] = '\0';
  const char* text = buffer_.data();
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool masked = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  uint64_t total = 0;
  bool any = false;
  // The cpuN lines come first: "cpuN user nice system idle iowait ...".
  for (const char* line = text; std::strncmp(line, "cpu", 3) == 0;) {
    int cpu = -1;
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0;
    if (line[3] >= '0' && line[3] <= '9' &&
        std::sscanf(line + 3, "%d %llu %llu %llu %llu %llu", &cpu, &user, &nice, &system, &idle, &iowait) == 6 &&
        (!masked || (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)))) {
      total += idle + iowait;
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
  start_ticks_ = idle_ticks();
  start_ = std::chrono::steady_clock::now();
}

void IdleCores::end() {
  if (!start_ticks_) {
    readable_ = false;
    return;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::optional<uint64_t> now = idle_ticks();
  if (!now || *now < *start_ticks_) {
    readable_ = false;
    return;
  }
  idle_ticks_ += *now - *start_ticks_;
  seconds_ += seconds;
  start_ticks_.reset();
}

std::optional<double> IdleCores::idle_cores() const {
  if (!readable_ || seconds_ <= 0) return std::nullopt;
  static const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  return static_cast<double>(idle_ticks_) / ticks_per_s / seconds_;
}

void IdleCores::reset() {
  start_ticks_.reset();
  seconds_ = 0;
  idle_ticks_ = 0;
  readable_ = true;
}

}  // namespace stagecraft
