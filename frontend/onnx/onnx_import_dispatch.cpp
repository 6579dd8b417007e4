// The ONNX importer's dispatch: which translation takes each node. Constants are kept, nodes
// rewritten as others (a Resize to the same size, CastLike) imported as those, nodes of constant
// inputs folded, expansions and the reductions via a sum imported as their nodes, nodes reading
// row-major values, channels-last or group views given to those translations, and every other
// node to the translator of its op type.
#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

void Importer::import_node(const onnx::NodeProto& node) {
  // The preview domain's FlexAttention is an expansion of ONNX ops (onnx_import_flex_attention.cpp).
  const bool preview = node.domain() == "ai.onnx.preview" && node.op_type() == "FlexAttention";
  if (!node.domain().empty() && node.domain() != "ai.onnx" && !preview) {
    fail(node, cat("domain '", node.domain(), "' is not supported"));
  }
  const std::string& t = node.op_type();
  if (t == "Constant") return constant_node(node);
  if (t == "Resize" && resizes_to_itself(node)) {
    // Every mode gives its input back when the size does not change (the position-embedding and
    // relative-bias interpolations of DINOv2, BEiT and DPT at their training size): an Identity,
    // which folds where the input is a constant.
    return import_node(as_identity(node));
  }
  if (t == "CastLike") return import_node(as_cast(node));
  // OptionalGetElement of a tensor (opset 18 on) is the tensor; an optional value is refused where
  // it is made (Optional).
  if (t == "OptionalGetElement") return import_node(as_identity(node));
  // After a node whose output shape depends on the data, what reads it is evaluated on the host.
  if (reads_tail(node)) return to_tail(node);
  // Anything computable now is a constant: shape arithmetic, casts and identities of constants.
  if (fold_constant(node)) return;
  if (t == "NonZero" || t == "NonMaxSuppression") return to_tail(node);
  if (t == "Scan") return scan(node);
  if (expands(node)) return expand(node);
  if (t == "Resize" && constant(node, 0)) return resize(node);  // folded
  if (reads_only_constants(node)) {
    // A node of constants no fold computes (a Resize of a constant mask): its input 0 made a
    // tensor of the graph (from one element of a graph input), the node run at inference.
    const std::string name = cat(node.input(0), "/as_tensor");
    if (!values_.count(name)) {
      values_[name] = constant_tensor(node, *constant(node, 0), row_major_named(node, *graph_inputs_.begin()));
    }
    auto rewritten = std::make_unique<onnx::NodeProto>(node);
    rewritten->set_input(0, name);
    --readers_[node.input(0)];
    ++readers_[name];
    const onnx::NodeProto& n = *rewritten;
    expanded_.push_back(std::move(rewritten));
    return import_node(n);
  }
  if (t == "ReduceSumSquare" || t == "ReduceL2" || t == "ReduceL1" || t == "ReduceLogSum" || t == "ReduceLogSumExp") {
    return reduce_via_sum(node);
  }
  if ((reads_row_major(node) || needs_row_major(node)) && on_row_major(node)) return;
  if (reads_channels_last(node)) return on_channels_last(node);
  if (reads_group_view(node)) return on_group_view(node);
  if (reads_loose_view(node)) {
    // A view of another rank than the convolutions' 4 and the rows' 2, read by an op that does
    // not carry views (a reduction of [N, G, C / G · H · W]): its row-major tensor.
    for (int i = 0; i < node.input_size(); ++i) {
      if (auto v = pending_views_.find(node.input(i)); v != pending_views_.end()) values_[node.input(i)] = row_major(node, i);
    }
    if (on_row_major(node)) return;
  }
  translate(node);
}

bool Importer::reads_only_constants(const onnx::NodeProto& node) const {
  if (graph_inputs_.empty() || !has_input(node, 0) || !constant(node, 0)) return false;
  for (int i = 1; i < node.input_size(); ++i) {
    if (has_input(node, i) && !constant(node, i)) return false;
  }
  return true;
}

onnx::NodeProto Importer::as_identity(const onnx::NodeProto& node) {
  onnx::NodeProto same = node;
  same.set_op_type("Identity");
  same.clear_attribute();
  while (same.input_size() > 1) {
    if (!same.input(same.input_size() - 1).empty()) --readers_[same.input(same.input_size() - 1)];
    same.mutable_input()->RemoveLast();
  }
  return same;
}

onnx::NodeProto Importer::as_cast(const onnx::NodeProto& node) {
  // A Cast to the element type of the second input (a constant's own type; every tensor the
  // model computes is float32).
  if (node.input_size() != 2) fail(node, "takes two inputs");
  onnx::NodeProto rewritten = node;
  rewritten.set_op_type("Cast");
  rewritten.mutable_input()->RemoveLast();
  const ConstTensor* like = constant(node, 1);
  auto* to = rewritten.add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(like ? like->onnx_type : onnx::TensorProto::FLOAT);
  --readers_[node.input(1)];
  return rewritten;
}

bool Importer::fold_constant(const onnx::NodeProto& node) {
  try {
    if (auto folded = fold(node, fold_inputs(node), opset_)) {
      for (int i = 0; i < node.output_size() && i < static_cast<int>(folded->size()); ++i) {
        ConstTensor& result = (*folded)[static_cast<size_t>(i)];
        // A fold computes in `values`; a float copy of its input it kept is stale.
        if (!result.values.empty()) result.f32.clear();
        constants_[node.output(i)] = std::move(result);
      }
      return true;
    }
  } catch (const std::runtime_error& e) {
    fail(node, e.what());
  }
  return false;
}

