#include "session/source.h"

#include <chrono>
#include <filesystem>
#include <ostream>

#include "common/error.h"
#include "common/strings.h"
#include "frontend/onnx/onnx_io.h"
#include "graph/bf16.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "graph/yaml_io.h"
#include "networks/registry.h"

namespace stagecraft::session {

bool is_graph_file(const std::string& spec) {
  const std::string ext = std::filesystem::path(spec).extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".onnx" || spec.find('/') != std::string::npos;
}

bool is_onnx_model(const std::string& spec) {
  return std::filesystem::path(spec).extension().string() == ".onnx";
}

namespace {

// The checks of an int8 source (or of one with a calibration file).
void check_int8(const GraphSource& source) {
  if (source.dtype != "int8") {
    throw UsageError(cat("--calibration ", source.calibration, " applies to --dtype int8 (the "
                         "graph computes in ", source.dtype, ")"));
  }
  if (source.raw) throw UsageError("--dtype int8 quantises the inference graph: drop --raw");
}

// The inference graph in the source's precision: bf16 converts it (graph::to_bf16).
graph::Graph in_precision(const GraphSource& source, graph::Graph g) {
  if (source.dtype != "bf16") return g;
  if (source.raw) throw UsageError("--dtype bf16 converts the inference graph: drop --raw");
  return graph::to_bf16(g);
}

// The raw graph, and the ONNX file's weights when the source is an ONNX model.
graph::Graph load_raw(const GraphSource& source, graph::WeightStore* onnx_weights = nullptr,
                      std::shared_ptr<const graph::OnnxTail>* tail = nullptr) {
  if (source.spec.empty()) throw UsageError("name a network, a graph file or an ONNX model");
  graph::Graph g;
  if (is_onnx_model(source.spec)) {
    // The shapes are fixed before constant folding: a model exported with dynamic axes gets the
    // batch and input size given here (computed paddings and reshapes then fold).
    graph::OnnxImportOptions options;
    options.batch = source.batch;
    options.input_size = source.input_size;
    options.input_shapes = source.input_shapes;
    options.constant_inputs = source.constant_inputs;
    graph::OnnxModel m = graph::import_onnx(source.spec, options);
    g = std::move(m.graph);
    if (onnx_weights) *onnx_weights = std::move(m.weights);
    if (tail) *tail = std::move(m.tail);
  } else if (is_graph_file(source.spec)) {
    if (source.input_size != 0) {
      throw UsageError(cat("--input-size applies to built-in networks only, not to the graph file '",
                           source.spec, "'"));
    }
    g = graph::load_graph(source.spec);
    if (source.batch != 0) g = graph::with_batch(g, source.batch);
  } else {
    networks::NetworkOptions options;
    options.batch = source.batch == 0 ? 1 : source.batch;
    options.input_size = source.input_size;
    options.seed = source.seed;
    g = networks::build_network(source.spec, options);
  }
  if (source.dtype != "f32" && source.dtype != "int8" && source.dtype != "bf16") {
    const auto dtype = graph::parse_data_type(source.dtype);
    if (!dtype) throw UsageError(cat("--dtype: unknown element type '", source.dtype, "'"));
    g = graph::with_dtype(g, *dtype);
  }
  return g;
}

}  // namespace

graph::Graph load_source(const GraphSource& source, std::shared_ptr<const graph::OnnxTail>* tail) {
  if (source.dtype == "int8" || !source.calibration.empty()) {
    check_int8(source);
    if (source.calibration.empty()) {
      throw UsageError(cat(source.spec, ": --dtype int8 without --calibration calibrates the "
                           "model's weights: load the model through a pipeline"));
    }
    GraphSource f32 = source;
    f32.dtype = "f32";
    f32.calibration.clear();
    const graph::Graph g = graph::prepare_for_inference(load_raw(f32, nullptr, tail), nullptr,
                                                        graph::InferenceOptions{.fuse_residual_adds = false});
    return graph::quantize(g, graph::load_calibration(source.calibration));
  }
  graph::Graph g = load_raw(source, nullptr, tail);
  return source.raw ? in_precision(source, std::move(g))
                    : in_precision(source, graph::prepare_for_inference(g));
}

namespace {

// The f32 (or f16, or bf16) model after the inference passes with `passes`.
Model load_float_model(const GraphSource& source, const graph::InferenceOptions& passes) {
  graph::WeightStore onnx_weights;
  std::shared_ptr<const graph::OnnxTail> tail;
  const graph::Graph raw = load_raw(source, &onnx_weights, &tail);
  graph::WeightStore weights =
      is_onnx_model(source.spec) ? std::move(onnx_weights) : graph::random_weights(raw, source.seed);
  if (source.raw) return Model{in_precision(source, raw), std::move(weights), tail};
  graph::PassLog log;
  graph::Graph g = in_precision(source, graph::prepare_for_inference(raw, &log, passes));
  return Model{std::move(g), graph::fold_weights(raw, std::move(weights), log), tail};
}

}  // namespace

// The graph that is calibrated and quantised keeps its additions: int8 convolutions take no
// residual, and a calibration names the values of this graph.
Model load_f32_model(GraphSource source) {
  source.dtype = "f32";
  source.calibration.clear();
  return load_float_model(source, graph::InferenceOptions{.fuse_residual_adds = false});
}

Model load_model(const GraphSource& source, const Calibrate& calibrate) {
  if (source.dtype == "int8" || !source.calibration.empty()) {
    check_int8(source);
    Model model = load_f32_model(source);
    graph::Calibration calibration;
    if (!source.calibration.empty()) {
      calibration = graph::load_calibration(source.calibration);
    } else if (calibrate) {
      const auto t0 = std::chrono::steady_clock::now();
      calibration = calibrate(model);
      if (source.log) {
        *source.log << "int8: calibrated " << model.graph.num_values() << " values on "
                << source.calibration_samples << " generated inputs ("
                << fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1)
                << " s; `stagecraft calibrate` saves a calibration for reuse)\n";
      }
    } else {
      throw UsageError(cat(source.spec, ": --dtype int8 needs a calibration: give --calibration "
                           "FILE or load the model through a pipeline, which calibrates"));
    }
    return quantise_model(std::move(model), calibration);
  }
  return load_float_model(source, graph::InferenceOptions{});
}

