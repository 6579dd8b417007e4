// stagecraft._stagecraft: the C++ side of the Python package. Thin bindings over the libraries the
// CLI uses (session/: sources, backend sessions, search settings, reports); the package in
// python/stagecraft/ shapes the user-facing API (defaults, dicts, progress bars, DataFrames).
//
// Threads: every call that computes (loading an int8 model, searching, building a plan, running,
// timing) releases the GIL. Progress callbacks take it back, call the Python callback and check
// for signals, so Ctrl-C stops a search with KeyboardInterrupt. A session runs one call at a time
// (its own mutex); two sessions run in parallel.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "executor/backend.h"
#include "executor/executor.h"
#include "executor/tensor.h"
#include "graph/errors.h"
#include "frontend/onnx/tensor_files.h"
#include "graph/quantize.h"
#include "graph/yaml_io.h"
#include "networks/registry.h"
#include "quant/calibration.h"
#include "profiler/device_spec.h"
#include "profiler/timing.h"
#include "scheduler/schedule.h"
#include "scheduler/schedule_yaml.h"
#include "session/opened_backend.h"
#include "session/report.h"
#include "session/pipeline.h"
#include "session/source.h"
#include "convert.h"
#include "exception_translation.h"

namespace py = pybind11;

namespace stagecraft::python {
namespace {

// ---- Progress and interrupts ------------------------------------------------------------------

// Reports progress to a Python callable (or None) from code running without the GIL. Lives in the
// binding function's frame (created and destroyed with the GIL held); the library's callbacks
// hold a pointer to it, never a Python object.
class Progress {
 public:
  explicit Progress(py::object callback) : callback_(std::move(callback)) {}

  // Takes the GIL, checks for signals (KeyboardInterrupt propagates as error_already_set through
  // the library back to Python) and calls callback(phase, done, total, seconds, text).
  void report(const char* phase, double done, double total, double seconds,
              const std::string& text) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!callback_.is_none()) callback_(phase, done, total, seconds, text);
  }

 private:
  py::object callback_;
};

// ---- Models -----------------------------------------------------------------------------------

// A loaded graph with its weights, shared by the schedules and sessions made from it.
struct PyModel {
  session::GraphSource source;  // how it was loaded (spec, batch, dtype, ...)
  session::Model model;
  // Loads it and calibrates it for int8 (on a CPU backend it opens on first use and keeps).
  std::unique_ptr<session::Pipeline> loader =
      std::make_unique<session::Pipeline>(session::SessionOptions{}, scheduler::SearchOptions{});
  std::mutex loader_mutex;  // calibrate() may be called from several threads
};
using ModelPtr = std::shared_ptr<PyModel>;

ModelPtr load_model(const std::string& spec, int64_t batch, int64_t input_size, uint64_t seed,
                    const std::string& dtype, const std::string& calibration,
                    int calibration_samples, const std::vector<std::vector<int64_t>>& input_shapes,
                    const std::map<std::string, py::array_t<float, py::array::c_style | py::array::forcecast>>& constant_inputs,
                    py::object progress_callback) {
  Progress progress(std::move(progress_callback));
  auto m = std::make_shared<PyModel>();
  m->source.spec = spec;
  m->source.batch = batch;
  m->source.input_size = input_size;
  m->source.seed = seed;
  m->source.dtype = dtype;
  m->source.calibration = calibration;
  m->source.calibration_samples = calibration_samples;
  m->source.input_shapes = input_shapes;
  for (const auto& [name, a] : constant_inputs) {
    graph::OnnxImportOptions::InputValue v;
    v.dims.assign(a.shape(), a.shape() + a.ndim());
    v.data.assign(a.data(), a.data() + a.size());
    m->source.constant_inputs[name] = std::move(v);
  }
  {
    py::gil_scoped_release release;
    session::GraphSource source = m->source;
    source.on_calibration_progress = [&progress](int done, int all) {
      progress.report("calibrate", done, all, 0, "");
    };
    m->model = m->loader->load(source);
  }
  return m;
}

// ---- Schedules --------------------------------------------------------------------------------

struct PySchedule {
  ModelPtr model;
  scheduler::Schedule schedule;
  py::dict stats;  // of the search that made it (empty when loaded)
};
using SchedulePtr = std::shared_ptr<PySchedule>;

