// ThreadLimiter (thread_limiter.h): the rule, on run latencies alone.
#include "executor/thread_limiter.h"

#include <algorithm>
#include <vector>

namespace stagecraft::executor {

double ThreadLimiter::median(const std::deque<double>& runs) {
  std::vector<double> v(runs.begin(), runs.end());
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

int ThreadLimiter::limit() const {
  if (!limited_ || probing_) return 0;
  return std::max(1, threads_ / 2);
}

void ThreadLimiter::note_idle_cores(double cores) {
  if (!limited_ || cores < kIdleCore || since_idle_probe_ < idle_probe_gap_) return;
  probing_ = true;
  idle_probe_ = true;
  since_idle_probe_ = 0;
}

void ThreadLimiter::back_to_every_thread(bool failed) {
  limited_ = false;
  probing_ = false;
  full_.clear();
  if (!failed) return;  // the limit helped while the load lasted: the next load may limit at once
  wait_ = backoff_;
  backoff_ = std::min(2 * backoff_, kLongestWait);
}

void ThreadLimiter::record(double ms) {
  if (threads_ <= 1) return;
  const auto push = [](std::deque<double>& runs, double v) {
    runs.push_back(v);
    if (runs.size() > kWindow) runs.pop_front();
  };
  if (!limited_) {
    push(full_, ms);
    if (wait_ > 0) --wait_;
    if (full_.size() < kWindow) return;
    const double m = median(full_);
    if (reference_ == 0 || m < reference_) reference_ = m;
    if (m >= kSlower * reference_ && wait_ == 0) {  // slow runs: try fewer threads
      if (other_load_ && *other_load_ < kOtherCore) {  // ... if something else holds a core
        ++unloaded_slow_;
        return;
      }
      limited_ = true;
      helped_ = false;
      trigger_ = m;
      reduced_.clear();
      since_probe_ = 0;
      probe_after_ = kFirstProbe;
      since_idle_probe_ = 0;
      idle_probe_gap_ = kFirstIdleProbeGap;
    }
    return;
  }
  if (probing_) {  // a run with every thread, between limited ones
    probing_ = false;
    // Every thread is faster again: the other process is gone (or, before the limit has shown
    // that it helps, it never did).
    if (!reduced_.empty() && ms < kGone * median(reduced_)) {
      back_to_every_thread(!helped_);
    } else if (idle_probe_) {  // idle cores, yet every thread is slower: trust the counters less
      idle_probe_gap_ = std::min(2 * idle_probe_gap_, kLongestIdleProbeGap);
    }
    idle_probe_ = false;
    return;
  }
  ++limited_runs_;
  ++since_idle_probe_;
  push(reduced_, ms);
  if (++since_probe_ >= probe_after_) {
    since_probe_ = 0;
    probe_after_ = std::min(2 * probe_after_, kProbeEvery);
    probing_ = true;
  }
  if (reduced_.size() < kWindow) return;
  if (median(reduced_) >= trigger_) {  // the limit does not help
    back_to_every_thread(/*failed=*/true);
  } else {
    helped_ = true;
    backoff_ = kFirstWait;
  }
}

}  // namespace stagecraft::executor
