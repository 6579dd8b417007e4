#include "serve/model_runner.h"

#include <omp.h>

#include <algorithm>
#include <cassert>

#include "common/error.h"
#include "common/strings.h"
#include "executor/executor.h"
#include "session/report.h"

namespace stagecraft::serve {

namespace {

// Sets the calling thread's OpenMP team size (which the CPU backend reads as its parallelism
// when it builds a plan) for a scope, and puts the previous one back.
class OmpThreads {
 public:
  explicit OmpThreads(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

std::vector<TensorSpec> tensor_specs(const graph::Graph& g, const std::vector<graph::ValueId>& ids,
                                     bool batching, const std::string& spec, const char* what) {
  std::vector<TensorSpec> out;
  for (graph::ValueId id : ids) {
    const auto& value = g.value(id);
    std::vector<int64_t> dims = value.desc.shape.dims();
    if (batching) {
      if (dims.empty() || dims[0] != 1) {
        throw UsageError(cat(spec, ": ", what, " '", value.name, "' has shape ",
                             value.desc.shape.to_string(),
                             " at batch 1: its first dimension is "
                             "not the batch; serve it with max_batch_size 0"));
      }
      dims.erase(dims.begin());
    }
    out.push_back({value.name, std::move(dims)});
  }
  return out;
}

}  // namespace

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

namespace {

ModelIo describe_graph(const graph::Graph& g, const ServeOptions& options) {
  const bool batching = options.max_batch_size > 0;
  return {tensor_specs(g, g.inputs(), batching, options.source.spec, "input"),
          tensor_specs(g, g.outputs(), batching, options.source.spec, "output")};
}

}  // namespace

ModelIo describe_model(const graph::Graph& g, const graph::OnnxTail* tail, const ServeOptions& options) {
  if (!tail) return describe_graph(g, options);
  const bool batching = options.max_batch_size > 0;
  ModelIo io{tensor_specs(g, g.inputs(), batching, options.source.spec, "input"), {}};
  // The graph's outputs are what the tail reads; the model's are the tail's, one sample at a time.
  for (const graph::DeclaredOutput& d : tail->declared()) {
    std::vector<int64_t> dims = d.dims;
    if (batching) {
      if (dims.empty() || (dims[0] != 1 && dims[0] != -1)) {
        throw UsageError(cat(options.source.spec, ": output '", d.name, "' is declared ",
                             dims.empty() ? "a scalar" : cat("[", join(dims, ", "), "]"),
                             ": its first dimension is not the batch; serve it with max_batch_size 0"));
      }
      dims.erase(dims.begin());
    }
    io.outputs.push_back({d.name, std::move(dims)});
  }
  return io;
}

namespace {

// Marks the dimensions an ONNX model leaves symbolic (besides the batch) -1 in `io`, and then
// every output dimension; returns whether there were any.
bool mark_dynamic(ModelIo& io, const ServeOptions& options) {
  if (!session::is_onnx_model(options.source.spec)) return false;
  const auto declared = graph::onnx_input_dims(options.source.spec);
  const size_t skip = options.max_batch_size > 0 ? 1 : 0;  // the batch is the server's
  bool dynamic = false;
  for (size_t i = 0; i < io.inputs.size() && i < declared.size(); ++i) {
    for (size_t d = skip; d < declared[i].size() && d - skip < io.inputs[i].dims.size(); ++d) {
      if (declared[i][d] < 0 && !(d == 0 && skip == 0)) {
        io.inputs[i].dims[d - skip] = -1;
        dynamic = true;
      }
    }
  }
  if (dynamic) {
    for (TensorSpec& t : io.outputs) std::fill(t.dims.begin(), t.dims.end(), -1);
  }
  return dynamic;
}

}  // namespace

ModelIo describe_model(const ServeOptions& options) {
  session::GraphSource source = options.source;
  source.batch = options.max_batch_size > 0 ? 1 : 0;
  source.dtype = "f32";  // the inputs and outputs are f32 whatever the graph computes in
  std::shared_ptr<const graph::OnnxTail> tail;
  const graph::Graph g = session::load_source(source, &tail);
  ModelIo io = describe_model(g, tail.get(), options);
  mark_dynamic(io, options);
  return io;
}

struct ModelRunner::Planned {
  std::shared_ptr<const session::Model> model;
  session::PreparedPlan prepared;
  std::unique_ptr<executor::Executor> executor;
};

ModelRunner::ModelRunner(ServeOptions options, CorePool& pool,
                         std::shared_ptr<CorePool::Reservation> reservation)
    : options_(std::move(options)), pool_(pool), reservation_(std::move(reservation)) {
  if (options_.session.backend.empty()) options_.session.backend = "cpu";
  pipeline_ = std::make_unique<session::Pipeline>(options_.session, options_.search);
  pipeline_->backend("a served model");
  // The model at batch 1, loaded once: its inputs and outputs are the runner's, and the plan of
  // batch 1 uses it (an int8 model is calibrated here, with a grant of cores as a run would).
  const std::lock_guard<std::mutex> lock(mutex_);
  CorePool::Grant cores = grant();
  const OmpThreads threads(cores.cores());
  const std::shared_ptr<const session::Model> model = model_at(1, {});
  tail_ = model->tail != nullptr;
  default_io_ = describe_model(model->graph, model->tail.get(), options_);
  for (const TensorSpec& t : default_io_.inputs) default_shapes_.push_back(t.dims);
  io_ = default_io_;
  dynamic_ = mark_dynamic(io_, options_);
}

std::shared_ptr<const session::Model> ModelRunner::model_at(int64_t batch, const SampleShapes& shapes) {
  std::shared_ptr<const session::Model>& model = models_[{batch, shapes}];
  if (!model) {
    session::GraphSource source = options_.source;
    source.batch = options_.max_batch_size > 0 ? batch : 0;
    if (!shapes.empty()) {  // the shapes decide every dimension
      source.input_size = 0;
      source.input_shapes.clear();
      for (std::vector<int64_t> dims : shapes) {
        if (options_.max_batch_size > 0) dims.insert(dims.begin(), batch);
        source.input_shapes.push_back(std::move(dims));
      }
    }
    try {
      model = std::make_shared<const session::Model>(pipeline_->load(source));
    } catch (...) {
      models_.erase({batch, shapes});
      throw;
    }
  }
  return model;
}

SampleShapes ModelRunner::key_of(const SampleShapes& shapes) const {
  return !dynamic_ || shapes == default_shapes_ ? SampleShapes{} : shapes;
}

void ModelRunner::touch(const SampleShapes& key) {
  if (key.empty()) return;  // the configured shape stays
  recent_shapes_.erase(std::remove(recent_shapes_.begin(), recent_shapes_.end(), key), recent_shapes_.end());
  recent_shapes_.push_back(key);
  while (recent_shapes_.size() > std::max<size_t>(1, options_.max_shapes)) {
    const SampleShapes old = recent_shapes_.front();
    recent_shapes_.erase(recent_shapes_.begin());
    std::erase_if(models_, [&](const auto& m) { return m.first.second == old; });
    std::erase_if(plans_, [&](const auto& p) { return std::get<2>(p.first) == old; });
    ios_.erase(old);
  }
}

ModelIo ModelRunner::io_locked(const SampleShapes& key) {
  if (key.empty()) return default_io_;
  if (key.size() != io_.inputs.size()) {
    throw UsageError(cat(options_.source.spec, ": shapes of ", key.size(), " input(s) given, the model has ",
                         io_.inputs.size()));
  }
  touch(key);
  auto described = ios_.find(key);
  if (described == ios_.end()) {
    const std::shared_ptr<const session::Model> model = model_at(1, key);
    described = ios_.emplace(key, describe_model(model->graph, model->tail.get(), options_)).first;
  }
  return described->second;
}

ModelIo ModelRunner::io_for(const SampleShapes& shapes) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return io_locked(key_of(shapes));
}

ModelRunner::~ModelRunner() = default;

CorePool::Grant ModelRunner::grant() { return pool_.acquire(options_.cores, reservation_.get()); }

ModelRunner::Planned& ModelRunner::plan_for(int64_t batch, int threads, const SampleShapes& key) {
  if (auto it = plans_.find({batch, threads, key}); it != plans_.end()) return *it->second;
  auto planned = std::make_unique<Planned>();
  planned->model = model_at(batch, key);
  planned->prepared = pipeline_->prepare(*planned->model, options_.schedule);
  {
    // Instances of a process save the same cache files (a fixed temporary name each): one at a
    // time.
    static std::mutex save_mutex;
    const std::lock_guard<std::mutex> save_lock(save_mutex);
    pipeline_->save_cache();
  }
  planned->executor = pipeline_->executor(*planned->prepared.plan);
  std::string shape;
  for (const auto& dims : key) shape += cat(shape.empty() ? "input " : ", ", join(dims, "x"));
  last_summary_ =
      cat("batch ", batch, ", ", threads, " thread(s)", shape.empty() ? "" : cat(", ", shape), ": ",
          session::plan_summary(*planned->prepared.plan, planned->prepared.fallback_note));
  return *(plans_[{batch, threads, key}] = std::move(planned));
}

int64_t ModelRunner::planned_batch(int64_t batch) const {
  for (int64_t size : options_.batch_sizes) {
    if (size >= batch) return size;
  }
  return batch;
}

void ModelRunner::prepare(int64_t batch) {
  const std::lock_guard<std::mutex> lock(mutex_);
  CorePool::Grant cores = grant();
  const OmpThreads threads(cores.cores());
  plan_for(tail_ ? 1 : planned_batch(batch), cores.cores(), {});
}

void ModelRunner::check_inputs(int64_t batch, std::span<const std::span<const float>> srcs,
                               const ModelIo& io) const {
  const int64_t max_batch = std::max<int64_t>(1, options_.max_batch_size);
  if (batch < 1 || batch > max_batch) {
    throw UsageError(cat(options_.source.spec, ": batch of ", batch, " samples, the model takes 1 to ", max_batch,
                         " (max_batch_size)"));
  }
  if (srcs.size() != io.inputs.size()) {
    throw UsageError(cat(options_.source.spec, ": ", srcs.size(), " input(s) given, the model has ", io.inputs.size()));
  }
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (static_cast<int64_t>(srcs[i].size()) != batch * io.inputs[i].numel()) {
      throw UsageError(cat("input '", io.inputs[i].name, "': ", srcs[i].size(), " values, ", batch,
                           " sample(s) of ", io.inputs[i].numel(), " expected"));
    }
  }
}

void ModelRunner::run(int64_t batch, std::span<const std::span<const float>> srcs,
                      std::span<const std::span<float>> dsts, const SampleShapes& shapes) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (tail_) {
    throw UsageError(cat(options_.source.spec, ": its output shapes depend on the data (",
                         model_at(1, {})->tail->summary(), "): run it with run_shaped()"));
  }
  const SampleShapes key = key_of(shapes);
  const ModelIo io = io_locked(key);
  check_inputs(batch, srcs, io);
  if (dsts.size() != io.outputs.size()) {
    throw UsageError(cat(options_.source.spec, ": ", dsts.size(), " output(s) given, the model has ",
                         io.outputs.size()));
  }
  for (size_t i = 0; i < dsts.size(); ++i) {
    if (static_cast<int64_t>(dsts[i].size()) != batch * io.outputs[i].numel()) {
      throw UsageError(cat("output '", io.outputs[i].name, "': room for ", dsts[i].size(),
                           " values, ", batch, " sample(s) of ", io.outputs[i].numel(),
                           " expected"));
    }
  }
  CorePool::Grant cores = grant();
  const OmpThreads threads(cores.cores());
  const int64_t size = planned_batch(batch);
  Planned& planned = plan_for(size, cores.cores(), key);
  if (size == batch) {
    for (size_t i = 0; i < srcs.size(); ++i) planned.executor->set_input(i, srcs[i]);
    planned.executor->execute();
    for (size_t i = 0; i < dsts.size(); ++i) planned.executor->output_into(i, dsts[i]);
    return;
  }
  // A smaller batch on a larger plan: zeros after its samples, their outputs dropped.
  std::vector<float> staging;
  for (size_t i = 0; i < srcs.size(); ++i) {
    staging.assign(static_cast<size_t>(size * io.inputs[i].numel()), 0.0f);
    std::copy(srcs[i].begin(), srcs[i].end(), staging.begin());
    planned.executor->set_input(i, staging);
  }
  planned.executor->execute();
  for (size_t i = 0; i < dsts.size(); ++i) {
    staging.resize(static_cast<size_t>(size * io.outputs[i].numel()));
    planned.executor->output_into(i, staging);
    std::copy_n(staging.begin(), dsts[i].size(), dsts[i].begin());
  }
}