// Search options from the Python arguments (the CLI's flags of the same names).
scheduler::SearchOptions search_options(const std::string& mode, int r, int s, bool unpruned,
                                        double max_part_transitions, double budget_s,
                                        bool exhaustive) {
  if (!(budget_s >= 0)) throw UsageError(cat("search_budget: seconds must be >= 0 (0: no limit), got ", budget_s));
  scheduler::SearchOptions options;
  options.mode = scheduler::parse_dp_mode(mode);
  options.max_group_size = r;
  options.max_num_groups = s;
  options.pruned = !unpruned;
  options.max_part_transitions = max_part_transitions;
  options.budget.seconds = budget_s;
  options.budget.exhaustive = exhaustive;
  return options;
}

// Session options from the Python arguments.
session::SessionOptions session_options(const std::string& backend, const std::string& cache_dir,
                                        const std::string& cost_model, const std::string& layout,
                                        int streams, bool tf32 = false, bool stream_mode = false,
                                        bool winograd = true, bool fast_winograd = false, bool adapt_threads = true) {
  session::SessionOptions options;
  options.backend = backend;
  options.cache_dir = cache_dir;
  options.cost_model = cost_model;
  options.layout = layout;
  options.max_streams = streams;
  options.backend_config.tf32 = tf32;
  options.backend_config.winograd = winograd;
  options.backend_config.fast_winograd = fast_winograd;
  options.executor.replay_cuda_graph = !stream_mode;
  options.executor.adapt_threads = adapt_threads;
  return options;
}

std::function<void(const scheduler::SearchProgress&)> watch_search(Progress& progress) {
  return [&progress](const scheduler::SearchProgress& p) {
    progress.report("search", static_cast<double>(p.block), static_cast<double>(p.num_blocks),
                    p.seconds, session::search_progress_text(p));
  };
}

// ---- Pipelines --------------------------------------------------------------------------------

// One session::Pipeline (backend, cost model, caches, layout search) opened once and shared: a
// Python Session makes the plan of every input shape on it, and search() uses one. One call at a
// time uses it; layout-search progress goes to that call's Progress.
class PyPipeline {
 public:
  PyPipeline(session::SessionOptions options, const scheduler::SearchOptions& search) {
    options.on_layout_progress = [this](size_t measured, double seconds) {
      if (progress_) progress_->report("layouts", static_cast<double>(measured), 0, seconds, "");
    };
    py::gil_scoped_release release;
    pipeline_ = std::make_unique<session::Pipeline>(std::move(options), search);
  }

  // fn(pipeline) with the GIL released, alone on this pipeline, reporting to `progress`.
  template <class Fn>
  auto use(Progress& progress, Fn&& fn) {
    py::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(mutex_);
    progress_ = &progress;
    struct Reset {
      Progress*& p;
      ~Reset() { p = nullptr; }
    } reset{progress_};
    return fn(*pipeline_);
  }

 private:
  std::mutex mutex_;
  Progress* progress_ = nullptr;
  std::unique_ptr<session::Pipeline> pipeline_;
};
using PipelinePtr = std::shared_ptr<PyPipeline>;

SchedulePtr search(const ModelPtr& model, const std::string& strategy, const PipelinePtr& pipeline,
                   py::object progress_callback) {
  Progress progress(std::move(progress_callback));
  auto result = std::make_shared<PySchedule>();
  result->model = model;
  // Only strategy names here: parse_strategy throws the UsageError listing them.
  const auto source = session::ScheduleSource::search(scheduler::parse_strategy(strategy));
  bool measures = false;
  session::ScheduledGraph scheduled = pipeline->use(progress, [&](session::Pipeline& p) {
    session::ScheduledGraph found = p.schedule(model->model.graph, source, watch_search(progress));
    p.save_cache();
    measures = p.measures();
    return found;
  });
  result->schedule = std::move(scheduled.schedule);
  result->stats = stats_dict(scheduled.stats, result->schedule, measures);
  return result;
}

SchedulePtr load_schedule(const std::string& path, const ModelPtr& model) {
  auto result = std::make_shared<PySchedule>();
  result->model = model;
  py::gil_scoped_release release;
  result->schedule = scheduler::load_schedule(path, model->model.graph);
  return result;
}

SchedulePtr schedule_from_text(const std::string& text, const ModelPtr& model,
                               const std::string& source) {
  auto result = std::make_shared<PySchedule>();
  result->model = model;
  result->schedule = scheduler::schedule_from_yaml(text, model->model.graph, source);
  return result;
}

