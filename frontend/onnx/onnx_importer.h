#pragma once
// Internal to frontend/onnx/: the importer. Nodes are visited in their (topological) order; a node
// whose inputs are all constant once the input shapes are fixed is evaluated (onnx_constants.h),
// anything else is translated into graph ops (import_node picks the translation:
// onnx_import_dispatch.cpp; the translators are in the files the sections below name). Patterns that span nodes are
// kept pending until they complete: a zero or -inf Pad is folded into the convolutions or max
// pools that read it; a tensor reshaped to a rank the graph does not hold (3, 5: x[:, 0],
// unsqueeze(-1) twice, the 5-D view of a channel shuffle) is a view of a graph value until a
// reshape brings it back to rank 2 or 4; Reshape(N, g, C/g, H, W) -> Transpose(0, 2, 1, 3, 4) ->
// Reshape(N, C, H, W) becomes one channel shuffle; the Transpose(0, 2, 3, 1) of a 4-D tensor is
// a channels-last view of it, on which LayerNormalization over the last axis, MatMul by a
// constant (a 1x1 convolution), element-wise ops and per-channel constants act on the channels of
// the tensor itself, until Transpose(0, 3, 1, 2) brings it back (ConvNeXt's blocks). Patterns of
// several nodes for one operation (GELU) are replaced before the walk (onnx_patterns.h).

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/onnx/onnx_constants.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/onnx_tail_impl.h"

namespace stagecraft::graph::onnx_import {

/// A shape's dimensions (a copy).
inline std::vector<int64_t> dims_of(const Shape& s) { return s.dims(); }
/// The product of dims[from, to).
inline int64_t product(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < dims.size(); ++i) n *= dims[i];
  return n;
}

/// Whether a Reduce* node of `type` takes its axes as input 1 in a model of `opset` (ReduceSum
/// from 13, the others from 18), else as the attribute `axes`.
inline bool reduce_axes_are_input(std::string_view type, int64_t opset) {
  return type == "ReduceSum" ? opset >= 13 : opset >= 18;
}

/// Axes made non-negative for a tensor of `rank` dimensions, sorted.
std::vector<int64_t> normalised_axes(std::vector<int64_t> axes, size_t rank);

/// Translates one model; see the file comment.
class Importer {
 public:
  /// `model_dir`: the folder external data is read from ("" when the model is not a file).
  Importer(std::string source, const OnnxImportOptions& options, std::string model_dir = "");
  OnnxModel run(const std::string& bytes);
  /// Imports a parsed model.
  OnnxModel run(const onnx::ModelProto& model);

  // A graph value seen with another shape (same elements in plain order); after the transpose
  // of a channel shuffle, `shuffle_groups` > 0 and the elements are permuted.
  struct PendingView {
    ValueId base;
    std::vector<int64_t> shape;
    int64_t shuffle_groups = 0;
    /// The elements of `base` [N, C, H, W] in the order [N, H, W, C] (Transpose(0, 2, 3, 1)).
    bool channels_last = false;
    /// > 0: the elements of `base` [N, C, H, W] seen as [N, b, b, C, H/b, W/b] (the transpose of
    /// a space-to-depth, b = this block), until the reshape to [N, C·b·b, H/b, W/b].
    int64_t space_to_depth = 0;
  };

 private:
  // A member function translating one node: what the tables of translators by op type hold
  // (translate(), on_row_major()).
  using Translator = void (Importer::*)(const onnx::NodeProto&);

  // A Pad waiting to be folded into its readers.
  struct PendingPad {
    ValueId input;
    Pads pads;
    bool negative_infinity;  // folds into max pools; otherwise a zero pad into convolutions
  };

