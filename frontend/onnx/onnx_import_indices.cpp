// Index tensors: TopK, ArgMax / ArgMin (a top_k of one), GatherElements of tensors, and the
// integer arithmetic around them. The graph's tensors are float32, so an ONNX integer tensor the
// model computes (TopK's indices, a Cast to an integer type, arithmetic on those) is a float32
// tensor of integer values, exact below 2^24 (shape inference holds top_k's and gather_elements'
// axes to it): a Div of integers and a Cast of a float tensor to an integer type truncate toward
// zero (x - fmod(x, 1)), as ONNX's integer division and casts do.
#include <map>
#include <set>
#include <string>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

namespace {

bool integer_type(int64_t onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::INT8: case onnx::TensorProto::INT16: case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT64: case onnx::TensorProto::UINT8: case onnx::TensorProto::UINT16:
    case onnx::TensorProto::UINT32: case onnx::TensorProto::UINT64:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool Importer::is_integer(const std::string& name) const {
  if (name.empty()) return false;
  if (auto c = constants_.find(name); c != constants_.end()) return integer_type(c->second.onnx_type);
  if (auto known = integer_.find(name); known != integer_.end()) return known->second;
  const auto it = producers_.find(name);
  bool integer = false;
  if (it != producers_.end()) {
    const onnx::NodeProto& p = *it->second;
    const std::string& t = p.op_type();
    // Ops whose output has the element type of their input 0 (or of either operand).
    static const std::set<std::string, std::less<>> kSameType = {
        "Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Transpose", "Slice",
        "Gather", "GatherElements", "GatherND", "Concat", "Split", "Neg", "Abs", "ReduceMax", "ReduceMin",
        "ReduceSum", "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min"};
    if (t == "TopK") {
      integer = p.output_size() > 1 && p.output(1) == name;
    } else if (t == "ArgMax" || t == "ArgMin") {
      integer = true;
    } else if (t == "Cast") {
      integer = integer_type(attr_int(p, "to", onnx::TensorProto::FLOAT));
    } else if (t == "Where") {
      integer = p.input_size() > 2 && (is_integer(p.input(1)) || is_integer(p.input(2)));
    } else if (kSameType.count(t)) {
      const bool binary = t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Mod" || t == "Max" || t == "Min";
      integer = p.input_size() > 0 && (is_integer(p.input(0)) || (binary && p.input_size() > 1 && is_integer(p.input(1))));
    }
  }
  integer_[name] = integer;
  return integer;
}

ValueId Importer::truncated(const onnx::NodeProto& node, ValueId x) {
  // x - fmod(x, 1): toward zero, exact for every float.
  BinaryAttrs mod;
  mod.op = BinaryOp::kMod;
  mod.constant = std::vector<int64_t>(shape(x).rank(), 1);
  const ValueId fraction = add_weighted(node, OpKind::kBinary, mod, {x}, {1.0f});
  BinaryAttrs sub;
  sub.op = BinaryOp::kSub;
  const ValueId y = add(node, OpKind::kBinary, sub, {x, fraction});
  return is_row_major(x) ? mark(y) : y;
}

void Importer::top_k(const onnx::NodeProto& node) {
  const ValueId x = row_major(node, 0);
  const size_t rank = shape(x).rank();
  TopKAttrs a;
  a.axis = axis_in(node, attr_int(node, "axis", -1), rank);
  const std::vector<int64_t> k = constant_ints(node, 1, "K");
  if (k.size() != 1) fail(node, cat("K must hold one value, got ", k.size()));
  a.k = k[0];
  a.largest = attr_int(node, "largest", 1) != 0;
  const ValueId values = mark(add(node, OpKind::kTopK, a, {x}));
  define(node, 0, values);
  if (node.output_size() > 1 && !node.output(1).empty()) define(node, 1, mark(graph_.op(last_op_).outputs[1]));
}

void Importer::arg_extreme(const onnx::NodeProto& node) {
  // The index of the first largest (smallest) element: a top_k of one's indices.
  if (attr_int(node, "select_last_index", 0) != 0) fail(node, "select_last_index 1 is not supported (the first index of equal values is)");
  const ValueId x = row_major(node, 0);
  const std::vector<int64_t> dims = dims_of(shape(x));
  TopKAttrs a;
  a.axis = axis_in(node, attr_int(node, "axis", 0), dims.size());
  a.k = 1;
  a.largest = node.op_type() == "ArgMax";
  a.ordered_nan = false;  // ONNX Runtime's ArgMax / ArgMin compare plainly
  add(node, OpKind::kTopK, a, {x});
  ValueId indices = mark(graph_.op(last_op_).outputs[1]);
  if (attr_int(node, "keepdims", 1) == 0) {
    std::vector<int64_t> kept = dims;
    kept.erase(kept.begin() + a.axis);
    if (kept.empty()) fail(node, "the result is a scalar (rank 0): not supported");
    indices = reshaped(node, indices, kept);
  }
  define(node, 0, mark(indices));
}

void Importer::gather_elements(const onnx::NodeProto& node) {
  // Of two tensors; a constant operand (the data of a lookup table, or fixed indices) as a tensor.
  const ConstTensor* data = constant(node, 0);
  const ConstTensor* idx = constant(node, 1);
  if (data && idx) fail(node, "both inputs are constants (the gather folds)");
  const ValueId x = data ? constant_tensor(node, *data, row_major(node, 1)) : row_major(node, 0);
  const ValueId i = idx ? constant_tensor(node, *idx, x) : row_major(node, 1);
  GatherElementsAttrs a;
  a.axis = axis_in(node, attr_int(node, "axis", 0), shape(x).rank());
  define(node, 0, mark(add(node, OpKind::kGatherElements, a, {mark(x), mark(i)})));
}

void Importer::expand_gather(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // Indices the model computes (RT-DETR's and an oriented-box NMS head's top-k rows): the
  // GatherElements of the indices, flattened and broadcast over the other axes, reshaped to ONNX's
  // output (the dimensions before the axis, the indices', those after it).
  const int64_t axis = axis_in(node, attr_int(node, "axis", 0), in.rank);
  const std::vector<int64_t> indices = dims_at(node, 1);
  const int64_t count = product(indices, 0, indices.size());
  std::vector<int64_t> spread(in.rank, 1), full = in.dims;
  spread[static_cast<size_t>(axis)] = count;
  full[static_cast<size_t>(axis)] = count;
  const std::string index = e.op("Expand", {e.op("Reshape", {node.input(1), e.ints(spread)}), e.ints(full)});
  std::string data = node.input(0);
  if (const ConstTensor* table = constant(node, 0)) {
    // A constant table (RT-DETR's anchors): a tensor of the graph made from it once.
    data = cat(node.input(0), "/as_tensor");
    if (!values_.count(data)) values_[data] = constant_tensor(node, *table, row_major_named(node, *graph_inputs_.begin()));
  }
  const std::string y = e.op("GatherElements", {data, index}, {int_attr("axis", axis)});
  std::vector<int64_t> out(in.dims.begin(), in.dims.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), in.dims.begin() + axis + 1, in.dims.end());
  e.op("Reshape", {y, e.ints(out)}, {}, output_of(node, 0));
}

void Importer::expand_trilu(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // The upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes: a Where of a
  // constant mask, zeros elsewhere.
  if (in.rank < 2) fail(node, "the input must have rank 2 or more");
  const int64_t k = has_input(node, 1) ? constant_ints(node, 1, "k").at(0) : 0;
  const bool upper = attr_int(node, "upper", 1) != 0;
  const int64_t rows = in.dims[in.rank - 2], cols = in.dims[in.rank - 1];
  std::vector<float> mask(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) mask[static_cast<size_t>(i * cols + j)] = (upper ? j - i >= k : j - i <= k) ? 1.0f : 0.0f;
  }
  e.op("Where", {e.floats(mask, {rows, cols}), node.input(0), e.scalar(0.0f)}, {}, output_of(node, 0));
}

