#pragma once
/// Cost models by name, as given on the command line: "analytic:DEVICE" (configs/devices/).

#include <memory>
#include <string>

#include "scheduler/cost_model.h"

namespace stagecraft::profiler {

/// Builds the cost model `spec` names; throws UsageError/DeviceSpecError with the known choices.
std::unique_ptr<scheduler::CostModel> make_cost_model(const std::string& spec);

}  // namespace stagecraft::profiler
