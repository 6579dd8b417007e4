// ONNX export of the element-wise ops (Add or Sum, the binary ops with their bool casts, Where,
// the unary functions, Clip, HardSigmoid) and of the ops over an axis or of row-major tensors
// (Gemm or MatMul for a linear layer, the softmaxes, LayerNormalization, the reductions, Slice
// for a narrow, Concat with a constant, GridSample).
#include <iterator>

#include "common/strings.h"
#include "frontend/onnx/onnx_exporter.h"

namespace stagecraft::graph::onnx_export {

void Exporter::export_add(const Op& op, const Names& in, const std::string& out) {
  const Activation act = op.attrs_as<AddAttrs>().activation;
  node(in.size() == 2 ? "Add" : "Sum", op.name, in, {pre_activation(act, out)});
  emit_activation(op, act, out);
}

void Exporter::export_binary(const Op& op, Names in, const std::string& out) {
  const auto& a = op.attrs_as<BinaryAttrs>();
  // In BinaryOp's order (the list's length is checked against it).
  static constexpr const char* kTypes[] = {"Add",     "Sub",           "Mul", "Div", "Pow", "Max",
                                           "Min",     "Mod",           "Equal", "Less", "LessOrEqual",
                                           "Greater", "GreaterOrEqual", "And",  "Or",  "Xor"};
#define STAGECRAFT_X(value, name) +1
  static_assert(std::size(kTypes) == 0 STAGECRAFT_BINARY_OPS(STAGECRAFT_X));
#undef STAGECRAFT_X
  if (!a.constant.empty()) {
    const std::string c = floats(op.name + "/constant", weights_of(op).weight, a.constant);
    if (a.constant_first) in.insert(in.begin(), c);
    else in.push_back(c);
  }
  if (is_boolean(a.op)) {
    // ONNX's comparisons give, and its logical ops take, bool tensors: casts around them.
    if (a.op >= BinaryOp::kAnd) {
      for (size_t i = 0; i < in.size(); ++i) in[i] = cast(in[i], op.name + cat("/bool", i), onnx::TensorProto::BOOL);
    }
    node(kTypes[static_cast<int>(a.op)], op.name, in, {op.name + "/result"});
    cast(op.name + "/result", pre_activation(a.activation, out), onnx::TensorProto::FLOAT);
    emit_activation(op, a.activation, out);
    return;
  }
  auto* n = node(kTypes[static_cast<int>(a.op)], op.name, in, {pre_activation(a.activation, out)});
  if (a.op == BinaryOp::kMod) integer(n, "fmod", 1);  // C's fmod: the sign of the first operand
  emit_activation(op, a.activation, out);
}

void Exporter::export_where(const Op& op, const Names& in, const std::string& out) {
  // Where(bool condition, x, y), constants as initializers.
  const auto& a = op.attrs_as<WhereAttrs>();
  Names operands;
  size_t next = 0;
  const bool constant[3] = {a.condition_constant, a.x_constant, a.y_constant};
  const std::vector<int64_t>* shapes[3] = {&a.condition_shape, &a.x_shape, &a.y_shape};
  const char* names[3] = {"/condition", "/x", "/y"};
  for (int i = 0; i < 3; ++i) {
    if (!constant[i]) {
      operands.push_back(in.at(next++));
      continue;
    }
    const auto& w = weights_of(op);
    operands.push_back(floats(op.name + names[i], i == 0 ? w.gamma : i == 1 ? w.weight : w.bias, *shapes[i]));
  }
  operands[0] = cast(operands[0], op.name + "/bool", onnx::TensorProto::BOOL);
  node("Where", op.name, operands, {out});
}

void Exporter::export_unary(const Op& op, const Names& in, const std::string& out) {
  // The ONNX op of the function, with its parameters by their ONNX names.
  const auto& a = op.attrs_as<UnaryAttrs>();
  // Opset 17 has neither Mish (18) nor Swish (24): x · tanh(softplus(x)), x · sigmoid(alpha x).
  if (a.fn == UnaryFn::kMish) {
    node("Softplus", op.name + "/softplus", in, {op.name + "/softplus"});
    node("Tanh", op.name + "/tanh", {op.name + "/softplus"},
         {op.name + "/tanh"});
    node("Mul", op.name, {in[0], op.name + "/tanh"}, {out});
    return;
  }
  if (a.fn == UnaryFn::kSwish) {
    node("Mul", op.name + "/scaled", {in[0], scalar(op.name + "/alpha", static_cast<float>(a.alpha))},
         {op.name + "/scaled"});
    node("Sigmoid", op.name + "/sigmoid", {op.name + "/scaled"}, {op.name + "/sigmoid"});
    node("Mul", op.name, {in[0], op.name + "/sigmoid"}, {out});
    return;
  }
  if (a.fn == UnaryFn::kNot || a.fn == UnaryFn::kIsNaN || a.fn == UnaryFn::kIsInf) {  // bool in ONNX
    const std::string x = a.fn == UnaryFn::kNot ? cast(in[0], op.name + "/bool", onnx::TensorProto::BOOL) : in[0];
    auto* n = node(std::string(onnx_op_type(a.fn)), op.name, {x}, {op.name + "/result"});
    if (a.fn == UnaryFn::kIsInf) {
      integer(n, "detect_negative", a.alpha != 0 ? 1 : 0);
      integer(n, "detect_positive", a.beta != 0 ? 1 : 0);
    }
    cast(op.name + "/result", out, onnx::TensorProto::FLOAT);
    return;
  }
  auto* n = node(std::string(onnx_op_type(a.fn)), op.name, in, {out});
  const auto alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
  switch (a.fn) {
    case UnaryFn::kElu:
    case UnaryFn::kCelu:
    case UnaryFn::kThresholdedRelu:
    case UnaryFn::kSwish:
      real(n, "alpha", alpha);
      break;
    case UnaryFn::kSelu:
      real(n, "alpha", alpha);
      real(n, "gamma", beta);
      break;
    case UnaryFn::kShrink:
      real(n, "lambd", alpha);
      real(n, "bias", beta);
      break;
    default:
      break;
  }
}

void Exporter::export_clip(const Op& op, const Names& in, const std::string& out) {
  const auto& a = op.attrs_as<ClipAttrs>();
  node("Clip", op.name, {in[0], scalar(op.name + "/min", static_cast<float>(a.min)),
                         scalar(op.name + "/max", static_cast<float>(a.max))}, {out});
}

void Exporter::export_hard_sigmoid(const Op& op, const Names& in, const std::string& out) {
  const auto& a = op.attrs_as<HardSigmoidAttrs>();
  auto* n = node("HardSigmoid", op.name, in, {out});
  real(n, "alpha", static_cast<float>(a.alpha));
  real(n, "beta", static_cast<float>(a.beta));
}

void Exporter::export_linear(const Op& op, Names in, const std::string& out) {
  const auto& a = op.attrs_as<LinearAttrs>();
  const auto& w = weights_of(op);
  if (g_.value(op.inputs[0]).desc.shape.rank() > 2) {  // MatMul by Wᵀ, then the bias
    std::vector<float> wt(w.weight.size());
    for (int64_t o = 0; o < a.out_features; ++o)
      for (int64_t i = 0; i < a.in_features; ++i)
        wt[static_cast<size_t>(i * a.out_features + o)] = w.weight[static_cast<size_t>(o * a.in_features + i)];
    in.push_back(floats(op.name + "/Wt", wt, {a.in_features, a.out_features}));
    const std::string y = pre_activation(a.activation, out);
    node("MatMul", op.name, in, {a.bias ? op.name + "/product" : y});
    if (a.bias) node("Add", op.name + "/bias", {op.name + "/product", floats(op.name + "/B", w.bias, {a.out_features})}, {y});
    emit_activation(op, a.activation, out);
    return;
  }
  in.push_back(floats(op.name + "/W", w.weight, {a.out_features, a.in_features}));
  if (a.bias) in.push_back(floats(op.name + "/B", w.bias, {a.out_features}));
  integer(node("Gemm", op.name, in, {pre_activation(a.activation, out)}), "transB", 1);
  emit_activation(op, a.activation, out);
}

void Exporter::export_softmax(const Op& op, const Names& in, const std::string& out) {
  const auto& a = op.attrs_as<SoftmaxAttrs>();
  integer(node(a.hard ? "Hardmax" : a.log ? "LogSoftmax" : "Softmax", op.name, in, {out}), "axis", a.axis);
}

void Exporter::export_layer_norm(const Op& op, const Names& in, const std::string& out) {
  // Over the last axis: channels-last around it for rank 4.
  const auto& w = weights_of(op);
  const auto c = static_cast<int64_t>(w.gamma.size());
  const bool image = takes_layouts(g_.value(op.inputs[0]).desc);
  const std::string x = image ? op.name + "/channels_last" : in[0];
  const std::string y = image ? op.name + "/normalised" : out;
  if (image) ints(node("Transpose", op.name + "/to_nhwc", in, {x}), "perm", {0, 2, 3, 1});
  auto* n = node("LayerNormalization", op.name,
                 {x, floats(op.name + "/scale", w.gamma, {c}), floats(op.name + "/bias", w.beta, {c})}, {y});
  integer(n, "axis", -1);
  real(n, "epsilon", static_cast<float>(op.attrs_as<LayerNormAttrs>().eps));
  if (image) ints(node("Transpose", op.name + "/to_nchw", {y}, {out}), "perm", {0, 3, 1, 2});
}

void Exporter::export_reduce(const Op& op, Names in, const std::string& out) {
  if (op.kind == OpKind::kReduceSum) {  // axes as an input since opset 13
    in.push_back(int64s(op.name + "/axes", op.attrs_as<ReduceAttrs>().axes));
    node("ReduceSum", op.name, in, {out});
    return;
  }
  // The others' axes are an attribute until opset 18.
  const char* type = op.kind == OpKind::kReduceMean  ? "ReduceMean"
                     : op.kind == OpKind::kReduceMax ? "ReduceMax"
                     : op.kind == OpKind::kReduceMin ? "ReduceMin"
                                                     : "ReduceProd";
  ints(node(type, op.name, in, {out}), "axes", op.attrs_as<ReduceAttrs>().axes);
}

void Exporter::export_narrow(const Op& op, Names in, const std::string& out) {
  const auto& a = op.attrs_as<NarrowAttrs>();
  in.push_back(int64s(op.name + "/starts", {a.begin}));
  in.push_back(int64s(op.name + "/ends", {a.end}));
  in.push_back(int64s(op.name + "/axes", {a.axis}));
  node("Slice", op.name, in, {out});
}

void Exporter::export_top_k(const Op& op, Names in) {
  const auto& a = op.attrs_as<TopKAttrs>();
  if (!a.ordered_nan) {  // ArgMax / ArgMin (their NaN rule), and the values they point at
    const std::string indices = op.name + "/indices";
    onnx::NodeProto* n = node(a.largest ? "ArgMax" : "ArgMin", op.name, {in[0]}, {indices});
    integer(n, "axis", a.axis);
    integer(node("GatherElements", op.name + "/values", {in[0], indices}, {g_.value(op.outputs[0]).name}), "axis",
            a.axis);
    integer(node("Cast", op.name + "/to_float", {indices}, {g_.value(op.outputs[1]).name}), "to",
            onnx::TensorProto::FLOAT);
    return;
  }
  in.push_back(int64s(op.name + "/k", {a.k}));
  const std::string indices = op.name + "/indices";
  onnx::NodeProto* n = node("TopK", op.name, in, {g_.value(op.outputs[0]).name, indices});
  integer(n, "axis", a.axis);
  integer(n, "largest", a.largest ? 1 : 0);
  integer(node("Cast", op.name + "/to_float", {indices}, {g_.value(op.outputs[1]).name}), "to", onnx::TensorProto::FLOAT);
}

void Exporter::export_gather_elements(const Op& op, Names in, const std::string& out) {
  const std::string indices = op.name + "/indices";
  integer(node("Cast", op.name + "/to_int64", {in[1]}, {indices}), "to", onnx::TensorProto::INT64);
  in[1] = indices;
  integer(node("GatherElements", op.name, in, {out}), "axis", op.attrs_as<GatherElementsAttrs>().axis);
}

void Exporter::export_concat_constant(const Op& op, Names in, const std::string& out) {
  // The constant repeated for every sample.
  const auto& a = op.attrs_as<ConcatConstantAttrs>();
  std::vector<int64_t> dims = g_.value(op.inputs[0]).desc.shape.dims();
  dims[static_cast<size_t>(a.axis)] = a.count;
  const std::vector<float>& one = weights_of(op).weight;
  std::vector<float> all;
  for (int64_t n = 0; n < dims[0]; ++n) all.insert(all.end(), one.begin(), one.end());
  const std::string c = floats(op.name + "/constant", all, dims);
  in.insert(a.before ? in.begin() : in.end(), c);
  integer(node("Concat", op.name, in, {out}), "axis", a.axis);
}

void Exporter::export_grid_sample(const Op& op, const Names& in, const std::string& out) {
  // Opset 16's names of the modes.
  const auto& a = op.attrs_as<GridSampleAttrs>();
  onnx::NodeProto* n = node("GridSample", op.name, in, {out});
  const char* modes[] = {"nearest", "bilinear", "bicubic"};
  const char* paddings[] = {"zeros", "border", "reflection"};
  text(n, "mode", modes[a.mode]);
  text(n, "padding_mode", paddings[a.padding]);
  integer(n, "align_corners", a.align_corners ? 1 : 0);
}

}  // namespace stagecraft::graph::onnx_export