void Importer::expand_gather_nd(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // GatherND (batch_dims 0) as a Gather along the first axis of the data seen as [the k indexed
  // axes flattened, the rest]: the row of each index tuple is its dot product with the row-major
  // strides of those axes (negative indices first counted from the end). Constant indices fold to
  // a constant Gather (UperNet's adaptive pooling); computed ones are a Gather by computed indices.
  if (attr_int(node, "batch_dims", 0) != 0) fail(node, "batch_dims other than 0 is not supported");
  const std::vector<int64_t> indices = dims_at(node, 1);
  if (indices.empty()) fail(node, "the indices must have rank 1 or more");
  const auto k = static_cast<size_t>(indices.back());
  if (k < 1 || k > in.rank) fail(node, cat("index tuples of ", k, " values for data of rank ", in.rank));
  std::vector<int64_t> flat = {product(in.dims, 0, k)}, strides(k), extents(in.dims.begin(), in.dims.begin() + k);
  flat.insert(flat.end(), in.dims.begin() + k, in.dims.end());
  if (k == in.rank) flat.push_back(1);  // single elements: rows of one (a 1-D tensor is gathered whole only)
  for (size_t j = k; j-- > 0;) strides[j] = j + 1 == k ? 1 : strides[j + 1] * in.dims[j + 1];
  const std::string data = e.op("Reshape", {node.input(0), e.ints(flat)});
  const std::string& idx = node.input(1);
  const std::string positive =
      e.op("Where", {e.op("Less", {idx, e.ints({0})}), e.op("Add", {idx, e.ints(extents)}), idx});
  std::vector<int64_t> last_axis = {-1};
  const std::string rows = e.unsqueeze("Squeeze", e.reduce("ReduceSum", e.op("Mul", {positive, e.ints(strides)}), last_axis), last_axis);
  std::vector<int64_t> out(indices.begin(), indices.end() - 1);
  out.insert(out.end(), in.dims.begin() + k, in.dims.end());
  e.op("Reshape", {e.op("Gather", {data, rows}, {int_attr("axis", 0)}), e.ints(out)}, {}, output_of(node, 0));
}

}  // namespace stagecraft::graph::onnx_import