// The schedule of `s` for `graph`, the graph a session of `model` runs: the same object when made
// for it, else carried over (scheduler::carry_schedule checks that the graph is one it fits).
scheduler::Schedule schedule_for(const PySchedule& s, const ModelPtr& model, const graph::Graph& graph) {
  if (s.model == model && graph.num_ops() == model->model.graph.num_ops()) return s.schedule;
  return scheduler::carry_schedule(s.model->model.graph, s.schedule, graph);
}

// ---- Sessions ---------------------------------------------------------------------------------

// A model compiled for a backend with a schedule: plan and executor, ready to run.
class PySession {
 public:
  // `schedule` is a strategy name or a schedule file when `given` is null; made on `pipeline`,
  // which it keeps (its backend runs the plan).
  PySession(ModelPtr model, const std::string& schedule, SchedulePtr given, PipelinePtr pipeline,
            py::object progress_callback)
      : model_(std::move(model)), pipeline_(std::move(pipeline)) {
    Progress progress(std::move(progress_callback));
    auto result = std::make_shared<PySchedule>();
    result->model = model_;
    bool measures = false;
    pipeline_->use(progress, [&](session::Pipeline& p) {
      p.backend("a session");
      // The graph the backend runs (an int8 model's additions fused on the CPU); its schedules
      // belong to a model of that graph (the weights stay the loaded model's).
      graph_ = p.with_quantised_residuals(model_->model.graph);
      if (graph_.num_ops() != model_->model.graph.num_ops()) {
        auto fused = std::make_shared<PyModel>();
        fused->source = model_->source;
        fused->model.graph = graph_;
        fused->model.tail = model_->model.tail;
        result->model = fused;
      }
      if (given) {
        prepared_ = p.plan(graph_, model_->model.weights, p.adopt(graph_, schedule_for(*given, model_, graph_)));
      } else {
        session::ScheduledGraph scheduled =
            p.schedule(graph_, session::ScheduleSource::parse(schedule), watch_search(progress));
        p.save_cache();
        prepared_ = p.plan(graph_, model_->model.weights, std::move(scheduled));
      }
      executor_ = p.executor(*prepared_.plan);
      measures = p.measures();
    });
    result->schedule = prepared_.scheduled.schedule;
    result->stats = stats_dict(prepared_.scheduled.stats, result->schedule, measures);
    schedule_ = result;
  }

  // One run: float32 C-contiguous arrays, one per graph input, already checked by the package.
  // The arrays are uploaded from their own buffers (they stay referenced by `xs` while the GIL is
  // released) and the outputs downloaded straight into new arrays: no copies on the way.
  std::vector<py::array_t<float>> run(const std::vector<py::array_t<float, py::array::c_style>>& xs) {
    const graph::Graph& g = model_->model.graph;
    if (xs.size() != g.inputs().size()) {
      throw UsageError(cat("the graph takes ", g.inputs().size(), " input(s), got ", xs.size()));
    }
    for (size_t i = 0; i < xs.size(); ++i) {
      const graph::Shape& shape = g.value(g.inputs()[i]).desc.shape;
      if (xs[i].size() != shape.numel()) {
        throw UsageError(cat("input '", g.value(g.inputs()[i]).name, "': ", xs[i].size(),
                             " elements, the graph input ", shape.to_string(), " has ",
                             shape.numel()));
      }
    }
    if (model_->model.tail) return run_with_tail(xs);
    std::vector<py::array_t<float>> result;
    for (const executor::TensorRef& ref : prepared_.plan->outputs()) result.emplace_back(ref.desc.shape.dims());
    std::vector<std::span<float>> out_data;
    for (auto& a : result) out_data.emplace_back(a.mutable_data(), static_cast<size_t>(a.size()));
    {
      py::gil_scoped_release release;
      const std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < xs.size(); ++i) {
        executor_->set_input(i, std::span<const float>(xs[i].data(), static_cast<size_t>(xs[i].size())));
      }
      executor_->execute();
      for (size_t i = 0; i < out_data.size(); ++i) executor_->output_into(i, out_data[i]);
    }
    return result;
  }

  // run() of a model with a data-dependent tail: the graph's outputs downloaded, the tail
  // evaluated on them (the shapes of its outputs are known only then).
  std::vector<py::array_t<float>> run_with_tail(const std::vector<py::array_t<float, py::array::c_style>>& xs) {
    std::vector<graph::ModelOutput> outputs;
    {
      py::gil_scoped_release release;
      const std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < xs.size(); ++i) {
        executor_->set_input(i, std::span<const float>(xs[i].data(), static_cast<size_t>(xs[i].size())));
      }
      executor_->execute();
      outputs = session::model_outputs(model_->model, executor_->outputs());
    }
    // Each output's buffer becomes its array's (no copy).
    std::vector<py::array_t<float>> result;
    for (auto& o : outputs) {
      if (o.data.empty()) {  // no elements (no detection kept): an array of its shape
        result.emplace_back(o.dims);
        continue;
      }
      auto* data = new std::vector<float>(std::move(o.data));
      py::capsule owner(data, [](void* p) { delete static_cast<std::vector<float>*>(p); });
      result.emplace_back(o.dims, data->data(), owner);
    }
    return result;
  }

  const ModelPtr& model() const { return model_; }
  const PipelinePtr& pipeline() const { return pipeline_; }
  const SchedulePtr& schedule() const { return schedule_; }
  std::string plan_summary() const {
    return session::plan_summary(*prepared_.plan, prepared_.fallback_note);
  }
  std::string plan_listing() const {
    return session::plan_listing(graph_, *prepared_.plan);
  }
  std::string backend_name() const { return prepared_.plan->backend().name(); }
  std::string device() const { return prepared_.plan->backend().device().device_fingerprint(); }
  std::string description() const { return prepared_.plan->backend().device().description(); }
  executor::Executor& executor() { return *executor_; }
  std::mutex& mutex() { return mutex_; }

 private:
  ModelPtr model_;
  graph::Graph graph_;  // the graph the plan runs: the model's, or it with 8-bit additions fused
  PipelinePtr pipeline_;  // before the plan and executor: they use its backend
  SchedulePtr schedule_;
  session::PreparedPlan prepared_;
  std::unique_ptr<executor::Executor> executor_;
  std::mutex mutex_;
};

