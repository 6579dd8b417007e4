#pragma once
/// Turning the NETWORK|FILE argument of a command into a graph, shared by every command.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "graph/graph.h"
#include "graph/weights.h"

namespace stagecraft::cli {

/// Where a command's graph comes from, and how to build it.
struct GraphSource {
  std::string spec;        ///< a built-in network name or a .yaml graph file
  int64_t batch = 0;       ///< 0: the network's/file's own batch
  int64_t input_size = 0;  ///< 0: the network's default (built-in networks only)
  uint64_t seed = 1;       ///< seed of randomly wired networks
  bool raw = false;        ///< skip the inference passes (BN folding, activation fusion)
  std::string dtype = "f32";  ///< element type the graph computes in (f32 | f16 | int8)
  std::string calibration;    ///< int8: calibration file (default: calibrate now)
  int calibration_samples = 8;  ///< int8 without a file: generated samples to calibrate on

  /// Adds the positional argument and --batch, --input-size, --seed, --raw, --dtype,
  /// --calibration, --calibration-samples; with
  /// `onnx_flag`, also --onnx FILE as another way to name an ONNX model.
  void add_options(CLI::App& command, bool onnx_flag = true);
  /// Adds --dtype, --calibration and --calibration-samples only.
  void add_dtype_options(CLI::App& command);
};

/// Whether `spec` names a graph file (.yaml or .onnx) rather than a built-in network.
bool is_graph_file(const std::string& spec);

/// Builds or loads the graph and runs the inference passes unless `raw`. Throws the library's
/// errors (unknown network, bad file, bad option) with clear messages.
graph::Graph load_source(const GraphSource& source);

/// A graph ready to run: the inference graph and its weights.
struct Model {
  graph::Graph graph;           ///< after the inference passes
  graph::WeightStore weights;   ///< seeded random weights (or the ONNX file's), BN folded
};

/// Loads the graph like load_source and gives it deterministic random weights (seeded by
/// `source.seed`), folded like the graph. With dtype int8 the graph is quantised (graph/quantize.h)
/// with the calibration file, or with a calibration run now on the CPU backend.
Model load_model(const GraphSource& source);

/// The f32 inference model of `source` whatever its dtype (for calibration and comparisons).
Model load_f32_model(GraphSource source);

}  // namespace stagecraft::cli
