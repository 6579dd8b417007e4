// The ONNX importer's translators of reductions: ReduceMean, ReduceMax, ReduceSum, ReduceMin and
// ReduceProd (over H and W of a rank-4 tensor, a global pool), the global pools,
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum and ReduceLogSumExp as a ReduceSum of what
// they sum, and the softmaxes (Softmax, LogSoftmax, Hardmax) by each opset's rule.
#include <algorithm>
#include <memory>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

std::optional<std::vector<int64_t>> Importer::axes(const onnx::NodeProto& node, int slot) const {
  if (attribute(node, "axes")) return attr_ints(node, "axes");
  if (has_input(node, slot)) return constant_ints(node, slot, "axes");
  return std::nullopt;
}

void Importer::reduce(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const ValueId x = input(node, 0);
  const Shape& s = shape(x);
  const auto ax = axes(node, 1);
  std::vector<int64_t> over = ax ? normalised_axes(*ax, s.rank()) : std::vector<int64_t>{};
  for (int64_t a : over) {
    if (a < 0 || a >= static_cast<int64_t>(s.rank())) {
      fail(node, cat("axes [", join(*ax, ", "), "] are not dimensions of ", s.to_string()));
    }
  }
  over.erase(std::unique(over.begin(), over.end()), over.end());
  if (over.empty()) {
    // No axes: every axis, or none with noop_with_empty_axes (opset 18).
    if (attr_int(node, "noop_with_empty_axes", 0) != 0) return define(node, 0, x);
    for (int64_t d = 0; d < static_cast<int64_t>(s.rank()); ++d) over.push_back(d);
  }
  const bool keepdims = attr_int(node, "keepdims", 1) != 0;
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < static_cast<int64_t>(s.rank()); ++d)
    if (!std::binary_search(over.begin(), over.end(), d)) kept.push_back(s[static_cast<size_t>(d)]);
  if (!keepdims && kept.empty()) fail(node, "a reduction to a scalar (rank 0, keepdims 0) is not supported");
  const bool global_pool = s.rank() == 4 && over == std::vector<int64_t>{2, 3} && takes_layouts(graph_.value(x).desc) &&
                           (t == "ReduceMean" || t == "ReduceMax" || t == "ReduceSum");
  if (!global_pool) {  // a reduction op
    ReduceAttrs a;
    a.axes = over;
    const OpKind kind = t == "ReduceMax"    ? OpKind::kReduceMax
                        : t == "ReduceSum"  ? OpKind::kReduceSum
                        : t == "ReduceMin"  ? OpKind::kReduceMin
                        : t == "ReduceProd" ? OpKind::kReduceProd
                                            : OpKind::kReduceMean;
    const ValueId y = add(node, kind, a, {x});
    if (keepdims) return define(node, 0, y);
    if (s.rank() != 4) return define(node, 0, reshaped(node, y, kept));
    const Shape& ys = shape(y);
    return reshape_to(node, PendingView{y, std::vector<int64_t>(ys.dims().begin(), ys.dims().end()), 0}, kept);
  }
  const bool max = t == "ReduceMax";
  ValueId y = add(node, max ? OpKind::kGlobalMaxPool : OpKind::kGlobalAvgPool, NoAttrs{}, {x});
  if (t == "ReduceSum") {  // the mean times the number of pixels
    ScaleAttrs a;
    a.factor = static_cast<double>(s[2] * s[3]);
    y = add(node, OpKind::kScale, a, {y});
  }
  if (attr_int(node, "keepdims", 1) == 0) {
    ReshapeAttrs r;
    r.dims = {s[1]};
    y = add(node, OpKind::kReshape, r, {y});
  }
  define(node, 0, y);
}

void Importer::global_pool(const onnx::NodeProto& node) {
  define(node, 0, add(node, node.op_type() == "GlobalMaxPool" ? OpKind::kGlobalMaxPool : OpKind::kGlobalAvgPool,
                      NoAttrs{}, {input(node, 0)}));
}