// Times sessions in alternating blocks (profiler::interleaved_ms) on generated inputs (seed 1, as `stagecraft bench`);
// returns the milliseconds of every run, per session.
std::vector<std::vector<double>> time_sessions(const std::vector<PySession*>& sessions, int warmup,
                                               int iters, py::object progress_callback) {
  Progress progress(std::move(progress_callback));
  py::gil_scoped_release release;
  // Lock in address order so that two overlapping calls cannot deadlock.
  std::vector<PySession*> order = sessions;
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (PySession* s : order) locks.emplace_back(s->mutex());
  std::vector<executor::Executor*> executors;
  for (PySession* s : sessions) {
    const graph::Graph& g = s->model()->model.graph;
    std::vector<executor::HostTensor> inputs;
    for (graph::ValueId v : g.inputs()) {
      inputs.push_back(executor::random_host_tensor(g.value(v).desc.shape, 1));
    }
    s->executor().set_inputs(inputs);
    executors.push_back(&s->executor());
  }
  return profiler::interleaved_ms(executors, warmup, iters, [&progress](int done, int all) {
    progress.report("bench", done, all, 0, "");
  });
}

// Records value ranges of the f32 graph of `model` for int8 and writes them to `path`; returns
// a summary dict.
py::dict calibrate(const ModelPtr& model, int samples,
                   const std::vector<py::array_t<float, py::array::c_style>>& xs,
                   const std::string& method, double percentile, const std::string& path,
                   py::object progress_callback) {
  Progress progress(std::move(progress_callback));
  // The graph that is calibrated and quantised keeps its additions (int8 convolutions take no
  // residual), as `stagecraft calibrate` and an int8 Session load it: calibrating the model as
  // loaded (residuals fused) failed on every ResNet-like model, and its value names would not be
  // the ones an int8 Session looks up.
  session::Model f32;
  {
    py::gil_scoped_release release;
    f32 = model->source.raw ? model->model : session::load_f32_model(model->source);
  }
  const graph::Graph& g = f32.graph;
  quant::CalibrationOptions options;
  options.samples = samples;
  options.method = method;
  options.percentile = percentile;
  for (const auto& x : xs) {
    if (g.inputs().size() != 1) {
      throw UsageError(cat("inputs give one sample per array, for graphs of one input; this one "
                           "takes ", g.inputs().size()));
    }
    const graph::Shape& shape = g.value(g.inputs()[0]).desc.shape;
    options.inputs.push_back(
        {executor::HostTensor{shape, std::vector<float>(x.data(), x.data() + x.size())}});
  }
  options.progress = [&progress](int done, int all) {
    progress.report("calibrate", done, all, 0, "");
  };
  graph::Calibration cal;
  graph::QuantizeReport report;
  {
    py::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(model->loader_mutex);
    cal = model->loader->calibrate(f32, options);
    graph::save_calibration(cal, path);
    graph::quantize(g, cal, &report);
  }
  py::dict d;
  d["path"] = path;
  d["network"] = cal.network;
  d["method"] = cal.method;
  d["percentile"] = cal.percentile;
  d["samples"] = cal.samples;
  d["values"] = cal.values.size();
  d["int8_ops"] = report.int8_ops;
  d["f32_ops"] = report.f32_ops;
  d["conversions"] = report.conversions;
  return d;
}

}  // namespace
}  // namespace stagecraft::python

