// `stagecraft run`: execute a schedule on a backend and time it (`bench`: bench_command.cpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/files.h"
#include "common/strings.h"
#include "executor/executor.h"
#include "executor/trace.h"
#include "frontend/onnx/tensor_files.h"
#include "graph/quantize.h"
#include "profiler/timing.h"
#include "scheduler/schedule_yaml.h"
#include "scheduler/search.h"
#include "session/report.h"

namespace stagecraft::cli {

namespace {

using scheduler::Schedule;

struct RunOptions {
  GraphSource source;
  SessionOptions backend;
  scheduler::SearchOptions search;
  std::string schedule = "dp";
  int warmup = 3;
  int iters = 20;
  std::string trace;
  std::vector<std::string> input_files;
  std::vector<std::string> output_files;
  std::string plan_listing;
  int check = 4;  // bf16 / int8: random inputs compared with the f32 graph (0: none)
};

// A bf16 or int8 model's first output against the f32 model's, on `samples` random inputs (seeds
// unlike the timed run's), both on sequential plans of this pipeline: two lines on stdout.
void check_against_f32(Pipeline& pipeline, const GraphSource& source, const Model& model,
                       executor::Executor& executor, int samples) {
  GraphSource f32_source = source;
  f32_source.dtype = "f32";
  f32_source.calibration.clear();
  const Model f32 = pipeline.load(f32_source);
  const session::PreparedPlan f32_plan =
      pipeline.prepare(f32, session::ScheduleSource::search(scheduler::Strategy::kSequential));
  const auto f32_executor = pipeline.executor(*f32_plan.plan);
  const quant::Agreement a = quant::compare_on_random_inputs(executor, *f32_executor, model.graph, samples, 101);
  const std::string type = graph::compute_type(model.graph);
  std::cout << "  " << type << " vs f32 (first output, " << a.samples << " random inputs): "
            << session::logit_scores_text(a.raw, "f32 top-1 classes") << "\n";
  // The input-dependent part needs two inputs at least (one input minus its own mean is zero).
  if (a.samples >= 2) {
    std::cout << "  " << type << " vs f32, input-dependent part (outputs minus their mean over the inputs): "
              << session::logit_scores_text(a.centred, "classes") << "\n";
  }
}

void run_run(const RunOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  // The backend first: a missing device is one error line before any work (int8 calibration).
  Pipeline pipeline(o.backend, o.search);
  pipeline.backend("run");
  GraphSource source = o.source;
  if (session::is_onnx_model(source.spec)) {
    // The input files' shapes fill the dimensions a model exported with dynamic axes leaves open.
    for (const std::string& path : o.input_files) source.input_shapes.push_back(graph::read_tensor_file(path).shape.dims());
  }
  const Model model = pipeline.load(source);
  session::PreparedPlan prepared;
  {
    SearchProgressPrinter printer;
    prepared = pipeline.prepare(model, session::ScheduleSource::parse(o.schedule), printer.callback());
  }
  const Schedule& schedule = prepared.scheduled.schedule;
  const executor::ExecutionPlan& plan = *prepared.plan;
  const int64_t batch = model.graph.value(model.graph.inputs()[0]).desc.shape[0];
  std::cout << model.graph.name() << " (batch " << batch << ", " << graph::compute_type(model.graph)
            << ") on " << plan.backend().name() << ": schedule "
            << scheduler::to_string(schedule.meta.search.strategy) << " with "
            << schedule.stages.size() << " stages, predicted "
            << fixed(schedule.meta.predicted_ms, 3) << " ms (" << schedule.meta.cost_model << ")\n";
  if (prepared.scheduled.searched && schedule.meta.search.strategy == scheduler::Strategy::kDp) {
    std::cout << "  " << session::search_stats_text(prepared.scheduled.stats, schedule) << "\n";
  }
  std::cout << "  " << session::plan_summary(plan, prepared.fallback_note) << "\n";
  if (!o.plan_listing.empty()) {
    write_text_file(o.plan_listing, session::plan_listing(model.graph, plan));
    std::cout << "wrote " << o.plan_listing << "\n";
  }
  const auto executor_ptr = pipeline.executor(*prepared.plan);
  // Load, layouts, schedule (searched or from the cache) and plan: what a user waits for.
  const double ready_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  executor::Executor& executor = *executor_ptr;
  std::vector<executor::HostTensor> inputs;
  if (!o.input_files.empty() && o.input_files.size() != model.graph.inputs().size()) {
    throw UsageError(cat("--input: the graph takes ", model.graph.inputs().size(),
                         " input(s), got ", o.input_files.size(), " file(s)"));
  }
  for (size_t i = 0; i < model.graph.inputs().size(); ++i) {
    const graph::Shape& shape = model.graph.value(model.graph.inputs()[i]).desc.shape;
    if (o.input_files.empty()) {
      inputs.push_back(executor::random_host_tensor(shape, 1));
      continue;
    }
    graph::TensorFile file = graph::read_tensor_file(o.input_files[i]);
    if (file.shape != shape) {
      throw UsageError(cat("--input ", o.input_files[i], ": shape ", file.shape.to_string(),
                           " does not match the graph input ", shape.to_string()));
    }
    inputs.push_back(executor::HostTensor{file.shape, std::move(file.data)});
  }
  const std::string precision = graph::compute_type(model.graph);
  if (o.check > 0 && (precision == "bf16" || precision == "int8")) {
    check_against_f32(pipeline, source, model, executor, o.check);
  }
  executor.set_inputs(inputs);
  if (!o.output_files.empty()) {
    executor.execute();
    const auto outputs = session::model_outputs(model, executor.outputs());
    if (o.output_files.size() > outputs.size()) {
      throw UsageError(cat("--output: the model has ", outputs.size(), " output(s), got ",
                           o.output_files.size(), " file(s)"));
    }
    for (size_t i = 0; i < o.output_files.size(); ++i) {
      const graph::Shape shape(outputs[i].dims);
      graph::write_tensor_file(o.output_files[i], graph::TensorFile{shape, outputs[i].data});
      std::cout << "wrote " << o.output_files[i] << " (" << shape.to_string() << ")\n";
    }
  }
  if (model.tail) {
    // The tail runs on the host after each run: its time is part of a run's latency.
    // Timed with the download of the graph's outputs it reads, as a run pays it.
    executor.execute();
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)session::model_outputs(model, executor.outputs());
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::cout << "  tail: " << model.tail->summary() << ", " << fixed(ms[ms.size() / 2], 3)
              << " ms per run (median of 5; with the download of its inputs; not in the latency below)\n";
  }
  const profiler::LatencySummary t =
      profiler::summarise(profiler::interleaved_ms({&executor}, o.warmup, o.iters)[0]);
  std::cout << "  launch: " << (executor.captured() ? "CUDA Graph replay" : "kernel by kernel on streams")
            << "; ready to run " << fixed(ready_s, 2) << " s after the command began"
            << "\n";
  std::cout << "  latency: median " << fixed(t.median, 3) << " ms, p10 " << fixed(t.p10, 3)
            << " ms, p90 " << fixed(t.p90, 3) << " ms over " << o.iters << " runs; "
            << fixed(static_cast<double>(batch) * 1e3 / t.median, 1) << " images/s\n";
  if (executor.limited_runs() > 0) {
    std::cout << "  threads: " << executor.limited_runs() << " of " << o.warmup + o.iters
              << " runs used kernels built for half the threads (runs were slow: another process held cores)\n";
  }
  if (!o.trace.empty()) {
    std::vector<executor::KernelTiming> timings;
    executor.execute(&timings);
    write_text_file(o.trace, executor::chrome_trace(plan, timings, model.graph.name()));
    std::cout << "wrote " << o.trace << " (open in chrome://tracing or ui.perfetto.dev)\n";
  }
}

}  // namespace

