#include "cli/backend_options.h"

#include "common/strings.h"

namespace stagecraft::cli {

void BackendOptions::add_options(CLI::App& command, bool backend_default_cpu) {
  if (backend_default_cpu) backend = "cpu";
  command.add_option("--backend", backend, "backend to run and measure on: cpu | cuda");
  command.add_option("--cache-dir", cache_dir,
                     "profile cache directory (default: $STAGECRAFT_CACHE_DIR or "
                     "~/.cache/stagecraft)");
  command.add_option("--layout", layout, "activation layout: nchw | nhwc | nChw8c | nChw16c "
                                         "(default: the backend's preferred)");
  command.add_option("--streams", max_streams, "stream slots of the plan (default 8)")
      ->check(CLI::PositiveNumber);
  command.add_flag("--tf32", tf32, "CUDA: allow TF32 tensor-core math for f32 convolutions and GEMMs");
  command.add_flag("--stream-mode", stream_mode,
                   "CUDA: launch kernel by kernel instead of replaying a captured CUDA Graph");
}

executor::ExecutorOptions BackendOptions::executor_options() const {
  executor::ExecutorOptions options;
  options.graph = !stream_mode;
  return options;
}

executor::BackendConfig BackendOptions::backend_config() const {
  executor::BackendConfig config;
  config.cache_dir = cache_dir;
  config.tf32 = tf32;
  return config;
}

executor::PlanOptions BackendOptions::plan_options() const {
  executor::PlanOptions options;
  options.max_streams = max_streams;
  if (!layout.empty()) {
    const auto parsed = graph::parse_layout(layout);
    if (!parsed || graph::layout_rank(*parsed) != 4) {
      throw UsageError(cat("--layout: unknown activation layout '", layout,
                           "' (known: nchw, nhwc, nChw8c, nChw16c)"));
    }
    options.layout = parsed;
  }
  return options;
}

Session Session::open(const BackendOptions& options, const std::string& spec) {
  Session session;
  const std::string model = spec.empty() ? (options.backend.empty() ? "analytic:v100" : "measured")
                                         : spec;
  if (!options.backend.empty()) {
    session.backend = executor::make_backend(options.backend, options.backend_config());
  }
  profiler::CostModelContext context;
  context.backend = session.backend.get();
  context.measure.plan = options.plan_options();
  context.measure.executor = options.executor_options();
  if (model.rfind("measured", 0) == 0 && session.backend) {
    session.cache = std::make_unique<profiler::ProfileCache>(
        options.cache_dir.empty() ? profiler::ProfileCache::default_dir() : options.cache_dir,
        session.backend->device_fingerprint());
    context.cache = session.cache.get();
  }
  session.model = profiler::make_cost_model(model, context);
  session.measured = dynamic_cast<profiler::MeasuredCostModel*>(session.model.get());
  return session;
}

}  // namespace stagecraft::cli