void Importer::translate(const onnx::NodeProto& node) {
  // The op types translated by one member function (several types may share one).
  static const std::map<std::string, Translator, std::less<>> kTranslators = {
      {"Conv", &Importer::conv},
      {"ConvTranspose", &Importer::conv_transpose},
      {"BatchNormalization", &Importer::batch_norm},
      {"Clip", &Importer::clip},
      {"MaxPool", &Importer::pool}, {"AveragePool", &Importer::pool},
      {"GlobalAveragePool", &Importer::global_pool}, {"GlobalMaxPool", &Importer::global_pool},
      {"ReduceMean", &Importer::reduce}, {"ReduceMax", &Importer::reduce}, {"ReduceSum", &Importer::reduce},
      {"ReduceMin", &Importer::reduce}, {"ReduceProd", &Importer::reduce},
      {"Add", &Importer::elementwise}, {"Sub", &Importer::elementwise}, {"Mul", &Importer::elementwise},
      {"Div", &Importer::elementwise}, {"Pow", &Importer::elementwise}, {"Mod", &Importer::elementwise},
      {"Equal", &Importer::elementwise}, {"Less", &Importer::elementwise},
      {"LessOrEqual", &Importer::elementwise}, {"Greater", &Importer::elementwise},
      {"GreaterOrEqual", &Importer::elementwise}, {"And", &Importer::elementwise},
      {"Or", &Importer::elementwise}, {"Xor", &Importer::elementwise},
      {"Where", &Importer::where},
      {"GridSample", &Importer::grid_sample},
      {"Sum", &Importer::sum}, {"Mean", &Importer::sum}, {"Max", &Importer::sum}, {"Min", &Importer::sum},
      {"Concat", &Importer::concat},
      {"Reshape", &Importer::reshape},
      {"Flatten", &Importer::flatten},
      {"Transpose", &Importer::transpose},
      {"Squeeze", &Importer::squeeze}, {"Unsqueeze", &Importer::squeeze},
      {"Gather", &Importer::gather},
      {"Relu", &Importer::plain_activation}, {"Sigmoid", &Importer::plain_activation},
      {"HardSwish", &Importer::plain_activation}, {"Tanh", &Importer::plain_activation},
      {"Sqrt", &Importer::plain_activation},
      {"LeakyRelu", &Importer::leaky_relu},
      {"HardSigmoid", &Importer::hard_sigmoid},
      {"Reciprocal", &Importer::unary}, {"Neg", &Importer::unary},
      {"Dropout", &Importer::identity}, {"Identity", &Importer::identity},
      {"Cast", &Importer::cast},
      {"Gemm", &Importer::gemm}, {"MatMul", &Importer::gemm},
      {"Softmax", &Importer::softmax}, {"LogSoftmax", &Importer::softmax}, {"Hardmax", &Importer::softmax},
      {"RNN", &Importer::recurrent}, {"GRU", &Importer::recurrent}, {"LSTM", &Importer::recurrent},
      {"Pad", &Importer::pad},
      {"Split", &Importer::split},
      {"Slice", &Importer::slice},
      {"Resize", &Importer::resize},
      {"LRN", &Importer::lrn},
      {"SpaceToDepth", &Importer::space_to_depth},
      {"DepthToSpace", &Importer::depth_to_space},
      {"Gelu", &Importer::gelu},
      {"LayerNormalization", &Importer::layer_norm},
      {"InstanceNormalization", &Importer::instance_norm},
      {"Einsum", &Importer::einsum},
      {"TopK", &Importer::top_k},
      {"ArgMax", &Importer::arg_extreme}, {"ArgMin", &Importer::arg_extreme},
      {"GatherElements", &Importer::gather_elements},
  };
  if (const auto translator = kTranslators.find(node.op_type()); translator != kTranslators.end()) {
    return (this->*translator->second)(node);
  }
  // ONNX's element-wise math functions (Abs, Exp, Erf, Elu, ...): one unary op each.
  if (unary_fn_of_onnx(node.op_type())) return unary_function(node);
  fail(node, "this op is not supported");
}

bool Importer::resizes_to_itself(const onnx::NodeProto& node) const {
  if (attr_string(node, "coordinate_transformation_mode") == "tf_crop_and_resize") return false;
  std::vector<int64_t> dims;
  if (const ConstTensor* c = constant(node, 0)) {
    dims = c->dims;
  } else if (auto it = values_.find(node.input(0)); it != values_.end()) {
    dims = shape(it->second).dims();
  } else {
    return false;
  }
  std::vector<int64_t> axes = attr_ints(node, "axes");
  for (int64_t& a : axes) a = a < 0 ? a + static_cast<int64_t>(dims.size()) : a;
  if (axes.empty()) {
    for (size_t i = 0; i < dims.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  const ConstTensor* sizes = constant(node, 3);
  const ConstTensor* scales = constant(node, 2);
  if (sizes && sizes->numel() > 0) {
    const std::vector<int64_t> s = sizes->ints();
    if (s.size() != axes.size()) return false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(dims.size()) || s[i] != dims[static_cast<size_t>(axes[i])]) return false;
    }
    return true;
  }
  if (scales && scales->numel() > 0) {
    const std::vector<float> f = scales->floats();
    return f.size() == axes.size() && std::all_of(f.begin(), f.end(), [](float v) { return v == 1.0f; });
  }
  return false;
}

}  // namespace stagecraft::graph::onnx_import
