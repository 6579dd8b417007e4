// `stagecraft bench`: search the sequential, greedy and three dp schedules of networks, run them
// interleaved on a backend, and report one row per schedule: a table on stdout, bench.csv and
// bench.json from the same list of fields, kernels.csv (each kernel of the sequential plan inside
// the run and alone) and the executor's overhead.
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/files.h"
#include "common/strings.h"
#include "executor/executor.h"
#include "graph/quantize.h"
#include "profiler/timing.h"
#include "session/report.h"

namespace stagecraft::cli {

namespace {

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

  double images_per_s() const { return static_cast<double>(batch) * 1e3 / median; }
};

// One field of the results, written to the table (when it has a header), the CSV and the JSON.
struct BenchField {
  const char* header;  // table column; nullptr: files only
  const char* key;     // CSV column and JSON key
  int table_digits;    // decimals of a number in the table (and in the files: file_digits)
  int file_digits;
  std::function<std::variant<std::string, int64_t, double>(const BenchRow&)> value;
  const char* suffix = "";  // after the number in the table
};

const std::vector<BenchField>& bench_fields() {
  using R = const BenchRow&;
  static const std::vector<BenchField> fields = {
      {"network", "network", 0, 0, [](R r) { return r.network; }},
      {nullptr, "batch", 0, 0, [](R r) { return r.batch; }},
      {nullptr, "dtype", 0, 0, [](R r) { return r.dtype; }},
      {"schedule", "schedule", 0, 0, [](R r) { return r.strategy; }},
      {"stages", "stages", 0, 0, [](R r) { return static_cast<int64_t>(r.stages); }},
      {"median ms", "median_ms", 3, 4, [](R r) { return r.median; }},
      {"p10", "p10_ms", 3, 4, [](R r) { return r.p10; }},
      {"p90", "p90_ms", 3, 4, [](R r) { return r.p90; }},
      {"images/s", "images_per_s", 1, 2, [](R r) { return r.images_per_s(); }},
      {"speed-up", "speedup", 2, 4, [](R r) { return r.speedup; }, "x"},
      {"predicted", "predicted_ms", 3, 4, [](R r) { return r.predicted; }},
      {"search s", "search_s", 2, 3, [](R r) { return r.search_s; }},
      {"measured", "measured", 0, 0, [](R r) { return static_cast<int64_t>(r.measured); }},
      {"cache hits", "cache_hits", 0, 0, [](R r) { return static_cast<int64_t>(r.hits); }},
  };
  return fields;
}

// A field's value as text with `digits` decimals (numbers) or as it is.
std::string field_text(const std::variant<std::string, int64_t, double>& v, int digits) {
  if (const auto* text = std::get_if<std::string>(&v)) return *text;
  if (const auto* n = std::get_if<int64_t>(&v)) return cat(*n);
  return fixed(std::get<double>(v), digits);
}

// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string results_table(const std::vector<BenchRow>& rows) {
  std::vector<std::string> headers;
  std::vector<TextTable::Align> aligns;
  for (const BenchField& f : bench_fields()) {
    if (!f.header) continue;
    headers.emplace_back(f.header);
    aligns.push_back(headers.size() <= 2 ? TextTable::kLeft : TextTable::kRight);
  }
  TextTable table(headers, aligns);
  for (const BenchRow& r : rows) {
    std::vector<std::string> cells;
    for (const BenchField& f : bench_fields()) {
      if (f.header) cells.push_back(field_text(f.value(r), f.table_digits) + f.suffix);
    }
    table.add_row(cells);
  }
  return table.render();
}

std::string results_csv(const std::vector<BenchRow>& rows) {
  std::ostringstream csv;
  std::vector<std::string> keys;
  for (const BenchField& f : bench_fields()) keys.emplace_back(f.key);
  csv << join(keys, ",") << "\n";
  for (const BenchRow& r : rows) {
    std::vector<std::string> cells;
    for (const BenchField& f : bench_fields()) cells.push_back(csv_field(field_text(f.value(r), f.file_digits)));
    csv << join(cells, ",") << "\n";
  }
  return csv.str();
}

nlohmann::json results_json(const std::vector<BenchRow>& rows, const executor::Backend& backend, int iters) {
  nlohmann::json results = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    nlohmann::json row = nlohmann::json::object();
    for (const BenchField& f : bench_fields()) {
      std::visit([&](const auto& v) { row[f.key] = v; }, f.value(r));
    }
    results.push_back(std::move(row));
  }
  return {{"device", backend.device().device_fingerprint()},
          {"description", backend.device().description()},
          {"backend", backend.name()},
          {"iterations", iters},
          {"results", results}};
}

// The schedules bench compares, in its row order.
struct Variant {
  const char* name;
  scheduler::Strategy strategy;
  scheduler::DpMode mode;
};

const std::vector<Variant>& variants() {
  using scheduler::DpMode;
  using scheduler::Strategy;
  static const std::vector<Variant> all = {{"sequential", Strategy::kSequential, DpMode::kBoth},
                                           {"greedy", Strategy::kGreedy, DpMode::kBoth},
                                           {"dp-merge", Strategy::kDp, DpMode::kMerge},
                                           {"dp-concurrent", Strategy::kDp, DpMode::kConcurrent},
                                           {"dp-both", Strategy::kDp, DpMode::kBoth}};
  return all;
}

