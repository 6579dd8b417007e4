#pragma once
/// Cost models by name, as given on the command line: "analytic:DEVICE" (configs/devices/) or
/// "measured" (stages timed on a backend, through a profile cache).

#include <memory>
#include <string>

#include "executor/backend.h"
#include "profiler/measured_cost_model.h"
#include "profiler/profile_cache.h"
#include "scheduler/cost_model.h"

namespace stagecraft::profiler {

/// What a measured model needs.
struct CostModelContext {
  executor::Backend* backend = nullptr;  ///< required by "measured"
  ProfileCache* cache = nullptr;         ///< optional persistence for "measured"
  MeasureOptions measure;                ///< how "measured" times stages
};

/// Builds the cost model `spec` names; throws UsageError/DeviceSpecError with the known choices.
std::unique_ptr<scheduler::CostModel> make_cost_model(const std::string& spec,
                                                      const CostModelContext& context = {});

}  // namespace stagecraft::profiler
