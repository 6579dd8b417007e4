#pragma once
/// A model served by one instance of a server: the same session::Pipeline as the CLI and the
/// Python package (load the model at a batch size, choose layouts, search or read the schedule,
/// build the plan, execute), with a plan per batch size made on first use and kept, each run
/// holding a grant of cores from a shared CorePool. Knows nothing of Triton (serve/triton/ turns
/// requests into calls of `run`).
///
/// Example:
///   ServeOptions options;
///   options.source.spec = "squeezenet1_1";
///   options.schedule = session::ScheduleSource::search(scheduler::Strategy::kGreedy);
///   options.max_batch_size = 8;
///   CorePool pool;
///   ModelRunner runner(options, pool);
///   // runner.io().inputs[0]: "input", dims {3, 224, 224} (one sample)
///   runner.run(2, {src}, {dst});   // src: 2*3*224*224 floats, dst: 2*1000 floats

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "serve/core_pool.h"
#include "session/pipeline.h"
#include "session/source.h"

namespace stagecraft::serve {

/// How a served model is loaded, scheduled and run (Triton: the model's config.pbtxt parameters,
/// serve/triton/model_config.h).
struct ServeOptions {
  session::GraphSource source;      ///< model spec, dtype, input size, seed (batch: per plan)
  session::SessionOptions session;  ///< backend (cpu), cache dir, layout, streams
  scheduler::SearchOptions search;  ///< dp search settings
  /// A strategy searched at each batch size, or a schedule file.
  session::ScheduleSource schedule = session::ScheduleSource::search(scheduler::Strategy::kDp);
  /// Largest batch of one run; 0: the model has no batch dimension and runs at its own shape.
  int64_t max_batch_size = 0;
  /// Threads of one run, granted as cores from the pool: 0 = every core of its part of the pool.
  int cores = 0;
  /// Cores reserved for this model (its instances share them, serialised); 0: the shared part.
  int reserve_cores = 0;
  /// Batch sizes whose plans are made when an instance starts (others on first use).
  std::vector<int64_t> warmup_batch_sizes;
  /// The only batch sizes planned (ascending, the last = max_batch_size); a batch runs on the
  /// smallest of them not below it, zero-padded (fewer plans and searches, bounded memory).
  /// Empty: every batch size gets its own plan.
  std::vector<int64_t> batch_sizes;
  /// A model with dynamic axes (an ONNX model's symbolic dimensions besides the batch): the input
  /// shapes whose models and plans are kept, most recently used (the others are made again when
  /// asked for).
  size_t max_shapes = 4;
};

/// The dimensions of one sample of each input, in order (a request's shapes without the batch).
using SampleShapes = std::vector<std::vector<int64_t>>;

/// A named tensor of the model; with batching `dims` are those of one sample (no batch). In the
/// description of a model with dynamic axes (ModelRunner::dynamic) a dimension a request chooses
/// is -1, and every dimension of the outputs is (ModelRunner::io_for gives them for a shape).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> dims;
  /// Elements of one sample (with batching) or of the whole tensor.
  int64_t numel() const;
};

/// The inputs and outputs of a model, in graph order.
struct ModelIo {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

/// The inputs and outputs of the model of `options` (loaded at batch 1 with batching); throws
/// UsageError when batching is asked for a tensor whose first dimension is not the batch.
ModelIo describe_model(const ServeOptions& options);
/// The same for `g` (and its data-dependent `tail`, may be null), the model of `options` already
/// loaded at batch 1 (0 without batching). With a tail the outputs are the tail's, as the model
/// declares them (-1 where the data decides); with batching each must be declared with a first
/// dimension of 1 or symbolic (the batch), else UsageError.
ModelIo describe_model(const graph::Graph& g, const graph::OnnxTail* tail, const ServeOptions& options);

/// One instance's plans and executors of a model; see the file comment. Thread-safe (one run at a
/// time).
class ModelRunner {
 public:
  /// Opens the backend; `reservation` (may be null) is where its grants come from.
  ModelRunner(ServeOptions options, CorePool& pool,
              std::shared_ptr<CorePool::Reservation> reservation = nullptr);
  ~ModelRunner();

  const ServeOptions& options() const { return options_; }
  /// The inputs and outputs (-1 where a request chooses: see TensorSpec).
  const ModelIo& io() const { return io_; }
  /// Whether requests choose some input dimensions besides the batch (an ONNX model's symbolic
  /// dimensions: a plan per input shape, ServeOptions::max_shapes kept).
  bool dynamic() const { return dynamic_; }
  /// The inputs and outputs for samples of `shapes` (at the configured shapes when empty or not
  /// dynamic):
  /// loads the model at that shape on first use. Throws a one-line stagecraft::Error when the model
  /// does not take that shape (a dimension it fixes, a rank).
  ModelIo io_for(const SampleShapes& shapes);