Model quantise_model(Model f32, const graph::Calibration& calibration, graph::QuantizeReport* report) {
  graph::QuantizeReport own;
  graph::QuantizeReport& r = report ? *report : own;
  graph::Graph quantised = graph::quantize(f32.graph, calibration, &r);
  f32.weights = graph::quantised_weights(f32.graph, std::move(f32.weights), r);
  f32.graph = std::move(quantised);
  return f32;
}

std::vector<graph::ModelOutput> model_outputs(const Model& model, std::vector<executor::HostTensor> graph_outputs) {
  if (model.tail) {
    std::vector<std::vector<int64_t>> dims;
    std::vector<std::span<const float>> values;
    std::vector<std::vector<float>> owned;
    for (auto& t : graph_outputs) {
      dims.push_back(t.shape.dims());
      values.emplace_back(t.data);
      owned.push_back(std::move(t.data));  // the span still sees the moved buffer
    }
    return model.tail->outputs(dims, values, &owned);
  }
  std::vector<graph::ModelOutput> result;
  for (size_t i = 0; i < graph_outputs.size(); ++i) {
    const std::string name = i < model.graph.outputs().size() ? model.graph.value(model.graph.outputs()[i]).name : "";
    result.push_back({name, graph_outputs[i].shape.dims(), std::move(graph_outputs[i].data)});
  }
  return result;
}

std::vector<graph::DeclaredOutput> declared_outputs(const Model& model) {
  if (model.tail) return model.tail->declared();
  std::vector<graph::DeclaredOutput> result;
  for (graph::ValueId v : model.graph.outputs()) {
    result.push_back({model.graph.value(v).name, 1, model.graph.value(v).desc.shape.dims()});
  }
  return result;
}

}  // namespace stagecraft::session