void Importer::reduce_via_sum(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  // What is summed (x², |x|, e^x or x itself) and what is taken of the sum (sqrt, log or nothing).
  const char* pre = t == "ReduceSumSquare" || t == "ReduceL2" ? "Mul" : t == "ReduceL1" ? "Abs"
                    : t == "ReduceLogSumExp"                  ? "Exp" : nullptr;
  const char* post = t == "ReduceL2" ? "Sqrt" : t == "ReduceLogSum" || t == "ReduceLogSumExp" ? "Log" : nullptr;
  const std::string base = node_name(node), x = node.input(0);
  const std::string squares = pre ? node.output(0) + "/summands" : x;
  const std::string sum = post ? node.output(0) + "/sum" : node.output(0);
  const auto make = [&](const char* type, std::vector<std::string> inputs, const std::string& output) {
    auto n = std::make_unique<onnx::NodeProto>();
    n->set_op_type(type);
    n->set_name(cat(base, "/", type));
    for (const auto& in : inputs) {
      n->add_input(in);
      ++readers_[in];
      reader_kinds_[in].insert(type);
    }
    n->add_output(output);
    produced_.insert(output);
    expanded_.push_back(std::move(n));
    return expanded_.back().get();
  };
  const onnx::NodeProto* square = nullptr;
  if (pre) {
    --readers_[x];  // read by the summands instead
    square = make(pre, std::string(pre) == "Mul" ? std::vector<std::string>{x, x} : std::vector<std::string>{x}, squares);
  }
  // ReduceSum takes its axes as an input from opset 13, ReduceL2 and ReduceSumSquare from 18.
  std::vector<std::string> sum_inputs = {squares};
  if (node.input_size() > 1 && !node.input(1).empty()) {
    sum_inputs.push_back(node.input(1));
  } else if (opset_ >= 13 && !attr_ints(node, "axes").empty()) {
    const std::vector<int64_t> ax = attr_ints(node, "axes");
    const std::string name = node.output(0) + "/axes";
    constants_[name] = ConstTensor::of_ints(ax, {static_cast<int64_t>(ax.size())});
    sum_inputs.push_back(name);
  }
  onnx::NodeProto* reduce = make("ReduceSum", sum_inputs, sum);
  for (const auto& a : node.attribute()) {
    if (a.name() != "axes" || opset_ < 13) *reduce->add_attribute() = a;
  }
  if (square) import_node(*square);
  import_node(*reduce);
  if (post) import_node(*make(post, {sum}, node.output(0)));
}

void Importer::softmax(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  const int64_t rank = static_cast<int64_t>(shape(x).rank());
  int64_t axis = attr_int(node, "axis", opset_ >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if ((rank != 2 && rank != 4) || axis != 1) {  // over another axis: of a row-major tensor
    on_row_major(node);
    return;
  }
  define(node, 0, softmax_of(node, x));
}

ValueId Importer::softmax_of(const onnx::NodeProto& node, ValueId x) {
  const Shape s = shape(x);
  const auto rank = static_cast<int64_t>(s.rank());
  int64_t axis = attr_int(node, "axis", opset_ >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) fail(node, cat("axis ", attr_int(node, "axis", 0), " is not an axis of ", s.to_string()));
  SoftmaxAttrs a;
  a.axis = axis;
  a.log = node.op_type() == "LogSoftmax";
  a.hard = node.op_type() == "Hardmax";
  const auto at = static_cast<size_t>(axis);
  if (opset_ >= 13 || product(s.dims(), at + 1, s.rank()) == 1) return add(node, OpKind::kSoftmax, a, {x});
  // Before opset 13 the input is seen as [d0 ... d(axis-1), d(axis) · ... · d(rank-1)] and normalised
  // over its second dimension: one softmax over all the trailing dimensions.
  a.axis = 1;
  const ValueId flat = reshaped(node, x, {product(s.dims(), 0, at), product(s.dims(), at, s.rank())});
  return reshaped(node, add(node, OpKind::kSoftmax, a, {flat}), s.dims());
}

}  // namespace stagecraft::graph::onnx_import