  /// Runs `batch` samples (1..max_batch_size; with max_batch_size 0: pass 1). `srcs[i]` holds
  /// batch x io().inputs[i].numel() floats (logical NCHW), `dsts[i]` receives
  /// batch x io().outputs[i].numel(). Waits for a grant of cores; makes the plan of this batch
  /// size and core count on first use. Throws stagecraft::Error with one line when it cannot.
  /// With `shapes` (a dynamic model), the samples have those input shapes and `dsts[i]` holds
  /// batch x io_for(shapes).outputs[i].numel().
  void run(int64_t batch, std::span<const std::span<const float>> srcs,
           std::span<const std::span<float>> dsts, const SampleShapes& shapes = {});
  /// Whether the model ends in a data-dependent tail (an ONNX model's NonZero / NonMaxSuppression
  /// and the nodes that read them, evaluated on the host after the plan: frontend/onnx/onnx_tail.h).
  /// Its outputs' shapes may depend on the data (io() marks them -1); run() refuses it, run_shaped()
  /// runs it.
  bool has_tail() const { return tail_; }
  /// Runs `batch` samples like run() and returns the outputs with the dimensions the run gave them
  /// (with batching, the batch first). A model with a tail runs its samples one at a time at batch
  /// 1, the plan then the tail (an exporter's NMS head reads one sample: Ultralytics' `nms=True`
  /// takes sample 0), and the samples' outputs are joined along their first dimension, which must be
  /// 1; a request whose samples give different shapes is refused with one line.
  std::vector<graph::ModelOutput> run_shaped(int64_t batch, std::span<const std::span<const float>> srcs,
                                             const SampleShapes& shapes = {});
  /// Makes the plan of `batch` now (with a grant of cores, as a run would).
  void prepare(int64_t batch);
  /// The batch size `batch` samples run at: the smallest of options().batch_sizes not below it
  /// (or `batch` itself without batch_sizes).
  int64_t planned_batch(int64_t batch) const;

  /// Plans made so far as (batch, threads), for statistics and tests.
  std::vector<std::pair<int64_t, int>> planned() const;
  /// The one-line summary of the last plan made ("" before any).
  std::string last_plan_summary() const;

 private:
  struct Planned;
  // With mutex_ held and a grant of `threads`.
  Planned& plan_for(int64_t batch, int threads, const SampleShapes& shapes);
  // Loaded on first use (mutex_ held); `shapes` empty: the configured shape.
  std::shared_ptr<const session::Model> model_at(int64_t batch, const SampleShapes& shapes);
  // Marks `shapes` most recently used, dropping the models and plans of the least recently used
  // shape beyond max_shapes (mutex_ held).
  void touch(const SampleShapes& shapes);
  ModelIo io_locked(const SampleShapes& key);
  // The key of `shapes` in models_ and plans_: {} for the configured shape (or a static model).
  SampleShapes key_of(const SampleShapes& shapes) const;
  CorePool::Grant grant();
  // Throws UsageError unless `srcs` hold `batch` samples (1..max_batch_size) of io's inputs.
  void check_inputs(int64_t batch, std::span<const std::span<const float>> srcs, const ModelIo& io) const;

  ServeOptions options_;
  ModelIo io_;
  bool dynamic_ = false;
  bool tail_ = false;  // the model has a data-dependent tail (has_tail())
  ModelIo default_io_;           // io() at the configured input shapes (no -1)
  SampleShapes default_shapes_;  // the configured input shapes, per sample
  CorePool& pool_;
  std::shared_ptr<CorePool::Reservation> reservation_;
  std::unique_ptr<session::Pipeline> pipeline_;
  std::map<std::tuple<int64_t, int, SampleShapes>, std::unique_ptr<Planned>> plans_;
  // The model at each batch size (and input shape), loaded (imported, int8 calibrated) once for
  // every thread count.
  std::map<std::pair<int64_t, SampleShapes>, std::shared_ptr<const session::Model>> models_;
  std::map<SampleShapes, ModelIo> ios_;      // io_for of each kept shape, described once
  std::vector<SampleShapes> recent_shapes_;  // least recently used first
  std::string last_summary_;
  mutable std::mutex mutex_;
};

}  // namespace stagecraft::serve
