// `stagecraft run` and `stagecraft bench`: execute schedules on a backend and time them.
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
#include "graph/onnx/tensor_files.h"
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
};

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
  executor.set_inputs(inputs);
  if (!o.output_files.empty()) {
    executor.execute();
    const auto outputs = executor.outputs();
    if (o.output_files.size() > outputs.size()) {
      throw UsageError(cat("--output: the graph has ", outputs.size(), " output(s), got ",
                           o.output_files.size(), " file(s)"));
    }
    for (size_t i = 0; i < o.output_files.size(); ++i) {
      graph::write_tensor_file(o.output_files[i], graph::TensorFile{outputs[i].shape, outputs[i].data});
      std::cout << "wrote " << o.output_files[i] << " (" << outputs[i].shape.to_string() << ")\n";
    }
  }
  const profiler::LatencySummary t =
      profiler::summarise(profiler::interleaved_ms({&executor}, o.warmup, o.iters)[0]);
  std::cout << "  launch: " << (executor.captured() ? "CUDA Graph replay" : "kernel by kernel on streams")
            << "; ready to run " << fixed(ready_s, 2) << " s after the command began"
            << "\n";
  std::cout << "  latency: median " << fixed(t.median, 3) << " ms, p10 " << fixed(t.p10, 3)
            << " ms, p90 " << fixed(t.p90, 3) << " ms over " << o.iters << " runs; "
            << fixed(static_cast<double>(batch) * 1e3 / t.median, 1) << " images/s\n";
  if (!o.trace.empty()) {
    std::vector<executor::KernelTiming> timings;
    executor.execute(&timings);
    write_text_file(o.trace, executor::chrome_trace(plan, timings, model.graph.name()));
    std::cout << "wrote " << o.trace << " (open in chrome://tracing or ui.perfetto.dev)\n";
  }
}

// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

struct BenchOptions {
  std::vector<std::string> networks;
  GraphSource source;  // batch, input size, seed apply to every network
  SessionOptions backend;
  scheduler::SearchOptions search;
  int warmup = 3;
  int iters = 20;
  std::string out = "stagecraft-results";
  bool overhead = true;
};

struct BenchRow {
  std::string network, strategy;
  size_t stages = 0;
  double median = 0, p10 = 0, p90 = 0, predicted = 0, search_s = 0, speedup = 1;
  size_t measured = 0, hits = 0;
  int64_t batch = 1;
  std::string dtype = "f32";
};

