#pragma once
/// Static int8 quantisation of an inference graph, from calibrated value ranges.
///
/// The model (oneDNN's and TensorRT's): an 8-bit tensor holds q with real value scale * q (zero
/// point 0); weights are quantised symmetrically per output channel by the backend when it
/// creates a kernel (s8, scale = max |w| / 127 per channel), accumulation is s32, the bias stays
/// f32, and requantisation into the output's scale is fused into the kernel's epilogue.
///
/// `quantize()` decides, op by op in topological order, what every value holds:
///   - convolutions, linear layers and additions compute in int8: they read 8-bit inputs and
///     write their output in its own scale (u8 when the calibrated minimum is >= 0, i8 otherwise),
///     or in f32 where the output is a graph output or has a sigmoid fused;
///   - concatenations write one scale for all their parts: the convolutions, linear layers and
///     additions feeding one write straight in that scale (they share its scale class), other
///     parts are requantised; except where every reader, through ReLU, pooling and zero padding
///     (or another such concatenation), is a depthwise convolution (DenseNet's batch norms):
///     there the parts keep their own scales (ConcatAttrs::part_scales, the value's scale is the
///     largest part's) and those convolutions take each channel's ratio into their weights
///     (QuantizeReport::input_channel_factors, applied by quantised_weights);
///   - pooling, ReLU, pad, flatten, split and slice keep their input's type and scale; a global
///     average pool computes in f32 (its averages would keep a few steps of the map's scale);
///   - a batch norm of a rank-4 tensor becomes a depthwise 1x1 convolution first
///     (batch_norms_as_convolutions: listed in the report, whose weights fold_weights makes);
///   - every other op (softmax, sigmoid, scale, relu6) computes in f32.
/// Where an op needs its input in another type or scale, an identity op converting it is
/// inserted (named "<value>.q<N>"), shared by every reader that needs the same conversion, so
/// conversions are ops the scheduler places like any other.
///
/// Example:
///   Calibration cal = load_calibration("inception_v3.calib.yaml");
///   QuantizeReport report;
///   Graph q = quantize(graph, cal, &report);  // same op names: the f32 weights apply, the
///   WeightStore w = quantised_weights(graph, std::move(f32_weights), report);  // batch norms'
///                                             // made convolutions'  (graph/weights.h)

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace stagecraft::graph {

/// What calibration saw of one value.
struct ValueRange {
  double min = 0;     ///< smallest element over all samples
  double max = 0;     ///< largest element
  double absmax = 0;  ///< the magnitude to represent (max |x|, or a percentile of |x|)
};

/// Calibrated ranges of every value of a graph, by value name.
struct Calibration {
  std::string network;  ///< graph name
  std::string method;   ///< "minmax" or "percentile"
  double percentile = 100;  ///< percentile of |x| kept (100 for minmax)
  int samples = 0;      ///< inputs run
  std::map<std::string, ValueRange> values;
};

/// Writes a calibration as YAML. Throws GraphError when the file cannot be written.
void save_calibration(const Calibration& calibration, const std::string& path);
/// Reads a calibration written by save_calibration. Throws GraphError naming the file, line and
/// field for a missing file, malformed YAML, a negative absmax or min > max.
Calibration load_calibration(const std::string& path);

/// What quantize() did.
struct QuantizeReport {
  size_t int8_ops = 0;       ///< ops computing on 8-bit tensors
  size_t f32_ops = 0;        ///< ops left in f32
  size_t conversions = 0;    ///< identity ops inserted (quantise, dequantise, requantise)
  size_t scale_classes = 0;  ///< values sharing one scale through concatenations, counted once
  /// Batch norms computed as depthwise convolutions (by name): their weights are fold_weights'.
  std::vector<std::string> batch_norm_convolutions;
  /// Concatenations whose 8-bit parts keep their own scales (see quantize()).
  size_t part_scale_concats = 0;
  /// Convolutions reading a part-scale concatenation (by name): per input channel, the factor its
  /// weights take (the part's scale over the value's); quantised_weights applies them.
  std::map<std::string, std::vector<float>> input_channel_factors;
};

/// Kinds whose quantised output keeps the input's element type and scale: max/avg/global pooling,
/// ReLU, pad, flatten, split, slice and identity (no arithmetic that could leave the input's range).
bool keeps_scale(OpKind kind);

/// Kinds that compute in int8 and write any output scale, requantising in their epilogue:
/// convolution, linear layer, addition.
bool rescales(OpKind kind);
/// Whether `act` can run on quantised values in their own units (none, ReLU, and ReLU6 with its
/// bound rescaled); the others (sigmoid, hard sigmoid, hard swish, SiLU) act on real values, so
/// a kernel that fuses one writes f32.
bool scales_with_units(Activation act);

/// Whether any value of the graph is quantised (u8/i8): such graphs compute in int8.
bool is_quantised(const Graph& graph);

/// The precision a graph computes in, as `--dtype` names it: "int8" for quantised graphs, "bf16"
/// for graphs with bf16 values (to_bf16), else the element type of its first input ("f32", "f16").
std::string compute_type(const Graph& graph);
/// The element type a graph's activations compute in, as a backend's preferred layout is asked
/// for it: u8 for quantised graphs, bf16 for bf16 graphs, f16 when the first input is f16 (`--dtype f16`), else f32.
DataType compute_dtype(const Graph& graph);

/// Choices of quantize() that keep precision, on by default (off: what they replace, to compare).
struct QuantizeOptions {
  /// Concatenations read only by depthwise convolutions keep their parts' scales.
  bool part_scales = true;
  /// Values read only through ReLU are u8 over [0, max] (and a concatenation read so keeps parts
  /// read otherwise out of its class).
  bool unsigned_relu_reads = true;
};

/// The int8 graph of an f32 inference graph (see the file comment). Op names are kept, so the f32
/// weights apply; graph outputs are f32. Throws GraphError when the calibration lacks a value
/// of the graph (made for another network) or the graph is not f32.
Graph quantize(const Graph& graph, const Calibration& calibration, QuantizeReport* report = nullptr,
               const QuantizeOptions& options = {});

}  // namespace stagecraft::graph
