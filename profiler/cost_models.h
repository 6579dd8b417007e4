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

/// A cost model, and the same model typed when it measures (its counts, its settings key).
struct OpenedCostModel {
  std::unique_ptr<scheduler::CostModel> model;
  MeasuredCostModel* measured = nullptr;  ///< `model` when it is "measured"
};

/// Builds the cost model `spec` names; throws UsageError/DeviceSpecError with the known choices.
OpenedCostModel open_cost_model(const std::string& spec, const CostModelContext& context = {});
/// open_cost_model(spec, context).model.
std::unique_ptr<scheduler::CostModel> make_cost_model(const std::string& spec,
                                                      const CostModelContext& context = {});

}  // namespace stagecraft::profiler