  // ---- onnx_import.cpp: the walk, inputs, names, lookups
  [[noreturn]] void fail(const onnx::NodeProto& node, const std::string& what) const;
  // fail() for input `slot` of `node`, which must be a constant and is not: a ConstantInputError
  // naming the graph inputs it is computed from (which constant_inputs may bind), where it has any.
  [[noreturn]] void fail_not_constant(const onnx::NodeProto& node, int slot, const std::string& what) const;
  void add_inputs(const onnx::GraphProto& g);
  std::string unique(const std::string& base);
  void constant_node(const onnx::NodeProto& node);
  std::vector<FoldInput> fold_inputs(const onnx::NodeProto& node);
  const ConstTensor* constant(const onnx::NodeProto& node, int slot) const;
  bool has_input(const onnx::NodeProto& node, int slot) const;
  /// The floats of a constant input (an error naming the node when it is not constant), moved
  /// out of the constant when this node is its only reader.
  std::vector<float> take_floats(const onnx::NodeProto& node, int slot);
  std::vector<int64_t> constant_ints(const onnx::NodeProto& node, int slot, const char* what) const;
  std::vector<float> constant_floats(const onnx::NodeProto& node, int slot, const char* what) const;
  std::optional<float> constant_scalar(const onnx::NodeProto& node, int slot) const;
  ValueId input(const onnx::NodeProto& node, int slot) const;
  /// The dimensions of input `slot`: a constant's, a pending view's or a graph value's.
  std::vector<int64_t> dims_at(const onnx::NodeProto& node, int slot) const;
  std::string unknown_input(const std::string& name) const;
  // A copy: adding ops may move the graph's values.
  Shape shape(ValueId v) const;
  void define(const onnx::NodeProto& node, int slot, ValueId value);
  ValueId add(const onnx::NodeProto& node, OpKind kind, OpAttrs attrs, std::vector<ValueId> inputs);
  /// add() of an op whose one parameter tensor is `weight` (a linear layer's or 1x1
  /// convolution's matrix, a binary op's constant, a constant block).
  ValueId add_weighted(const onnx::NodeProto& node, OpKind kind, OpAttrs attrs,
                       std::vector<ValueId> inputs, std::vector<float> weight);
  OpWeights& weights_of_last();
  const std::set<std::string>& reader_kinds(const onnx::NodeProto& node) const;

  // ---- onnx_import_dispatch.cpp: which translation takes each node
  void import_node(const onnx::NodeProto& node);
  // Whether a Resize gives its input's own size (an identity in every mode but crop-and-resize).
  bool resizes_to_itself(const onnx::NodeProto& node) const;
  // The node as an Identity of its input 0 (its other inputs no longer read).
  onnx::NodeProto as_identity(const onnx::NodeProto& node);
  // A CastLike as the Cast to its second input's element type.
  onnx::NodeProto as_cast(const onnx::NodeProto& node);
  // Whether the node's inputs are all constant: its outputs are then constants (a FormatError
  // when they are invalid for the op).
  bool fold_constant(const onnx::NodeProto& node);
  // Whether every input of the node is a constant (or absent), input 0 among them, and the model
  // has a graph input to make a tensor from.
  bool reads_only_constants(const onnx::NodeProto& node) const;
  // The node to the translator of its op type (a FormatError when there is none).
  void translate(const onnx::NodeProto& node);
  // ---- onnx_import_tail.cpp: the data-dependent tail (onnx_tail.h)
  // Whether the node reads a value of the tail.
  bool reads_tail(const onnx::NodeProto& node) const;
  // tail_, made on first use.
  void started_tail();
  // The constant `name` copied into the tail (decoded to doubles).
  void keep_constant(const std::string& name);
  // The node kept for the tail: its constants copied, the graph values it reads made boundaries.
  void to_tail(const onnx::NodeProto& node);
  // A graph output that is a constant: a value of the tail (which holds the constant).
  void constant_output(const std::string& name);
  // The model's outputs with the tail: graph outputs (the static outputs, then the boundaries) and
  // the tail checked by one evaluation on zeros.
  void finish_tail(const onnx::GraphProto& g);

