#include "profiler/cost_models.h"

#include "common/strings.h"
#include "profiler/analytic_cost_model.h"

namespace stagecraft::profiler {

std::unique_ptr<scheduler::CostModel> make_cost_model(const std::string& spec,
                                                      const CostModelContext& context) {
  return open_cost_model(spec, context).model;
}

OpenedCostModel open_cost_model(const std::string& spec, const CostModelContext& context) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "analytic") {
    if (arg.empty()) {
      throw UsageError(cat("cost model 'analytic' needs a device, e.g. analytic:v100 (known: ",
                           join(list_device_specs(), ", "), ")"));
    }
    return {std::make_unique<AnalyticCostModel>(find_device_spec(arg)), nullptr};
  }
  if (kind == "measured") {
    if (context.backend == nullptr) {
      throw UsageError("cost model 'measured' needs a backend to measure on (add --backend cpu)");
    }
    if (!arg.empty() && arg != context.backend->name()) {
      throw UsageError(cat("cost model '", spec, "' does not match --backend ",
                           context.backend->name()));
    }
    auto measured = std::make_unique<MeasuredCostModel>(*context.backend, context.cache, context.measure);
    MeasuredCostModel* typed = measured.get();
    return {std::move(measured), typed};
  }
  throw UsageError(cat("unknown cost model '", spec, "' (known: measured, analytic:DEVICE with "
                       "DEVICE one of ", join(list_device_specs(), ", "), ")"));
}

}  // namespace stagecraft::profiler