// Every variant's schedule of `model`, searched now (or from the schedule cache), with its row.
std::vector<session::ScheduledGraph> search_variants(Pipeline& pipeline, const Model& model,
                                                     const std::string& network,
                                                     std::vector<BenchRow>& rows) {
  std::vector<session::ScheduledGraph> schedules;
  for (const Variant& v : variants()) {
    std::cerr << "bench: " << network << ": searching " << v.name << "...\n";
    // The search's wall time in this run: a schedule-cache hit costs its lookup, not the
    // original search (whose time the schedule's meta keeps).
    const auto search_start = std::chrono::steady_clock::now();
    {
      SearchProgressPrinter printer;
      schedules.push_back(pipeline.schedule(model.graph, session::ScheduleSource::search(v.strategy),
                                            v.mode, printer.callback()));
    }
    const double search_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count();
    pipeline.save_cache();
    const scheduler::Schedule& schedule = schedules.back().schedule;
    BenchRow row;
    row.network = network;
    row.strategy = v.name;
    row.batch = model.graph.value(model.graph.inputs()[0]).desc.shape[0];
    row.dtype = graph::compute_type(model.graph);
    row.stages = schedule.stages.size();
    row.predicted = schedule.meta.predicted_ms;
    row.search_s = search_s;
    row.measured = schedules.back().stats.measured;  // stages measured by this search
    row.hits = pipeline.measures() ? schedules.back().stats.known : 0;  // from its cache
    rows.push_back(row);
  }
  return schedules;
}

// Kernel time inside runs of the first (sequential) plan, host callbacks around each kernel,
// and each kernel alone (10 back-to-back launches, warm caches): a line of `notes`, and per
// kernel a line of `kernel_csv` (a kernel slower inside the run than alone waits on memory its
// neighbours evicted, weights a model cannot keep in the cache from one run to the next).
void note_overhead(const std::string& network, const BenchRow& sequential,
                   const executor::ExecutionPlan& plan, executor::Executor& executor, int iters,
                   std::ostream& notes, std::ostream& kernel_csv) {
  const auto& kernels = plan.kernels();
  std::vector<double> in_run;
  std::vector<std::vector<double>> per_kernel(kernels.size());
  for (int it = 0; it < std::max(3, iters / 4); ++it) {
    std::vector<executor::KernelTiming> timings;
    executor.execute(&timings);
    double busy = 0;
    for (const auto& t : timings) {
      busy += (t.end_us - t.start_us) / 1e3;
      per_kernel.at(t.kernel).push_back((t.end_us - t.start_us) / 1e3);
    }
    in_run.push_back(busy);
  }
  const double busy = profiler::percentile(in_run, 0.5);
  const auto isolated = executor.isolated_kernel_ms(10);
  for (size_t k = 0; k < kernels.size(); ++k) {
    kernel_csv << csv_field(network) << "," << sequential.strategy << "," << k << ","
               << csv_field(kernels[k].label) << "," << csv_field(kernels[k].kernel->implementation())
               << "," << fixed(per_kernel[k].empty() ? 0.0 : profiler::percentile(per_kernel[k], 0.5), 4)
               << "," << fixed(isolated[k], 4) << "\n";
  }
  double alone = 0;
  for (double ms : isolated) alone += ms;
  const double e2e = sequential.median;
  notes << network << ": sequential end-to-end " << fixed(e2e, 3) << " ms; its " << isolated.size()
        << " kernels take " << fixed(busy, 3) << " ms inside the run (executor overhead "
        << fixed(100.0 * (e2e - busy) / busy, 1) << "%) and " << fixed(alone, 3) << " ms alone ("
        << fixed(100.0 * (e2e - alone) / alone, 1) << "% over)\n";
}

void run_bench(const BenchOptions& o) {
  Pipeline pipeline(o.backend, o.search);
  executor::Backend& backend = pipeline.backend("bench");
  std::vector<BenchRow> rows;
  std::ostringstream notes;
  std::ostringstream kernel_csv;
  kernel_csv << "network,schedule,index,kernel,implementation,in_run_ms,alone_ms\n";
  for (const std::string& network : o.networks) {
    GraphSource source = o.source;
    source.spec = network;
    const Model model = pipeline.load(source);
    std::vector<BenchRow> net_rows;
    std::vector<session::ScheduledGraph> schedules = search_variants(pipeline, model, network, net_rows);
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
      note_overhead(network, net_rows[0], *plans[0].plan, *executors[0], o.iters, notes, kernel_csv);
    }
    rows.insert(rows.end(), net_rows.begin(), net_rows.end());
  }
  std::cout << "device: " << backend.device().device_fingerprint() << "\n"
            << results_table(rows) << notes.str();
  std::filesystem::create_directories(o.out);
  const std::string csv_path = (std::filesystem::path(o.out) / "bench.csv").string();
  const std::string json_path = (std::filesystem::path(o.out) / "bench.json").string();
  const std::string kernels_path = (std::filesystem::path(o.out) / "kernels.csv").string();
  write_text_file(csv_path, results_csv(rows));
  write_text_file(json_path, results_json(rows, backend, o.iters).dump(2) + "\n");
  write_text_file(kernels_path, kernel_csv.str());
  std::cout << "wrote " << csv_path << ", " << json_path << " and " << kernels_path << "\n";
}

}  // namespace

void add_bench_command(CLI::App& app) {
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
