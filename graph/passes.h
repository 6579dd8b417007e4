#pragma once
/// Graph passes for inference. Each pass is a plain function from graph to graph (the input is
/// left untouched) and keeps op names, so weights and schedules can refer to ops by name.
///
/// Example:
///   Graph raw = networks::build_network("resnet50");
///   Graph g = prepare_for_inference(raw);  // BN folded, activations fused, identities removed

#include <string>
#include <vector>

#include "graph/graph.h"

namespace stagecraft::graph {

class WeightStore;  // graph/weights.h

/// A batch norm folded into the convolution before it (weights use this to fold numerically).
struct FoldedBatchNorm {
  std::string conv;        ///< name of the convolution (kept)
  std::string batch_norm;  ///< name of the batch norm (removed)
};

/// A multiplication by a constant (a Scale op: ONNX Mul or Div by a scalar) folded into the
/// convolution before it: its weights and bias are multiplied by the factor.
struct FoldedScale {
  std::string conv;   ///< name of the convolution (kept)
  std::string scale;  ///< name of the scale (removed)
  double factor = 1.0;
};

/// A binary op with a per-channel (or scalar) constant folded into the convolution before it:
/// adding or subtracting shifts its bias, multiplying or dividing scales its weights and bias.
struct FoldedConstant {
  std::string conv;    ///< name of the convolution or linear layer (kept)
  std::string binary;  ///< name of the binary op (removed; its weights hold the constant)
  BinaryOp op = BinaryOp::kAdd;
};

/// An activation fused into the op before it.
struct FusedActivation {
  std::string producer;    ///< name of the conv, linear or add (kept)
  std::string activation;  ///< name of the activation op (removed)
};

/// A gated activation recognised: x · gate(x) became one op.
struct RecognisedActivation {
  std::string mul;   ///< name of the multiplication (kept, now the activation)
  std::string gate;  ///< name of the sigmoid or hard sigmoid (removed)
  std::string kind;  ///< "silu" or "hard_swish"
};

/// A residual addition fused into the convolution producing one of its operands.
struct FusedResidual {
  std::string conv;  ///< name of the convolution (kept, now reading the other operand too)
  std::string add;   ///< name of the addition (removed)
};

/// A concatenation folded into the channel shuffle reading it.
struct FoldedConcat {
  std::string shuffle;  ///< name of the channel shuffle (kept, now reading the concat's inputs)
  std::string concat;   ///< name of the concatenation (removed)
};

/// What the inference passes changed.
struct PassLog {
  std::vector<FoldedBatchNorm> folded;        ///< batch norms folded into convolutions
  std::vector<FoldedScale> scales;            ///< constant multiplications folded into convolutions
  std::vector<FoldedConstant> constants;      ///< per-channel constants folded into convolutions
  std::vector<RecognisedActivation> recognised;  ///< x · sigmoid(x) and x · hard_sigmoid(x)
  std::vector<FusedActivation> fused;         ///< activations fused into producers
  std::vector<FusedResidual> residual;        ///< additions fused into convolutions
  std::vector<FoldedConcat> concats;          ///< concatenations folded into channel shuffles
  std::vector<std::string> removed;           ///< identity ops removed
  /// Batch norms made depthwise 1x1 convolutions (batch_norms_as_convolutions), by name.
  std::vector<std::string> batch_norm_convolutions;
  /// Ops merged into an earlier op computing the same (merge_duplicate_ops): (kept, removed).
  std::vector<std::pair<std::string, std::string>> merged;
};

/// Folds every binary op x OP c with a constant c of one value per channel (or one value), OP
/// one of add, sub, mul, div with c second, into the convolution producing x when it is read by
/// nothing else and has no activation or residual of its own (the binary's activation moves to
/// it): a linear layer's bias and a layer scale after channels-last 1x1 convolutions (ConvNeXt);
/// likewise one value per output feature into the linear layer producing x (a transformer's
/// MatMul then Add of the bias).
/// Repeats until nothing folds, so chains fold in order. Not for int8 graphs.
Graph fold_channel_constants(const Graph& graph, PassLog* log = nullptr);

/// Folds every batch norm whose input is a convolution read by nothing else, with no activation or
/// residual of its own, into that convolution (which gains a bias). Batch norms after other ops
/// stay (so does one after a convolution with a fused residual: a pre-activation network's
/// add-then-BN, when a prepared graph is prepared again).
Graph fold_batch_norm(const Graph& graph, PassLog* log = nullptr);

/// Rewrites every batch norm of a rank-4 tensor as the depthwise 1x1 convolution computing its
/// per-channel affine map (same name, same output value, its activation kept; fold_weights gives
/// it weights gamma / sqrt(var + eps) and bias beta - mean · that). For graphs about to be
/// quantised: a batch norm computes in f32, so an 8-bit input is converted to f32 and its output
/// back to 8 bits around it (DenseNet's BN + ReLU before every layer reads the whole concatenation
/// so far), where the convolution reads and writes 8 bits in one pass. quantize() applies it.
Graph batch_norms_as_convolutions(const Graph& graph, PassLog* log = nullptr);

/// Folds every Scale op (y = factor · x) whose input is a convolution read by nothing else, with
/// no activation or residual of its own, into that convolution (Inception-ResNet's scaled
/// residual branches: conv, x 0.17, add), as ONNX Runtime's ConvMulFusion does.
Graph fold_scales(const Graph& graph, PassLog* log = nullptr);

/// Recognises x · sigmoid(x) as one SiLU op and x · hard_sigmoid(x) (PyTorch's) as one hard swish
/// (how exporters write them), when the gate is read by the multiplication alone.
Graph recognise_gated_activations(const Graph& graph, PassLog* log = nullptr);

/// Fuses ReLU, ReLU6, Sigmoid, HardSigmoid (PyTorch's), HardSwish and SiLU into a preceding conv,
/// linear, add or binary op that has no activation yet and whose output is read by nothing else.
Graph fuse_activations(const Graph& graph, PassLog* log = nullptr);

/// Fuses a two-input addition into the convolution producing one operand (read by nothing
/// else, no activation of its own): the convolution reads the other operand as its residual and
/// takes the addition's activation, y = act(conv(x) + bias + r), as ONNX Runtime's FusedConv and
/// oneDNN's sum/binary post-ops compute it. Quantised additions are left alone unless
/// `quantised`: then an 8-bit addition of an 8-bit convolution's output and another 8-bit tensor
/// fuses too (the convolution writes the addition's value, at its scale; a backend whose
/// capabilities say quantised_residuals computes it, after quantize()).
Graph fuse_residual_adds(const Graph& graph, PassLog* log = nullptr, bool quantised = false);

/// Folds a concatenation read by a channel shuffle alone (ShuffleNet's units: concat, then
/// shuffle) into the shuffle, which reads the parts: one pass over the channels instead of a copy
/// into the concatenation and a shuffle of it.
Graph fold_concats_into_shuffles(const Graph& graph, PassLog* log = nullptr);

/// Merges every op that computes what an earlier op computes — the same kind, attributes and
/// inputs, and equal weights in `weights` — into that op: its readers read the earlier op's
/// output. An exporter writes such copies when layers built as copies of one layer keep equal
/// weights (untrained models: Ultralytics' RT-DETR decoder layers read the encoder's memory
/// through six equal value projections), and ONNX Runtime computes them once too. Ops of several
/// outputs and ops whose output is a graph output stay.
Graph merge_duplicate_ops(const Graph& graph, const WeightStore& weights, PassLog* log = nullptr);

/// Removes identity ops, rewiring their readers to the identity's input.
Graph remove_identities(const Graph& graph, PassLog* log = nullptr);

/// What prepare_for_inference may do beyond folding and activation fusion.
struct InferenceOptions {
  /// Fuse residual additions into convolutions (off for graphs about to be quantised: int8
  /// convolutions take no residual).
  bool fuse_residual_adds = true;
};

/// fold_batch_norm, fold_scales, recognise_gated_activations, fuse_activations, remove_identities,
/// fold_concats_into_shuffles, then fuse_residual_adds when the options ask for it.
Graph prepare_for_inference(const Graph& graph, PassLog* log = nullptr,
                            const InferenceOptions& options = {});

/// The same graph with every input's batch dimension set to `batch` and shapes inferred again.
/// Throws GraphError when batch < 1.
Graph with_batch(const Graph& graph, int64_t batch);

/// The same graph computing in `dtype`: every input's element type is set, shape inference
/// carries it through every op.
Graph with_dtype(const Graph& graph, DataType dtype);

}  // namespace stagecraft::graph
