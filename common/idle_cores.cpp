// IdleCores (idle_cores.h): the idle and iowait columns of /proc/stat's cpuN lines, for the CPUs
// of the process's affinity mask.
#include "common/idle_cores.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace stagecraft {
namespace {

std::optional<uint64_t> idle_ticks() {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool masked = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  uint64_t total = 0;
  bool any = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0) break;  // the cpu lines come first
    if (line.size() < 4 || line[3] < '0' || line[3] > '9') continue;  // the "cpu" total line
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0;
    if (!(fields >> cpu >> user >> nice >> system >> idle >> iowait)) continue;
    if (masked && (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed))) continue;
    total += idle + iowait;
    any = true;
  }
  if (!any) return std::nullopt;
  return total;
}

}  // namespace

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