  // ---- onnx_import_ops.cpp: the convolutions' ops, channels, linear layers, grid sampling
  Pads pads_of(const onnx::NodeProto& node, const Hw& kernel, const Hw& stride, const Hw& dilation,
               const Shape& in) const;
  Hw hw(const onnx::NodeProto& node, const char* name, int64_t fallback) const;
  void conv(const onnx::NodeProto& node);
  void conv_transpose(const onnx::NodeProto& node);
  void batch_norm(const onnx::NodeProto& node);
  void lrn(const onnx::NodeProto& node);
  void pool(const onnx::NodeProto& node);
  /// MaxPool / AveragePool of any spatial rank or with dilations: pool_nd on a row-major tensor.
  void pool_nd(const onnx::NodeProto& node);
  void pad(const onnx::NodeProto& node);
  void space_to_depth(const onnx::NodeProto& node);
  void concat(const onnx::NodeProto& node);
  void slice(const onnx::NodeProto& node);
  void split(const onnx::NodeProto& node);
  void flatten(const onnx::NodeProto& node);
  void gemm(const onnx::NodeProto& node);
  void grid_sample(const onnx::NodeProto& node);
  // ---- onnx_import_elementwise.cpp: activations, math functions, binary ops, Where, Cast
  void clip(const onnx::NodeProto& node);
  // Relu, Sigmoid, HardSwish, Tanh and Sqrt: the op kind of the same name.
  void plain_activation(const onnx::NodeProto& node);
  void leaky_relu(const onnx::NodeProto& node);
  void hard_sigmoid(const onnx::NodeProto& node);
  // One of ONNX's math functions (unary_fn_of_onnx) as a unary op.
  void unary_function(const onnx::NodeProto& node);
  // Neg and Reciprocal.
  void unary(const onnx::NodeProto& node);
  void elementwise(const onnx::NodeProto& node);
  // x [N, C or 1, H or 1, W or 1] broadcast to `to` by exact copies (a 1x1 convolution of weight 1,
  // a nearest resize).
  ValueId expanded(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& to);
  // The constant `c` as a tensor of the graph, of the shape `like` and `c` broadcast to (Where of
  // `like` choosing c either way): where an op needs a tensor operand it cannot take as a constant.
  ValueId materialized(const onnx::NodeProto& node, const ConstTensor& c, ValueId like);
  // The constant `c` as a tensor of its own shape (materialized() of one element of `any`, a
  // row-major tensor of the graph).
  ValueId constant_tensor(const onnx::NodeProto& node, const ConstTensor& c, ValueId any);
  // ---- onnx_import_indices.cpp: TopK, ArgMax / ArgMin, GatherElements, integer arithmetic
  // Whether the tensor `name` has an ONNX integer type (its values are float32 integers here).
  bool is_integer(const std::string& name) const;
  // x truncated toward zero (an integer division's or a cast's rounding).
  ValueId truncated(const onnx::NodeProto& node, ValueId x);
  void top_k(const onnx::NodeProto& node);
  void arg_extreme(const onnx::NodeProto& node);
  void gather_elements(const onnx::NodeProto& node);
  void sum(const onnx::NodeProto& node);
  void where(const onnx::NodeProto& node);
  // Whether the tensor `name` is boolean (made by a comparison, a logical op or a cast to bool).
  bool is_boolean(const std::string& name) const;
  void cast(const onnx::NodeProto& node);
  // Identity and Dropout: the input itself.
  void identity(const onnx::NodeProto& node);
  // ---- onnx_import_reductions.cpp: reductions, global pools, softmaxes
  std::optional<std::vector<int64_t>> axes(const onnx::NodeProto& node, int slot) const;
  void reduce(const onnx::NodeProto& node);
  // ReduceSumSquare, ReduceL2, ReduceL1, ReduceLogSum and ReduceLogSumExp as a ReduceSum of x², |x|
  // or e^x, then sqrt or log where the op takes one: nodes imported in its place.
  void reduce_via_sum(const onnx::NodeProto& node);
  void global_pool(const onnx::NodeProto& node);
  void softmax(const onnx::NodeProto& node);
  // Softmax or LogSoftmax of `x` by the node's axis and the opset's rule (one axis from 13; all
  // the trailing ones flattened before).
  ValueId softmax_of(const onnx::NodeProto& node, ValueId x);
  // ---- onnx_import_views.cpp: reshapes, squeezes, transposes and gathers as views
  void reshape(const onnx::NodeProto& node);
  // The node's input 0 as a view (a graph value, or a pending view of one).
  PendingView view_of(const onnx::NodeProto& node) const;
  void reshape_to(const onnx::NodeProto& node, const PendingView& x, std::vector<int64_t> target);
  void gather(const onnx::NodeProto& node);
  void transpose(const onnx::NodeProto& node);
  void squeeze(const onnx::NodeProto& node);
  // ---- onnx_import_resize.cpp
  // The resize_nd attributes of a Resize of an input of `dims` (ONNX's rules in full).
  ResizeNdAttrs resize_attrs(const onnx::NodeProto& node, const std::vector<int64_t>& dims) const;
  // A Resize: of a constant, folded; PyTorch's modes on a 4-D tensor, a resize op; else resize_nd.
  void resize(const onnx::NodeProto& node);
  // ---- onnx_import_channels.cpp: layer normalisation, GELU, channels-last views
  void layer_norm(const onnx::NodeProto& node);
  // A layer norm of x over its channels with the node's scale, bias (defaults 1, 0) and epsilon.
  ValueId add_layer_norm(const onnx::NodeProto& node, ValueId x);
  void gelu(const onnx::NodeProto& node);
  // Whether the node reads a channels-last view.
  bool reads_channels_last(const onnx::NodeProto& node) const;
  // Whether the view can carry the node (else it runs on the row-major tensor [N, H, W, C]).
  bool stays_channels_last(const onnx::NodeProto& node) const;
  // Translates a node reading channels-last views into ops on their tensors.
  void on_channels_last(const onnx::NodeProto& node);
  // ---- onnx_import_groups.cpp: 5-D views [N, K, C, H, W] of K stacked [N, C, H, W] tensors
  // (split attention, selective kernels): softmax and sums over K, concatenation and element-wise
  // ops of stacks, as ops on the tensor [N, K·C, H, W].
  bool reads_group_view(const onnx::NodeProto& node) const;
  // ---- onnx_import_expansions.cpp: ops written as other ONNX ops (normalisations, PRelu, Gemm
  // of two tensors, MatMul of a vector, LpPool), imported in the node's place.
  class Expansion;
  struct ExpandedInput;  // the rank and dimensions of the expanded node's input 0
  // Whether the node is translated by its expansion.
  bool expands(const onnx::NodeProto& node) const;
  // The node as its expansion: the expand_* function of its op type, or attention().
  void expand(const onnx::NodeProto& node);
  // Axis `a` of a tensor of `rank` dimensions, made non-negative (fails outside it).
  int64_t axis_in(const onnx::NodeProto& node, int64_t a, size_t rank) const;
  void expand_rms_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_layer_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // InstanceNormalization, and BatchNormalization in inference.
  void expand_channel_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_group_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_mean_variance_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_lp_norm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_prelu(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_swiglu(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_rotary(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_causal_conv(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_mod(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_upsample(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_col2im(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // ---- onnx_import_deform.cpp: DeformConv as GridSample, Mul and a 1x1 Conv
  void expand_deform_conv(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // ---- onnx_import_flex_attention.cpp: FlexAttention (ai.onnx.preview) with its modifiers
  void expand_flex_attention(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // The node's subgraph attribute `name` (one tensor in, one out) copied into the expansion reading
  // `x`: its output's name (`x` when the node has no such attribute).
  std::string inline_modifier(const onnx::NodeProto& node, Expansion& e, const char* name, const std::string& x);
  // ---- onnx_import_det.cpp: Det of matrices up to 4 x 4 by Leibniz's formula
  void expand_det(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // ---- onnx_import_conv3d.cpp: Conv and ConvTranspose of a 5-D input as 2-D ones per kernel depth
  void expand_conv3d(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // A 2-D ConvTranspose whose stride equals its square kernel, unpadded: a 1x1 Conv to M · k · k
  // channels, then DepthToSpace; expand_conv_transpose picks it or the 3-D one.
  bool is_block_upsampling(const onnx::NodeProto& node) const;
  // MaxPool / AveragePool of a 5-D input without dilations: a 2-D pool per depth slice, then one
  // along the depth.
  bool is_separable_pool(const onnx::NodeProto& node) const;
  void expand_separable_pool(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_block_upsampling(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_conv_transpose(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_dft(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_gemm(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_matmul(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // Gather by indices the model computes: GatherElements of them broadcast, then a Reshape.
  void expand_gather(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_trilu(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // GatherND as a Gather of the data's leading axes flattened.
  void expand_gather_nd(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void expand_lp_pool(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // GlobalAveragePool and GlobalMaxPool of other ranks than 4.
  void expand_global_pool(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  void attention(const onnx::NodeProto& node, Expansion& e);
  // ---- onnx_import_recurrent.cpp: RNN, GRU and LSTM unrolled over the sequence
  class Recurrence;  // one node's settings and its unrolling
  void recurrent(const onnx::NodeProto& node);
  // ---- onnx_import_scan.cpp: Scan and LinearAttention unrolled over their sequences
  void scan(const onnx::NodeProto& node);
  // Scan-8 (a batch axis first, sequence lengths): a Scan of version 9 per batch element, stacked.
  void scan_batched(const onnx::NodeProto& node);
  void expand_linear_attention(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in);
  // ---- onnx_import_tensors.cpp: row-major tensors of any rank (transformers)
  // Whether the node reads a row-major value (made by this part of the importer) or a view of one.
  bool reads_row_major(const onnx::NodeProto& node) const;
  bool is_row_major(ValueId v) const;
  // The node's input `slot` as a tensor of the convolutions: itself, or a rank-4 row-major tensor
  // (or view of one) reshaped into one; nullopt when it is none of these.
  std::optional<ValueId> as_convolutions_tensor(const onnx::NodeProto& node, int slot);
  // Translates a node reading row-major values (by its op type, with the translators below);
  // false when the ordinary translation applies.
  bool on_row_major(const onnx::NodeProto& node);
  // define(node, 0, mark(v)): the node's output as a row-major value.
  void define_row_major(const onnx::NodeProto& node, ValueId v);
  // Translators on_row_major always uses for their op types.
  void transpose_row_major(const onnx::NodeProto& node);
  void reshape_row_major(const onnx::NodeProto& node);
  void flatten_row_major(const onnx::NodeProto& node);
  void squeeze_row_major(const onnx::NodeProto& node);
  void gemm_row_major(const onnx::NodeProto& node);
  void softmax_row_major(const onnx::NodeProto& node);
  void layer_norm_row_major(const onnx::NodeProto& node);
  // Add, Sub, Mul and Div, the operand of lower rank given leading 1s.
  void arithmetic_row_major(const onnx::NodeProto& node);
  void reduce_row_major(const onnx::NodeProto& node);
  // A ReduceMean or ReduceSum over the stacking axis of the tensors `parts` (stacked_parts).
  void reduce_stacked(const onnx::NodeProto& node, const std::vector<std::string>& parts);
  // Tile, and Expand (no copies where the readers broadcast).
  void tile_row_major(const onnx::NodeProto& node);
  // DepthToSpace (a pixel shuffle), also of the convolutions' tensors.
  void depth_to_space(const onnx::NodeProto& node);
  // Translators that may leave the node to the ordinary translation (false), its row-major input
  // then a tensor of the convolutions.
  bool concat_or_convolutions(const onnx::NodeProto& node);
  bool pad_or_convolutions(const onnx::NodeProto& node);
  bool batch_norm_or_convolutions(const onnx::NodeProto& node);
  // A convolution or pool of [N, C, L] as the 1-D op; any other op of the convolutions on its
  // input as a tensor of the convolutions (false), failing where it is not one.
  bool back_to_convolutions(const onnx::NodeProto& node);
  // ---- onnx_import_lifts.cpp: 1-D convolutions and pools, and ops of other ranks than 4 that
  // only the row-major translation handles.
  std::optional<size_t> rank_of(const std::string& name) const;
  bool needs_row_major(const onnx::NodeProto& node) const;
  // Whether the node reads a plain view of a rank other than 2 and 4 and does not carry views.
  bool reads_loose_view(const onnx::NodeProto& node) const;
  // A Conv, MaxPool or AveragePool of [N, C, L] as the 2-D op over [N, C, 1, L].
  void one_dimensional(const onnx::NodeProto& node);
  // The node's input `slot` as a row-major graph value (a view or a convolutions' tensor copied).
  ValueId row_major(const onnx::NodeProto& node, int slot);
  // row_major() of the tensor `name`, read on behalf of `node` (its name in errors).
  ValueId row_major_named(const onnx::NodeProto& node, const std::string& name);
  ValueId make_row_major(const onnx::NodeProto& node, int slot);
  ValueId mark(ValueId v);
  // Whether every reader of the node's output is a binary element-wise op whose other operand has
  // `dims`: the readers broadcast the node's input to `dims` themselves (an Expand to the shape of
  // the tensor it multiplies: ECA's and CBAM's gates).
  bool readers_broadcast(const onnx::NodeProto& node, const std::vector<int64_t>& dims) const;
  // The tensors stacked into `name` by Concat(axis 0) of Unsqueeze(axis 0) of each (torch.stack
  // along a new first axis: CrossViT's heads averaged); empty when it is not such a stack.
  std::vector<std::string> stacked_parts(const std::string& name) const;
  ValueId reshaped(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& target);
  ValueId narrowed(const onnx::NodeProto& node, ValueId x, int64_t axis, int64_t begin, int64_t end);
  // A constant-mode Pad of a row-major tensor: constant blocks joined before and after along each
  // padded axis (BoTNet's relative logits), negative pads as narrows.
  ValueId padded(const onnx::NodeProto& node, ValueId x);
  void matmul(const onnx::NodeProto& node);
  void instance_norm(const onnx::NodeProto& node);
  void einsum(const onnx::NodeProto& node);
  struct EinsumLetters;  // the letters of a two-operand equation by their role
  // A two-operand Einsum with one constant operand (a linear layer, or a grouped 1x1 convolution
  // per batch index) and of two tensors (a matmul): the product, its letters in `result`.
  ValueId einsum_by_constant(const onnx::NodeProto& node, const EinsumLetters& l, std::string* result);
  ValueId einsum_of_tensors(const onnx::NodeProto& node, const EinsumLetters& l, std::string* result);
  // ScatterND of a row-major tensor by constant indices that name each of its elements in order.
  void scatter_row_major(const onnx::NodeProto& node);
  ValueId permuted(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& perm);
  // x · scale + shift with constants of `dims` (ops only where they are not 1 and 0).
  ValueId affine(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& dims,
                 std::vector<float> scale, std::vector<float> shift);
  void concat_row_major(const onnx::NodeProto& node);
  // The parts joined along `axis` (row-major tensors of one rank).
  ValueId concatenated(const onnx::NodeProto& node, const std::vector<ValueId>& parts, int64_t axis);
  void narrow_row_major(const onnx::NodeProto& node);
  // narrow_row_major's three ops on the row-major tensor x; `axis` already in [0, rank).
  void gather_row_major(const onnx::NodeProto& node, ValueId x, int64_t axis);
  void split_row_major(const onnx::NodeProto& node, ValueId x, int64_t axis);
  void slice_row_major(const onnx::NodeProto& node, ValueId x);
  // Axis `a` of row-major tensor x counted from 0 (ONNX's negative axes count from the end).
  int64_t row_major_axis(const onnx::NodeProto& node, ValueId x, int64_t a);
  void on_group_view(const onnx::NodeProto& node);
  ValueId grouped(const onnx::NodeProto& node, const PendingView& v);
  void define_group_view(const onnx::NodeProto& node, ValueId grouped_value, int64_t groups);

  std::string source_;
  OnnxImportOptions options_;
  int64_t opset_ = 0;
  Graph graph_;
  WeightStore weights_;
  OpId last_op_ = kNoOp;
  std::map<std::string, ValueId> values_;
  std::set<std::string> graph_inputs_;  // the model's graph inputs (not initializers), by name
  std::map<std::string, ConstTensor> constants_;
  std::map<std::string, int> readers_;  // node inputs naming each value
  std::map<std::string, PendingPad> pending_pads_;
  std::map<std::string, PendingView> pending_views_;
  std::map<std::string, std::vector<int64_t>> empty_values_;  // slices with no channels, by name
  std::map<std::string, std::set<std::string>> reader_kinds_;
  std::set<ValueId> row_major_;  // values of the row-major translation
  std::map<std::string, ValueId> row_major_copies_;  // row_major() of each tensor name, made once
  std::set<std::string> used_;
  std::set<std::string> produced_;  // every node output of the model
  ExternalData external_;
  std::vector<std::unique_ptr<onnx::NodeProto>> expanded_;  // nodes a node was expanded into
  std::map<std::string, std::vector<const onnx::NodeProto*>> reader_nodes_;  // the nodes reading each value
  std::set<std::string> graph_outputs_;
  mutable std::map<std::string, bool> integer_;  // is_integer() of each name asked about
  bool integer_division_ = false;  // elementwise() of a Div of integers: no reciprocal
  std::map<std::string, const onnx::NodeProto*> producers_;  // the node writing each value
  std::shared_ptr<OnnxTail::Impl> tail_;  // null until a node's output shape depends on the data
  std::set<std::string> tail_values_;     // the values the tail computes
  std::map<std::string, ValueId> boundary_values_;  // the graph values the tail reads, by name
};

}  // namespace stagecraft::graph::onnx_import
