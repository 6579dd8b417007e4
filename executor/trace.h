#pragma once
/// Chrome-trace / Perfetto files of one execution: one lane per stream, one slice per kernel, and a
/// lane of stages, so a person can see how the groups of each stage overlapped. Open the file in
/// chrome://tracing or https://ui.perfetto.dev.

#include <string>
#include <vector>

#include "executor/executor.h"

namespace stagecraft::executor {

/// The trace of one run as Chrome-trace JSON (times in microseconds).
std::string chrome_trace(const ExecutionPlan& plan, const std::vector<KernelTiming>& timings,
                         const std::string& title);

}  // namespace stagecraft::executor