namespace stagecraft::python {
namespace {

// Model and load_model.
void bind_models(py::module_& m) {
  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "Model")
      .def_property_readonly("name", [](const PyModel& x) { return x.model.graph.name(); })
      .def_property_readonly("spec", [](const PyModel& x) { return x.source.spec; })
      .def_property_readonly("seed", [](const PyModel& x) { return x.source.seed; })
      .def_property_readonly("input_size", [](const PyModel& x) { return x.source.input_size; })
      .def_property_readonly("calibration", [](const PyModel& x) { return x.source.calibration; })
      .def_property_readonly("num_ops", [](const PyModel& x) { return x.model.graph.num_ops(); })
      .def_property_readonly("dtype",
                             [](const PyModel& x) { return graph::compute_type(x.model.graph); })
      .def_property_readonly("hash",
                             [](const PyModel& x) { return graph::graph_hash(x.model.graph); })
      .def_property_readonly("inputs", [](const PyModel& x) {
        return tensor_infos(x.model.graph, x.model.graph.inputs());
      })
      .def_property_readonly("outputs", [](const PyModel& x) { return output_infos(x.model); })
      .def_property_readonly("tail", [](const PyModel& x) {
        return x.model.tail ? x.model.tail->summary() : std::string();
      })
      .def("save_yaml", [](const PyModel& x, const std::string& path) {
        graph::save_graph(x.model.graph, path);
      });
  m.def("load_model", &load_model, py::arg("spec"), py::arg("batch"), py::arg("input_size"),
        py::arg("seed"), py::arg("dtype"), py::arg("calibration"), py::arg("calibration_samples"),
        py::arg("input_shapes"), py::arg("constant_inputs"), py::arg("progress"));

}

// Schedule, the search and schedule files.
void bind_schedules(py::module_& m) {
  py::class_<PySchedule, std::shared_ptr<PySchedule>>(m, "Schedule")
      .def_property_readonly("model", [](const PySchedule& s) { return s.model; })
      .def_property_readonly("meta", [](const PySchedule& s) {
        return meta_dict(s.schedule.meta, s.schedule.layouts.name());
      })
      .def_property_readonly("stages", [](const PySchedule& s) {
        return stage_list(s.model->model.graph, s.schedule);
      })
      .def_property_readonly("stats", [](const PySchedule& s) { return s.stats; })
      .def_property_readonly("value_layouts", [](const PySchedule& s) {
        std::vector<std::string> out;
        for (graph::Layout l : s.schedule.layouts.per_value()) out.emplace_back(graph::to_string(l));
        return out;
      })
      .def("to_yaml_text", [](const PySchedule& s) {
        return scheduler::schedule_to_yaml(s.model->model.graph, s.schedule);
      })
      .def("save", [](const PySchedule& s, const std::string& path) {
        scheduler::save_schedule(s.model->model.graph, s.schedule, path);
      })
      .def("summary_text", [](const PySchedule& s) { return session::schedule_summary(s.schedule); })
      .def("table_text", [](const PySchedule& s) {
        return session::stage_table(s.model->model.graph, s.schedule);
      })
      .def("dot_text", [](const PySchedule& s) {
        return scheduler::schedule_to_dot(s.model->model.graph, s.schedule);
      });

  m.def("search", &search, py::arg("model"), py::arg("strategy"), py::arg("pipeline"), py::arg("progress"));
  m.def("load_schedule", [](const std::string& path, const std::shared_ptr<PyModel>& model) {
        return load_schedule(path, model);
      }, py::arg("path"), py::arg("model"));
  m.def("schedule_from_text", [](const std::string& text, const std::shared_ptr<PyModel>& model,
                                 const std::string& source) {
        return schedule_from_text(text, model, source);
      }, py::arg("text"), py::arg("model"), py::arg("source"));
  m.def("read_schedule_meta", [](const std::string& path) {
        std::string layout;
        const scheduler::ScheduleMeta meta = scheduler::read_schedule_meta(path, &layout);
        return meta_dict(meta, layout);
      }, py::arg("path"));

}

// Session.
void bind_sessions(py::module_& m) {
  py::class_<PyPipeline, std::shared_ptr<PyPipeline>>(m, "Pipeline")
      .def(py::init([](const std::string& mode, int r, int s, bool unpruned, double max_part_transitions,
                       double search_budget, bool exhaustive, const std::string& cost_model,
                       const std::string& backend, const std::string& cache_dir, const std::string& layout,
                       int streams, bool tf32, bool stream_mode, bool winograd, bool fast_winograd,
                       bool adapt_threads) {
             return std::make_shared<PyPipeline>(
                 session_options(backend, cache_dir, cost_model, layout, streams, tf32, stream_mode,
                                 winograd, fast_winograd, adapt_threads),
                 search_options(mode, r, s, unpruned, max_part_transitions, search_budget, exhaustive));
           }),
           py::arg("mode"), py::arg("r"), py::arg("s"), py::arg("unpruned"), py::arg("max_part_transitions"),
           py::arg("search_budget"), py::arg("exhaustive"), py::arg("cost_model"), py::arg("backend"),
           py::arg("cache_dir"), py::arg("layout"), py::arg("streams"), py::arg("tf32") = false,
           py::arg("stream_mode") = false, py::arg("winograd") = true, py::arg("fast_winograd") = false,
           py::arg("adapt_threads") = true);
  py::class_<PySession>(m, "Session")
      .def(py::init<ModelPtr, const std::string&, SchedulePtr, PipelinePtr, py::object>(), py::arg("model"),
           py::arg("schedule"), py::arg("given"), py::arg("pipeline"), py::arg("progress"))
      .def("run", &PySession::run, py::arg("inputs"))
      .def_property_readonly("model", [](const PySession& x) { return x.model(); })
      .def_property_readonly("pipeline", &PySession::pipeline)
      .def_property_readonly("schedule", &PySession::schedule)
      .def_property_readonly("plan_summary", &PySession::plan_summary)
      .def("plan_listing", &PySession::plan_listing)
      .def_property_readonly("backend", &PySession::backend_name)
      .def_property_readonly("device", &PySession::device)
      .def_property_readonly("description", &PySession::description)
      .def_property_readonly("limited_runs", [](PySession& x) {
        const std::lock_guard<std::mutex> lock(x.mutex());  // not while a run changes it
        return x.executor().limited_runs();
      });

}

// Timing, calibration, the lists of networks and backends, tensor files.
void bind_tools(py::module_& m) {
  m.def("time_sessions", &time_sessions, py::arg("sessions"), py::arg("warmup"), py::arg("iters"),
        py::arg("progress"));
  m.def("calibrate", &calibrate, py::arg("model"), py::arg("samples"), py::arg("inputs"),
        py::arg("method"), py::arg("percentile"), py::arg("path"), py::arg("progress"));
  m.def("summarise", [](const std::vector<double>& ms) {
        const profiler::LatencySummary t = profiler::summarise(ms);
        return py::make_tuple(t.median, t.p10, t.p90);
      }, py::arg("samples_ms"));
  m.def("networks", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& n : networks::network_registry()) out.emplace_back(n.name, n.description);
    return out;
  });
  m.def("backends", [] { return executor::backend_names(); });
  m.def("default_cache_dir", [] { return profiler::ProfileCache::default_dir(); });
  m.def("read_tensor_file", [](const std::string& path) {
    graph::TensorFile f = graph::read_tensor_file(path);
    py::array_t<float> a(f.shape.dims());
    std::memcpy(a.mutable_data(), f.data.data(), f.data.size() * sizeof(float));
    return a;
  }, py::arg("path"));
}
}  // namespace
}  // namespace stagecraft::python

PYBIND11_MODULE(_stagecraft, m) {
  using namespace stagecraft;
  using namespace stagecraft::python;
  m.doc() = "C++ core of the stagecraft package (use the stagecraft package, not this module)";
  py::register_exception_translator(&translate_error);

  bind_models(m);
  bind_schedules(m);
  bind_sessions(m);
  bind_tools(m);
}
