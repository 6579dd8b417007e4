// `stagecraft calibrate`: value ranges for int8 quantisation, saved for --calibration, and an
// optional check of the int8 graph's logits against f32.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/strings.h"
#include "executor/executor.h"
#include "frontend/onnx/tensor_files.h"
#include "graph/quantize.h"
#include "quant/calibration.h"
#include "scheduler/schedule.h"
#include "session/report.h"

namespace stagecraft::cli {

namespace {

struct CalibrateOptions {
  GraphSource source;
  int samples = 8;
  std::string method = "minmax";
  double percentile = 99.99;
  std::vector<std::string> inputs;
  std::string output;
  int check = 0;
  int worst = 0;
  std::string layout;
};

// The `count` values whose op added the most error (value_errors' growth), one line each.
void print_worst_values(const Model& f32, const Model& int8, int count) {
  const auto backend = executor::make_backend("cpu");
  std::vector<executor::HostTensor> inputs;
  for (graph::ValueId v : f32.graph.inputs())
    inputs.push_back(executor::random_host_tensor(f32.graph.value(v).desc.shape, 4242));
  std::vector<quant::ValueError> errors =
      quant::value_errors(f32.graph, f32.weights, int8.graph, int8.weights, *backend, inputs);
  std::stable_sort(errors.begin(), errors.end(),
                   [](const quant::ValueError& a, const quant::ValueError& b) { return a.growth > b.growth; });
  errors.resize(std::min(errors.size(), static_cast<size_t>(count)));
  std::cout << "  values whose op added the most error (relative to f32, one random input; the "
               "error, then what the op added):\n";
  for (const quant::ValueError& e : errors) {
    std::cout << "    " << fixed(e.relative, 4) << "  +" << fixed(e.growth, 4) << "  " << e.kind << "  "
              << e.value << "\n";
  }
}

void run_calibrate(const CalibrateOptions& o) {
  if (o.source.dtype != "f32") {
    throw UsageError("calibrate runs the f32 graph: drop --dtype (use --dtype int8 on run/bench/schedule)");
  }
  const Model model = load_f32_model(o.source);
  // The CPU through the one pipeline: it calibrates, and the check runs sequential schedules on
  // it (in the layout given, checked there).
  SessionOptions session;
  session.backend = "cpu";
  session.cost_model = "analytic:v100";  // the check's sequential schedules need no measuring
  session.layout = o.layout;
  session.log = &std::cerr;
  Pipeline pipeline(session, scheduler::SearchOptions{});
  quant::CalibrationOptions options;
  options.samples = o.samples;
  options.method = o.method;
  options.percentile = o.percentile;
  const auto& graph_inputs = model.graph.inputs();
  if (!o.inputs.empty()) {
    if (graph_inputs.size() != 1) {
      throw UsageError(cat("--input gives one sample per file, for graphs of one input; this one "
                           "takes ", graph_inputs.size()));
    }
    const graph::Shape& shape = model.graph.value(graph_inputs[0]).desc.shape;
    for (const std::string& path : o.inputs) {
      graph::TensorFile file = graph::read_tensor_file(path);
      if (file.shape != shape) {
        throw UsageError(cat("--input ", path, ": shape ", file.shape.to_string(),
                             " does not match the graph input ", shape.to_string()));
      }
      options.inputs.push_back({executor::HostTensor{file.shape, std::move(file.data)}});
    }
  }
  const int total = options.inputs.empty() ? o.samples : static_cast<int>(options.inputs.size());
  const auto t0 = std::chrono::steady_clock::now();
  options.progress = [&](int done, int all) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (all >= 4 && (done == all || done % std::max(1, all / 4) == 0)) {
      std::cerr << "calibrate: " << done << "/" << all << " samples (" << fixed(s, 1) << " s)\n";
    }
  };
  const graph::Calibration cal = pipeline.calibrate(model, options);
  const std::string path = o.output.empty() ? model.graph.name() + ".calib.yaml" : o.output;
  graph::save_calibration(cal, path);
  graph::QuantizeReport report;
  const Model q = session::quantise_model(model, cal, &report);
  std::cout << model.graph.name() << ": calibrated " << cal.values.size() << " values on " << total
            << (options.inputs.empty() ? " generated" : " supplied") << " input(s), method "
            << cal.method << (cal.method == "percentile" ? cat(" ", cal.percentile) : "")
            << " -> " << path << "\n"
            << "  int8 graph: " << report.int8_ops << " ops in int8, " << report.f32_ops
            << " in f32, " << report.conversions << " conversions, " << report.scale_classes
            << " scale classes, " << report.batch_norm_convolutions.size()
            << " batch norm(s) as depthwise convolutions\n";
  if (o.check <= 0) return;

  // Logits of the int8 graph against f32 on fresh inputs (seeds unlike the calibration's).
  const auto sequential = session::ScheduleSource::search(scheduler::Strategy::kSequential);
  const session::PreparedPlan f32_plan = pipeline.prepare(model, sequential);
  const session::PreparedPlan int8_plan = pipeline.plan(q.graph, q.weights, pipeline.schedule(q.graph, sequential));
  const auto f32_executor = pipeline.executor(*f32_plan.plan);
  const auto int8_executor = pipeline.executor(*int8_plan.plan);
  const quant::Agreement a =
      quant::compare_on_random_inputs(*int8_executor, *f32_executor, model.graph, o.check, 1);
  std::cout << "  int8 vs f32 over " << a.samples << " random inputs: "
            << session::logit_scores_text(a.raw, "f32 top-1 classes") << "\n"
            << "  input-dependent part (logits minus their mean over the inputs): "
            << session::logit_scores_text(a.centred, "classes") << "\n";
  if (o.worst > 0) print_worst_values(model, q, o.worst);
}

}  // namespace

void add_quant_commands(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "record value ranges of the f32 graph for int8 quantisation (--dtype int8)");
  add_source_options(*cmd, o->source);
  cmd->add_option("--samples", o->samples, "generated inputs to run (default 8)");
  cmd->add_option("--method", o->method, "minmax (default) | percentile")
      ->check(CLI::IsMember({"minmax", "percentile"}));
  cmd->add_option("--percentile", o->percentile, "percentile of |x| kept (default 99.99)");
  cmd->add_option("--input", o->inputs, "calibrate on these input files (.npy/.pb), one sample each");
  cmd->add_option("-o,--output", o->output, "calibration file (default: NETWORK.calib.yaml)");
  cmd->add_option("--check", o->check,
                  "also compare int8 logits with f32 on this many random inputs");
  cmd->add_option("--layout", o->layout, "activation layout for --check (default: the CPU's)");
  cmd->add_option("--worst", o->worst,
                  "with --check: also list the N values whose op added the most int8 error (runs "
                  "both graphs keeping every value: the memory of all activations)")
      ->check(CLI::PositiveNumber)
      ->needs("--check");
  cmd->callback([o] { run_calibrate(*o); });
}

}  // namespace stagecraft::cli