namespace {

// Appends one sample's outputs `sample` to `joined` (the samples so far): with batching each
// output's first dimension is the sample's (1), and the samples join along it; without, the one
// sample's outputs are the result.
void join_sample(std::vector<graph::ModelOutput>& joined, std::vector<graph::ModelOutput>&& sample,
                 bool batching, const std::string& spec) {
  for (size_t i = 0; i < sample.size(); ++i) {
    graph::ModelOutput& out = sample[i];
    if (!batching) continue;
    if (out.dims.empty() || out.dims[0] != 1) {
      throw UsageError(cat(spec, ": output '", out.name, "' of one sample has shape [", join(out.dims, ", "),
                           "]: its first dimension is not the batch; serve it with max_batch_size 0"));
    }
    if (joined.empty()) continue;
    graph::ModelOutput& all = joined[i];
    if (!std::equal(all.dims.begin() + 1, all.dims.end(), out.dims.begin() + 1, out.dims.end())) {
      std::vector<int64_t> first = all.dims;
      first[0] = 1;
      throw UsageError(cat(spec, ": output '", out.name, "' has shape [", join(first, ", "), "] for one sample and [",
                           join(out.dims, ", "), "] for another of the same request: send them in separate "
                           "requests"));
    }
    all.dims[0] += 1;
    all.data.insert(all.data.end(), out.data.begin(), out.data.end());
  }
  if (joined.empty()) joined = std::move(sample);
}

}  // namespace

