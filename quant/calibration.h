#pragma once
/// Calibration for int8 quantisation: runs the f32 graph on sample inputs with every value kept,
/// and records each value's range (graph/quantize.h turns the ranges into scales).
///
/// Methods: "minmax" keeps max |x| over all samples; "percentile" keeps, per sample, the given
/// percentile of |x| and then the largest over samples (clips rare outliers for finer steps).
///
/// Example:
///   CalibrationOptions options;
///   options.samples = 16;
///   graph::Calibration cal = calibrate(graph, weights, *backend, options);
///   graph::Graph q = graph::quantize(graph, cal);

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/executor.h"
#include "executor/tensor.h"
#include "graph/quantize.h"
#include "graph/weights.h"

namespace stagecraft::quant {

/// How to calibrate.
struct CalibrationOptions {
  int samples = 8;               ///< generated inputs (ignored when `inputs` is given)
  std::string method = "minmax";  ///< minmax | percentile
  double percentile = 99.99;     ///< for "percentile": share of |x| kept, in percent (50..100)
  uint64_t seed = 1000;          ///< of the generated inputs (uniform in [-1, 1))
  /// Supplied inputs, one list per sample (one tensor per graph input); empty: generate.
  std::vector<std::vector<executor::HostTensor>> inputs;
  /// Called after each sample with (samples done, samples in all).
  std::function<void(int, int)> progress;
};

/// The ranges of every value of `graph` (f32) over the samples, run on `backend` with a sequential
/// schedule. Throws UsageError-like stagecraft::Error for zero samples, an unknown method or a
/// percentile outside [50, 100], and the executor's errors for inputs of the wrong shape.
graph::Calibration calibrate(const graph::Graph& graph, const graph::WeightStore& weights,
                             executor::Backend& backend, const CalibrationOptions& options);

/// How closely two sets of logits agree, sample by sample, in one view of them.
struct LogitScores {
  double min_cosine = 1;   ///< smallest cosine similarity of a pair of outputs
  double mean_cosine = 1;  ///< mean cosine similarity
  double top1 = 1;         ///< share of samples whose arg-max agrees
  /// Distinct arg-max classes among the reference outputs (a check where every sample has the
  /// same top-1 class says little about top-1 agreement).
  int distinct_top1 = 0;
};

/// Agreement of two sets of logits (e.g. int8 against f32) over the same inputs.
struct Agreement {
  int samples = 0;
  LogitScores raw;  ///< of the logits as they are
  /// The same on the input-dependent part of the outputs: each sample's logits minus the mean
  /// logits over all samples (of its own set). With random weights the raw logits are dominated
  /// by what every input shares (one class wins for all), which the raw metrics cannot see past.
  LogitScores centred;
};

/// Compares outputs sample by sample (first graph output of each; rank 2, N x classes: each row
/// is one sample).
Agreement compare_logits(const std::vector<executor::HostTensor>& got,
                         const std::vector<executor::HostTensor>& want);

/// compare_logits of the first outputs of `got` and `want` (two executors of the same model's
/// inputs) on `samples` random inputs: sample i, input k from random_host_tensor with seed
/// i * 31 + k + `seed`.
Agreement compare_on_random_inputs(executor::Executor& got, executor::Executor& want,
                                   const graph::Graph& graph, int samples, uint64_t seed);

/// How far one value of an int8 graph is from the same value of its f32 graph.
struct ValueError {
  std::string value;    ///< the value's name (that of the op writing it)
  std::string kind;     ///< that op's kind ("conv2d"), or "input"
  /// ||int8 - f32|| / ||f32||, the int8 value dequantised; a u8 value against the f32 value's
  /// positive part (a value read only through ReLU is held so)
  double relative = 0;
  /// `relative` less the largest relative error of the op's inputs (through conversions; a value
  /// left out passes its inputs' error on): what this op added.
  double growth = 0;
};

/// The values of `int8` (quantize()'s graph of `f32`) against those of `f32` on one set of inputs,
/// in the int8 graph's order: both graphs run once with every value kept (the memory of all their
/// activations at once). Left out: values without a same-named, same-sized f32 value (the
/// quantiser's conversions), and values held with a scale per channel (a part-scale
/// concatenation's, and what ReLU or pooling makes of them), which one scale cannot dequantise.
std::vector<ValueError> value_errors(const graph::Graph& f32, const graph::WeightStore& f32_weights,
                                     const graph::Graph& int8, const graph::WeightStore& int8_weights,
                                     executor::Backend& backend,
                                     const std::vector<executor::HostTensor>& inputs);

}  // namespace stagecraft::quant
