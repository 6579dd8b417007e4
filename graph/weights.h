#pragma once
/// Learned parameters of a graph's ops, kept apart from the graph (which holds structure only).
/// Built-in networks get deterministic random weights (He-uniform for convolutions and linear
/// layers, batch-norm statistics near identity); `fold_weights` applies the folding that
/// `fold_batch_norm` did to the structure, numerically.
///
/// Example:
///   Graph raw = networks::build_network("resnet50");
///   PassLog log;
///   Graph g = prepare_for_inference(raw, &log);
///   WeightStore w = fold_weights(raw, random_weights(raw, /*seed=*/1), log);
///   check_weights(g, w);

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes.h"
#include "graph/quantize.h"

namespace stagecraft::graph {

/// Parameters of one op, in logical layouts.
struct OpWeights {
  std::vector<float> weight;  ///< conv: O × (I/groups) × KH × KW; linear: out × in; binary: its
                              ///< constant operand (row-major, BinaryAttrs::constant)
  std::vector<float> bias;    ///< conv, linear: per output channel (empty when the op has none)
  std::vector<float> gamma;   ///< batch norm: scale per channel
  std::vector<float> beta;    ///< batch norm: shift per channel
  std::vector<float> mean;    ///< batch norm: running mean per channel
  std::vector<float> var;     ///< batch norm: running variance per channel
};

/// Weights of a graph's ops by op name.
class WeightStore {
 public:
  /// The weights of an op, or nullptr.
  const OpWeights* find(const std::string& op) const;
  /// The weights of an op, created empty when missing.
  OpWeights& operator[](const std::string& op) { return weights_[op]; }
  /// Number of ops with weights.
  size_t size() const { return weights_.size(); }
  /// All entries, by op name.
  const std::map<std::string, OpWeights>& entries() const { return weights_; }

 private:
  std::map<std::string, OpWeights> weights_;
};

/// Number of weight and bias elements an op needs (weight, bias), 0 for ops without parameters.
std::pair<size_t, size_t> weight_shape(const Graph& graph, OpId id);

/// Deterministic random weights for every conv, linear and batch-norm op of `graph`.
WeightStore random_weights(const Graph& graph, uint64_t seed);

/// The weights of the inference graph that `prepare_for_inference(raw, &log)` produced: each
/// batch norm in `log.folded` is folded into its convolution's weights and bias; each one in
/// `log.batch_norm_convolutions` (quantize()'s) becomes its depthwise convolution's weights.
/// Folds in place: pass the store by value (std::move it when it is not needed any more).
WeightStore fold_weights(const Graph& raw, WeightStore weights, const PassLog& log);

/// The weights of quantize(graph, ...)'s graph from `graph`'s: those of the batch norms it made
/// depthwise convolutions (report.batch_norm_convolutions) become the convolutions' (fold_weights),
/// and the convolutions reading part-scale concatenations take their factors per input channel
/// (report.input_channel_factors).
WeightStore quantised_weights(const Graph& graph, WeightStore weights, const QuantizeReport& report);

/// Throws GraphError naming the op when an op's weights are missing or have the wrong size.
void check_weights(const Graph& graph, const WeightStore& weights);

}  // namespace stagecraft::graph