void add_run_commands(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand("run", "Run a network with a schedule on a backend and time "
                                            "it (median, p10, p90, images/s)");
  add_source_options(*run, o->source);
  add_backend_options(*run, o->backend, /*backend_default_cpu=*/true);
  run->add_option("--schedule", o->schedule,
                  "a schedule file, or sequential | greedy | dp (searched now; default dp)");
  add_search_options(*run, o->search);
  run->add_option("--warmup", o->warmup, "untimed runs first (default 3)")->check(CLI::NonNegativeNumber);
  run->add_option("--iters", o->iters, "timed runs (default 20)")->check(CLI::PositiveNumber);
  run->add_option("--trace", o->trace, "write a Chrome/Perfetto trace of one run to this file");
  run->add_option("--input", o->input_files,
                  "input tensor file (.pb TensorProto or .npy), one per graph input (default random)");
  run->add_option("--output", o->output_files,
                  "write the outputs of the first run to these files (.pb or .npy)");
  run->add_option("--plan-listing", o->plan_listing,
                  "write the plan's layouts and kernels (stage, stream, op, implementation), one "
                  "line each, to this file");
  run->add_option("--check", o->check,
                  "bf16 and int8: compare the first output with the f32 graph's on this many "
                  "random inputs (cosine, top-1; default 4, 0: off)")
      ->check(CLI::NonNegativeNumber);
  run->callback([o] { run_run(*o); });

  add_bench_command(app);  // after run, as `stagecraft --help` lists them
}

}  // namespace stagecraft::cli