std::vector<graph::ModelOutput> ModelRunner::run_shaped(int64_t batch, std::span<const std::span<const float>> srcs,
                                                        const SampleShapes& shapes) {
  if (!tail_) {
    const ModelIo io = io_for(shapes);
    std::vector<graph::ModelOutput> outs;
    std::vector<std::span<float>> dsts;
    outs.reserve(io.outputs.size());
    for (const TensorSpec& t : io.outputs) {
      std::vector<int64_t> dims = t.dims;
      if (options_.max_batch_size > 0) dims.insert(dims.begin(), batch);
      outs.push_back({t.name, dims, std::vector<float>(static_cast<size_t>(std::max<int64_t>(0, batch * t.numel())))});
      dsts.emplace_back(outs.back().data);
    }
    run(batch, srcs, dsts, shapes);
    return outs;
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  const SampleShapes key = key_of(shapes);
  const ModelIo io = io_locked(key);
  check_inputs(batch, srcs, io);
  CorePool::Grant cores = grant();
  const OmpThreads threads(cores.cores());
  // The tail reads the graph's outputs of one sample (an export's NMS head takes sample 0): each
  // sample runs alone at batch 1, then the tail.
  Planned& planned = plan_for(1, cores.cores(), key);
  std::vector<graph::ModelOutput> joined;
  for (int64_t s = 0; s < batch; ++s) {
    for (size_t i = 0; i < srcs.size(); ++i) {
      const auto n = static_cast<size_t>(io.inputs[i].numel());
      planned.executor->set_input(i, srcs[i].subspan(static_cast<size_t>(s) * n, n));
    }
    planned.executor->execute();
    join_sample(joined, session::model_outputs(*planned.model, planned.executor->outputs()),
                options_.max_batch_size > 0, options_.source.spec);
  }
  return joined;
}

std::vector<std::pair<int64_t, int>> ModelRunner::planned() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<int64_t, int>> out;
  for (const auto& [key, p] : plans_) out.emplace_back(std::get<0>(key), std::get<1>(key));
  return out;
}

std::string ModelRunner::last_plan_summary() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return last_summary_;
}

}  // namespace stagecraft::serve