void run_bench(const BenchOptions& o) {
  Pipeline pipeline(o.backend, o.search);
  executor::Backend& backend = pipeline.backend("bench");
  struct Variant {
    const char* name;
    scheduler::Strategy strategy;
    scheduler::DpMode mode;
  };
  using scheduler::DpMode;
  using scheduler::Strategy;
  const Variant variants[] = {{"sequential", Strategy::kSequential, DpMode::kBoth},
                              {"greedy", Strategy::kGreedy, DpMode::kBoth},
                              {"dp-merge", Strategy::kDp, DpMode::kMerge},
                              {"dp-concurrent", Strategy::kDp, DpMode::kConcurrent},
                              {"dp-both", Strategy::kDp, DpMode::kBoth}};
  std::vector<BenchRow> rows;
  std::ostringstream notes;
  std::ostringstream kernel_csv;  // kernels.csv: the first schedule's kernels in the run and alone
  kernel_csv << "network,schedule,index,kernel,implementation,in_run_ms,alone_ms\n";
  for (const std::string& network : o.networks) {
    GraphSource source = o.source;
    source.spec = network;
    const Model model = pipeline.load(source);
    const int64_t batch = model.graph.value(model.graph.inputs()[0]).desc.shape[0];
    std::vector<session::ScheduledGraph> schedules;
    std::vector<BenchRow> net_rows;
    for (const Variant& v : variants) {
      std::cerr << "bench: " << network << ": searching " << v.name << "...\n";
      // The search's wall time in this run: a schedule-cache hit costs its lookup, not the
      // original search (whose time the schedule's meta keeps).
      const auto search_start = std::chrono::steady_clock::now();
      {
        SearchProgressPrinter printer;
        schedules.push_back(pipeline.schedule(model.graph, session::ScheduleSource::search(v.strategy), v.mode,
                                                printer.callback()));
      }
      const double search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count();
      pipeline.save_cache();
      const Schedule& schedule = schedules.back().schedule;
      BenchRow row;
      row.network = network;
      row.strategy = v.name;
      row.batch = batch;
      row.dtype = graph::compute_type(model.graph);
      row.stages = schedule.stages.size();
      row.predicted = schedule.meta.predicted_ms;
      row.search_s = search_s;
      row.measured = schedules.back().stats.measured;  // stages measured by this search
      row.hits = schedules.back().stats.known;         // stages its cost model knew
      net_rows.push_back(row);
    }
    std::vector<session::PreparedPlan> plans;
    std::vector<std::unique_ptr<executor::Executor>> executors;
    std::vector<executor::Executor*> timed;
    std::vector<executor::HostTensor> inputs;
    for (graph::ValueId v : model.graph.inputs()) {
      inputs.push_back(executor::random_host_tensor(model.graph.value(v).desc.shape, 1));
    }
    for (session::ScheduledGraph& s : schedules) {
      plans.push_back(pipeline.plan(model, std::move(s)));
      executors.push_back(pipeline.executor(*plans.back().plan));
      executors.back()->set_inputs(inputs);
      timed.push_back(executors.back().get());
    }
    std::cerr << "bench: " << network << ": timing " << o.iters
              << " runs of each, in alternating blocks of " << profiler::kTimedBlock << "...\n";
    const auto times = profiler::interleaved_ms(timed, o.warmup, o.iters);
    for (size_t k = 0; k < net_rows.size(); ++k) {
      const profiler::LatencySummary t = profiler::summarise(times[k]);
      net_rows[k].median = t.median;
      net_rows[k].p10 = t.p10;
      net_rows[k].p90 = t.p90;
    }
    for (auto& row : net_rows) row.speedup = net_rows[0].median / row.median;
    if (o.overhead) {
      // Kernel time inside runs of the sequential plan (host callbacks around each kernel) and
      // each kernel alone (10 back-to-back launches, warm caches).
      // Per kernel too (kernels.csv): a kernel slower inside the run than alone waits on memory
      // its neighbours evicted (weights a model cannot keep in the cache from one run to the next).
      const auto& kernels = plans[0].plan->kernels();
      std::vector<double> in_run;
      std::vector<std::vector<double>> per_kernel(kernels.size());
      for (int it = 0; it < std::max(3, o.iters / 4); ++it) {
        std::vector<executor::KernelTiming> timings;
        executors[0]->execute(&timings);
        double busy = 0;
        for (const auto& t : timings) {
          busy += (t.end_us - t.start_us) / 1e3;
          per_kernel.at(t.kernel).push_back((t.end_us - t.start_us) / 1e3);
        }
        in_run.push_back(busy);
      }
      const double busy = profiler::percentile(in_run, 0.5);
      const auto isolated = executors[0]->isolated_kernel_ms(10);
      for (size_t k = 0; k < kernels.size(); ++k) {
        kernel_csv << csv_field(network) << "," << net_rows[0].strategy << "," << k << ","
                   << csv_field(kernels[k].label) << "," << csv_field(kernels[k].kernel->implementation())
                   << "," << fixed(per_kernel[k].empty() ? 0.0 : profiler::percentile(per_kernel[k], 0.5), 4)
                   << "," << fixed(isolated[k], 4) << "\n";
      }
      double alone = 0;
      for (double ms : isolated) alone += ms;
      const double e2e = net_rows[0].median;
      notes << network << ": sequential end-to-end " << fixed(e2e, 3) << " ms; its "
            << isolated.size() << " kernels take " << fixed(busy, 3)
            << " ms inside the run (executor overhead " << fixed(100.0 * (e2e - busy) / busy, 1)
            << "%) and " << fixed(alone, 3) << " ms alone (" << fixed(100.0 * (e2e - alone) / alone, 1)
            << "% over)\n";
    }
    rows.insert(rows.end(), net_rows.begin(), net_rows.end());
  }

  TextTable table({"network", "schedule", "stages", "median ms", "p10", "p90", "images/s",
                   "speed-up", "predicted", "search s", "measured", "cache hits"},
                  {TextTable::kLeft, TextTable::kLeft, TextTable::kRight, TextTable::kRight,
                   TextTable::kRight, TextTable::kRight, TextTable::kRight, TextTable::kRight,
                   TextTable::kRight, TextTable::kRight, TextTable::kRight, TextTable::kRight});
  for (const auto& r : rows) {
    table.add_row({r.network, r.strategy, cat(r.stages), fixed(r.median, 3), fixed(r.p10, 3),
                   fixed(r.p90, 3), fixed(static_cast<double>(r.batch) * 1e3 / r.median, 1),
                   fixed(r.speedup, 2) + "x", fixed(r.predicted, 3), fixed(r.search_s, 2),
                   cat(r.measured), cat(r.hits)});
  }
  std::cout << "device: " << backend.device().device_fingerprint() << "\n" << table.render()
            << notes.str();

  // CSV and JSON beside each other in --out.
  std::filesystem::create_directories(o.out);
  std::ostringstream csv;
  csv << "network,batch,dtype,schedule,stages,median_ms,p10_ms,p90_ms,images_per_s,speedup,"
         "predicted_ms,search_s,measured,cache_hits\n";
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : rows) {
    const double ips = static_cast<double>(r.batch) * 1e3 / r.median;
    csv << r.network << "," << r.batch << "," << r.dtype << "," << r.strategy << "," << r.stages << ","
        << fixed(r.median, 4) << "," << fixed(r.p10, 4) << "," << fixed(r.p90, 4) << ","
        << fixed(ips, 2) << "," << fixed(r.speedup, 4) << "," << fixed(r.predicted, 4) << ","
        << fixed(r.search_s, 3) << "," << r.measured << "," << r.hits << "\n";
    results.push_back({{"network", r.network}, {"batch", r.batch}, {"dtype", r.dtype},
                       {"schedule", r.strategy}, {"stages", r.stages}, {"median_ms", r.median},
                       {"p10_ms", r.p10}, {"p90_ms", r.p90}, {"images_per_s", ips},
                       {"speedup", r.speedup}, {"predicted_ms", r.predicted},
                       {"search_s", r.search_s}, {"measured", r.measured}, {"cache_hits", r.hits}});
  }
  const nlohmann::json json = {{"device", backend.device().device_fingerprint()},
                               {"description", backend.device().description()},
                               {"backend", backend.name()},
                               {"iterations", o.iters},
                               {"results", results}};
  const std::string csv_path = (std::filesystem::path(o.out) / "bench.csv").string();
  const std::string json_path = (std::filesystem::path(o.out) / "bench.json").string();
  const std::string kernels_path = (std::filesystem::path(o.out) / "kernels.csv").string();
  write_text_file(csv_path, csv.str());
  write_text_file(json_path, json.dump(2) + "\n");
  write_text_file(kernels_path, kernel_csv.str());
  std::cout << "wrote " << csv_path << ", " << json_path << " and " << kernels_path << "\n";
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
  run->callback([o] { run_run(*o); });

  auto b = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand(
      "bench", "Search and run sequential, greedy, dp-merge, dp-concurrent and dp-both schedules "
               "with interleaved repetitions; print a table, write CSV and JSON");
  bench->add_option("networks", b->networks, "built-in networks or graph files")->required();
  bench->add_option("--batch", b->source.batch, "batch size (default 1)")->check(CLI::PositiveNumber);
  bench->add_option("--input-size", b->source.input_size, "input size of built-in networks")
      ->check(CLI::PositiveNumber);
  bench->add_option("--seed", b->source.seed, "seed of weights and randomly wired networks");
  add_dtype_options(*bench, b->source);
  add_backend_options(*bench, b->backend, /*backend_default_cpu=*/true);
  add_search_options(*bench, b->search);
  bench->add_option("--warmup", b->warmup, "untimed runs of each schedule first (default 3)")
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--iters", b->iters, "timed runs of each schedule, in alternating blocks (default 20)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--out", b->out,
                    "directory for bench.csv, bench.json and kernels.csv (each kernel of the first "
                    "schedule inside the run and alone) (default ./stagecraft-results)");
  bench->callback([b] { run_bench(*b); });
}

}  // namespace stagecraft::cli
