#pragma once
// Internal to the ONNX importer: constant tensors and their evaluation. Once the input shapes are
// fixed, every node whose inputs are all constants (initializers, Constant nodes, shapes of
// tensors whose shapes are known) is evaluated at import: shape arithmetic (Shape, Gather,
// Concat, Div, Ceil, ...), Identity and Cast of initializers, ConstantOfShape, Range, and so on.
// Evaluation is exact for the integers of shape arithmetic (held as doubles: exact to 2^53).

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::graph::onnx_import {

/// The element kinds constant folding distinguishes.
enum class ElemKind { kFloat, kInt, kBool };

/// The kind of an ONNX element type (TensorProto::DataType).
ElemKind kind_of(int32_t onnx_type);

/// The number of elements of a tensor of these dimensions (1 for a scalar).
int64_t product(const std::vector<int64_t>& dims);
/// The row-major strides of a tensor of these dimensions.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims);

/// A dense constant tensor (row-major).
struct ConstTensor {
  ElemKind kind = ElemKind::kFloat;
  int32_t onnx_type = onnx::TensorProto::FLOAT;  ///< the ONNX element type it came with
  std::vector<int64_t> dims;                     ///< empty: a scalar
  /// The elements as doubles (folding computes in them). Large FLOAT tensors (weights) keep
  /// their elements in `f32` instead until a fold needs them (decode()): a model's weights would
  /// take twice their size as doubles and be converted twice.
  std::vector<double> values;
  std::vector<float> f32;  ///< see values

  int64_t numel() const;
  /// A tensor of the same element type and dimensions without elements (for a fold that writes
  /// every element of its result: no copy of this one's).
  ConstTensor like() const { return ConstTensor{kind, onnx_type, dims, {}, {}}; }
  /// Fills `values` from `f32` (a no-op when already decoded).
  void decode();
  /// The values as int64 (rounded toward zero).
  std::vector<int64_t> ints() const;
  /// The values as float.
  std::vector<float> floats() const;
  static ConstTensor of_ints(std::vector<int64_t> values, std::vector<int64_t> dims);
  static ConstTensor of_floats(std::vector<float> values, std::vector<int64_t> dims);
};

/// Reads external tensor data (what `torch.onnx.export(..., dynamo=True)` and `onnx.save(...,
/// save_as_external_data=True)` write beside the model): files by location relative to the model's
/// folder, each read once.
class ExternalData {
 public:
  /// `model_dir`: the folder of the model file ("" for bytes without a file: external data is
  /// then an error).
  explicit ExternalData(std::string model_dir) : dir_(std::move(model_dir)) {}
  /// The raw bytes of `t`'s data; nullopt with `why` set when they cannot be read.
  std::optional<std::string> read(const onnx::TensorProto& t, std::string* why);

 private:
  std::string dir_;
  std::map<std::string, std::string> files_;
};

/// Reads an initializer or Constant value (external data through `external`, may be null);
/// nullopt with `why` set for element types it cannot hold (strings, complex) or malformed data.
std::optional<ConstTensor> from_proto(const onnx::TensorProto& t, std::string* why,
                                      ExternalData* external = nullptr);

/// A node as the folder sees it: type, attributes, constant inputs (nullptr for an omitted
/// optional input), and the shapes of non-constant inputs where known (for Shape and Size).
struct FoldInput {
  const ConstTensor* constant = nullptr;           ///< the value, when constant
  std::optional<std::vector<int64_t>> shape;       ///< the shape of a graph tensor
};

/// Evaluates `node` when every input it needs is constant (Shape and Size need only the shape).
/// Returns the outputs; nullopt when the node cannot be folded (some input is a tensor, or the op
/// has no constant form). Throws std::runtime_error with a short reason when the inputs are
/// constant but invalid for the op (the importer names the node).
std::optional<std::vector<ConstTensor>> fold(const onnx::NodeProto& node,
                                             const std::vector<FoldInput>& inputs, int64_t opset);

/// Input `i`'s constant (nullptr when it is absent or not constant).
const ConstTensor* constant_at(const std::vector<FoldInput>& inputs, size_t i);

/// The folds of onnx_fold_shapes.cpp. Shape and Size of input 0 (a constant, or a tensor of known
/// shape); nullopt when its shape is not known.
std::optional<std::vector<ConstTensor>> fold_shape(const onnx::NodeProto& node,
                                                   const std::vector<FoldInput>& inputs);
/// The folds that move or reduce elements (Squeeze, Unsqueeze, Concat, Gather, Slice, Reshape,
/// Flatten, Transpose, ConstantOfShape, Range, the reductions) of constant inputs; nullopt for
/// other op types. Throws std::runtime_error on invalid inputs.
std::optional<ConstTensor> fold_shapes(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                                       int64_t opset);

/// The folds of onnx_fold_tables.cpp (tables and products of constants: GatherND, ScatterND,
/// MatMul, Softmax, CumSum, Einsum, Conv, Tile) of `x` with the node's second and third inputs (null when absent); nullopt
/// for other op types. Throws std::runtime_error on invalid inputs.
std::optional<ConstTensor> fold_tables(const onnx::NodeProto& node, const ConstTensor& x,
                                       const ConstTensor* second, const ConstTensor* third);

/// The folds of onnx_fold_selection.cpp (NonZero and NonMaxSuppression, whose output shapes depend
/// on the values; Pad in every mode); nullopt for other op types. Throws std::runtime_error on
/// invalid inputs.
std::optional<ConstTensor> fold_selection(const onnx::NodeProto& node, const std::vector<FoldInput>& inputs,
                                          int64_t opset);

/// NumPy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b);

/// The node's name, or its first output's where it has none (for messages).
std::string node_name(const onnx::NodeProto& node);

/// An attribute of `node`, or nullptr.
const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const char* name);
int64_t attr_int(const onnx::NodeProto& node, const char* name, int64_t fallback);
float attr_float(const onnx::NodeProto& node, const char* name, float fallback);
std::vector<int64_t> attr_ints(const onnx::NodeProto& node, const char* name);
std::string attr_string(const onnx::NodeProto& node, const char* name);
std::vector<float> attr_floats(const onnx::NodeProto& node, const char* name);
std::vector<std::string> attr_strings(const onnx::NodeProto& node, const char* name);

}  // namespace stagecraft::graph::onnx_import
