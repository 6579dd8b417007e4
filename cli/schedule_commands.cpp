// `stagecraft schedule` and `stagecraft show`.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/files.h"
#include "common/strings.h"
#include "profiler/cost_models.h"
#include "scheduler/schedule_yaml.h"
#include "scheduler/search.h"
#include "session/report.h"

namespace stagecraft::cli {

namespace {

using scheduler::Schedule;

struct ScheduleOptions {
  GraphSource source;
  std::string strategy = "dp";
  scheduler::SearchOptions search;
  SessionOptions backend;
  std::string output;
  std::string dot;
  bool quiet = false;
};

void run_schedule(const ScheduleOptions& o) {
  Pipeline pipeline(o.backend, o.search);  // a missing device fails first
  const graph::Graph g = pipeline.load_graph(o.source);
  session::ScheduledGraph scheduled;
  {
    SearchProgressPrinter printer(o.quiet);
    scheduled = pipeline.schedule(g, session::ScheduleSource::parse(o.strategy), printer.callback());
  }
  const Schedule& s = scheduled.schedule;
  const scheduler::SearchStats& stats = scheduled.stats;
  std::cout << session::schedule_summary(s);
  std::cout << "  " << session::search_stats_text(stats, s) << "\n";
  if (const auto& cache = pipeline.opened().cache) {
    std::cout << "  profile cache " << cache->path() << "\n";
    pipeline.save_cache();
  }
  for (const auto& split : stats.splits) std::cout << "  note: " << split << "\n";
  if (!o.output.empty()) {
    scheduler::save_schedule(g, s, o.output);
    std::cout << "wrote " << o.output << "\n";
  }
  if (!o.dot.empty()) {
    write_text_file(o.dot, scheduler::schedule_to_dot(g, s));
    std::cout << "wrote " << o.dot << "\n";
  }
}

struct ShowOptions {
  std::string path;
  GraphSource source;
  std::string dot;
  bool summary_only = false;
};

void run_show(ShowOptions o) {
  const scheduler::ScheduleMeta meta = scheduler::read_schedule_meta(o.path);
  if (o.source.spec.empty()) o.source.spec = meta.network;
  if (o.source.batch == 0) o.source.batch = meta.batch;
  if (o.source.dtype == "f32" && meta.dtype != "f32") o.source.dtype = meta.dtype;  // the file's
  Pipeline pipeline(SessionOptions{}, scheduler::SearchOptions{});  // loads (calibrates int8)
  const graph::Graph g = pipeline.load_graph(o.source);
  const Schedule s = scheduler::load_schedule(o.path, g);
  std::cout << session::schedule_summary(s);
  std::cout << "  made for device " << s.meta.device << "; search took "
            << fixed(s.meta.search_seconds, 3) << " s\n";
  if (!o.summary_only) std::cout << session::stage_table(g, s);
  if (!o.dot.empty()) {
    write_text_file(o.dot, scheduler::schedule_to_dot(g, s));
    std::cout << "wrote " << o.dot << "\n";
  }
}

}  // namespace

void add_schedule_commands(CLI::App& app) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = app.add_subcommand("schedule", "Find a schedule (stages of merged or concurrent "
                                                 "ops) and write it as YAML");
  add_source_options(*cmd, o->source);
  cmd->add_option("--strategy", o->strategy, "sequential | greedy | dp")
      ->check(CLI::IsMember({"sequential", "greedy", "dp"}));
  add_search_options(*cmd, o->search);
  add_backend_options(*cmd, o->backend, /*backend_default_cpu=*/false);
  cmd->add_option("-o,--output", o->output, "write the schedule to this YAML file");
  cmd->add_option("--dot", o->dot, "draw the schedule (stages as clusters) to this dot file");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress on stderr");
  cmd->callback([o] { run_schedule(*o); });

  auto s = std::make_shared<ShowOptions>();
  CLI::App* show = app.add_subcommand("show", "Print a schedule file's stages (checked against "
                                              "its graph)");
  show->add_option("schedule", s->path, "schedule YAML file")->required()->check(CLI::ExistingFile);
  show->add_option("--graph", s->source.spec,
                   "the network or graph file (default: the network the file names)");
  show->add_option("--batch", s->source.batch, "batch of the graph (default: the file's)")
      ->check(CLI::PositiveNumber);
  show->add_option("--input-size", s->source.input_size, "input size of a built-in network");
  show->add_option("--seed", s->source.seed, "seed of randomly wired networks");
  show->add_flag("--summary", s->summary_only, "only the summary, no stage table");
  show->add_option("--calibration", s->source.calibration,
                   "int8 schedules: the calibration the graph was quantised with (default: "
                   "calibrate now; the ops are the same either way)");
  show->add_option("--dot", s->dot, "draw the schedule to this dot file");
  show->callback([s] { run_show(*s); });
}

}  // namespace stagecraft::cli
