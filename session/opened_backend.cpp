#include "session/opened_backend.h"

#include "common/error.h"
#include "common/strings.h"

namespace stagecraft::session {

std::string SessionOptions::cache_dir_or_default() const {
  return cache_dir.empty() ? profiler::ProfileCache::default_dir() : cache_dir;
}

std::optional<graph::Layout> SessionOptions::forced_layout() const {
  if (layout.empty() || auto_layout()) return std::nullopt;
  const auto parsed = graph::parse_layout(layout);
  if (!parsed || graph::layout_rank(*parsed) != 4) {
    throw UsageError(cat("--layout: unknown activation layout '", layout,
                         "' (known: nchw, nhwc, nChw8c, nChw16c, auto)"));
  }
  return parsed;
}

OpenedBackend OpenedBackend::open(const SessionOptions& options) {
  OpenedBackend session;
  if (!options.backend.empty()) {
    executor::BackendConfig config = options.backend_config;
    config.cache_dir = options.cache_dir;
    session.backend = executor::make_backend(options.backend, config);
  }
  return session;
}

void OpenedBackend::open_cost_model(const SessionOptions& options) {
  if (cost_model) return;
  const std::string& spec = options.cost_model;
  const std::string model = spec.empty() ? (options.backend.empty() ? "analytic:v100" : "measured")
                                         : spec;
  profiler::CostModelContext context;
  context.backend = backend.get();
  context.measure.max_streams = options.max_streams;
  context.measure.executor = options.executor;
  if (model.rfind("measured", 0) == 0 && backend) {
    cache = std::make_unique<profiler::ProfileCache>(options.cache_dir_or_default(),
                                                     backend->device().device_fingerprint());
    context.cache = cache.get();
  }
  profiler::OpenedCostModel opened = profiler::open_cost_model(model, context);
  cost_model = std::move(opened.model);
  measured = opened.measured;
}

}  // namespace stagecraft::session
