#pragma once
/// Turning a NETWORK|FILE specification into a graph (and weights): shared by every CLI command
/// and by the Python module.
///
/// Example:
///   GraphSource source;
///   source.spec = "inception_v3";   // or "net.yaml", "model.onnx"
///   source.batch = 8;
///   Model model = load_model(source);

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <map>
#include <memory>
#include <vector>

#include "executor/tensor.h"
#include "graph/graph.h"
#include "frontend/onnx/onnx_io.h"
#include "graph/quantize.h"
#include "graph/weights.h"

namespace stagecraft::session {

/// Where a graph comes from, and how to build it.
struct GraphSource {
  std::string spec;        ///< a built-in network name, a .yaml graph file or an .onnx model
  int64_t batch = 0;       ///< 0: the network's/file's own batch
  int64_t input_size = 0;  ///< 0: the network's default (built-in networks and ONNX models)
  /// ONNX models: the shapes of the inputs in order (the symbolic dimensions of dynamic axes come
  /// from them; see graph::OnnxImportOptions::input_shapes); empty: none given.
  std::vector<std::vector<int64_t>> input_shapes;
  /// ONNX models: values of graph inputs fixed at load, imported as constants (see
  /// graph::OnnxImportOptions::constant_inputs); empty: none.
  std::map<std::string, graph::OnnxImportOptions::InputValue> constant_inputs;
  uint64_t seed = 1;       ///< seed of randomly wired networks and of generated weights
  bool raw = false;        ///< skip the inference passes (BN folding, activation fusion)
  std::string dtype = "f32";  ///< element type the graph computes in (f32 | f16 | bf16 | int8)
  std::string calibration;    ///< int8: calibration file (default: calibrate now)
  int calibration_samples = 8;  ///< int8 without a file: generated samples to calibrate on
  /// Where a calibration run now reports (one line); null: quiet.
  std::ostream* log = nullptr;
  /// Called with (samples done, samples) during a calibration run now (optional; it may throw to
  /// stop the run).
  std::function<void(int, int)> on_calibration_progress;
};

/// Whether `spec` names a graph file (.yaml or .onnx) rather than a built-in network.
bool is_graph_file(const std::string& spec);

/// Whether `spec` names an ONNX model file (.onnx).
bool is_onnx_model(const std::string& spec);

/// Builds or loads the graph and runs the inference passes unless `raw`. Throws the library's
/// errors (unknown network, bad file, bad option) with clear messages.
/// A graph ready to run: the inference graph and its weights.
struct Model {
  graph::Graph graph;           ///< after the inference passes
  graph::WeightStore weights;   ///< seeded random weights (or the ONNX file's), BN folded
  /// An ONNX model's nodes evaluated on the host after each run (frontend/onnx/onnx_tail.h); null
  /// when the graph's outputs are the model's. model_outputs() applies it.
  std::shared_ptr<const graph::OnnxTail> tail;
};

/// The model's outputs of one run from its graph's (`graph_outputs` in Graph::outputs() order):
/// those, named after their values, or with a tail the tail's evaluation of them. The graph's
/// outputs that the model gives as they are are moved, not copied (a segmentation model's
/// prototype masks beside its tail's boxes): pass them with std::move (or a temporary).
std::vector<graph::ModelOutput> model_outputs(const Model& model, std::vector<executor::HostTensor> graph_outputs);

/// The model's outputs as it declares them: the graph's outputs (f32), or the tail's declared
/// outputs (dimensions the data decides are -1).
std::vector<graph::DeclaredOutput> declared_outputs(const Model& model);

/// Builds or loads the graph and runs the inference passes unless `raw`, without weights. An int8
/// source needs its calibration file here (a calibration now needs the weights: Pipeline::load).
/// Throws the library's errors (unknown network, bad file, bad option) with clear messages.
/// With `tail`, an ONNX model's data-dependent tail is stored there (null when it has none).
graph::Graph load_source(const GraphSource& source, std::shared_ptr<const graph::OnnxTail>* tail = nullptr);

/// Loads the graph like load_source and gives it deterministic random weights (seeded by
/// `source.seed`), folded like the graph. With dtype int8 the graph is quantised (graph/quantize.h)
/// with the calibration file, or with the ranges `calibrate` records now (Pipeline::load passes
/// its own); without either an int8 source is a UsageError.
using Calibrate = std::function<graph::Calibration(const Model& f32)>;
Model load_model(const GraphSource& source, const Calibrate& calibrate = nullptr);

/// The f32 inference model of `source` whatever its dtype (for calibration and comparisons).
Model load_f32_model(GraphSource source);

/// The int8 model of `f32` (a load_f32_model) with `calibration`: the quantised graph and its
/// weights, those of the batch norms it computes as convolutions included; `report` if given.
Model quantise_model(Model f32, const graph::Calibration& calibration, graph::QuantizeReport* report = nullptr);

}  // namespace stagecraft::session
