// The ONNX importer's translators of element-wise ops: the activations (Relu, Sigmoid, HardSwish,
// Tanh, Sqrt, LeakyRelu, HardSigmoid, Clip), ONNX's math functions as unary ops, Neg and
// Reciprocal, the binary ops (with NumPy broadcasting, or a constant operand), Sum, Mean, Max and
// Min of several inputs, Where, Cast (a boolean tensor is float 0s and 1s), Identity and Dropout.
#include <cmath>
#include <map>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

namespace {

constexpr float kRelu6Max = 6.0f;

// A unary op's function with its ONNX attributes, or their defaults (ONNX's float32 values).
UnaryAttrs unary_attrs(const onnx::NodeProto& node, UnaryFn fn) {
  UnaryAttrs a;
  a.fn = fn;
  switch (fn) {
    case UnaryFn::kElu:
    case UnaryFn::kCelu:
    case UnaryFn::kThresholdedRelu:
    case UnaryFn::kSwish:
      a.alpha = attr_float(node, "alpha", 1.0f);
      break;
    case UnaryFn::kSelu:
      a.alpha = attr_float(node, "alpha", 1.67326319217681884765625f);
      a.beta = attr_float(node, "gamma", 1.05070102214813232421875f);
      break;
    case UnaryFn::kShrink:
      a.alpha = attr_float(node, "lambd", 0.5f);
      a.beta = attr_float(node, "bias", 0.0f);
      break;
    case UnaryFn::kIsInf:
      a.alpha = static_cast<double>(attr_int(node, "detect_negative", 1));
      a.beta = static_cast<double>(attr_int(node, "detect_positive", 1));
      break;
    default:
      break;
  }
  return a;
}

// The binary operation of an ONNX op type (Add, Sub, Mul, Div, Pow, Max, Min, Mod).
std::optional<BinaryOp> binary_op_of(const std::string& t) {
  static const std::map<std::string, BinaryOp, std::less<>> kOps = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv},
      {"Pow", BinaryOp::kPow}, {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin}, {"Mod", BinaryOp::kMod},
      {"Equal", BinaryOp::kEqual}, {"Less", BinaryOp::kLess}, {"LessOrEqual", BinaryOp::kLessEqual},
      {"Greater", BinaryOp::kGreater}, {"GreaterOrEqual", BinaryOp::kGreaterEqual}, {"And", BinaryOp::kAnd},
      {"Or", BinaryOp::kOr}, {"Xor", BinaryOp::kXor}};
  const auto it = kOps.find(t);
  if (it == kOps.end()) return std::nullopt;
  return it->second;
}

}  // namespace

void Importer::clip(const onnx::NodeProto& node) {
  std::optional<float> lo, hi;
  if (opset_ >= 11) {
    lo = constant_scalar(node, 1);
    hi = constant_scalar(node, 2);
  } else {
    if (attribute(node, "min")) lo = attr_float(node, "min", 0);
    if (attribute(node, "max")) hi = attr_float(node, "max", 0);
  }
  const bool zero_low = lo && *lo == 0.0f;
  if (zero_low && hi && *hi == kRelu6Max) {
    define(node, 0, add(node, OpKind::kRelu6, NoAttrs{}, {input(node, 0)}));
  } else if (zero_low && (!hi || std::isinf(*hi))) {
    define(node, 0, add(node, OpKind::kRelu, NoAttrs{}, {input(node, 0)}));
  } else {
    ClipAttrs a;
    if (lo) a.min = *lo;
    if (hi) a.max = *hi;
    if (a.min > a.max) fail(node, cat("min ", a.min, " is above max ", a.max));
    define(node, 0, add(node, OpKind::kClip, a, {input(node, 0)}));
  }
}

void Importer::plain_activation(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const OpKind kind = t == "Relu" ? OpKind::kRelu : t == "Sigmoid" ? OpKind::kSigmoid
                      : t == "Tanh" ? OpKind::kTanh : t == "Sqrt" ? OpKind::kSqrt : OpKind::kHardSwish;
  define(node, 0, add(node, kind, NoAttrs{}, {input(node, 0)}));
}

void Importer::leaky_relu(const onnx::NodeProto& node) {
  LeakyReluAttrs a;
  a.alpha = attr_float(node, "alpha", 0.01f);
  define(node, 0, add(node, OpKind::kLeakyRelu, a, {input(node, 0)}));
}

void Importer::hard_sigmoid(const onnx::NodeProto& node) {
  HardSigmoidAttrs a;
  a.alpha = attr_float(node, "alpha", 0.2f);
  a.beta = attr_float(node, "beta", 0.5f);
  // float32 attributes: PyTorch's 1/6 arrives as 0.16666667f.
  if (std::fabs(a.alpha - kHardSigmoidAlpha) < 1e-7) a.alpha = kHardSigmoidAlpha;
  define(node, 0, add(node, OpKind::kHardSigmoid, a, {input(node, 0)}));
}

void Importer::unary_function(const onnx::NodeProto& node) {
  const auto fn = unary_fn_of_onnx(node.op_type());
  if (!fn) fail(node, "not a unary function");
  define(node, 0, add(node, OpKind::kUnary, unary_attrs(node, *fn), {input(node, 0)}));
}

void Importer::unary(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  if (node.op_type() == "Neg") {
    ScaleAttrs a;
    a.factor = -1.0;
    define(node, 0, add(node, OpKind::kScale, a, {x}));
    return;
  }
  BinaryAttrs a;  // Reciprocal: 1 / x
  a.op = BinaryOp::kDiv;
  a.constant = {1};
  a.constant_first = true;
  define(node, 0, add_weighted(node, OpKind::kBinary, a, {x}, {1.0f}));
}

void Importer::elementwise(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  if (t == "Div" && (is_integer(node.input(0)) || is_integer(node.input(1))) && !integer_division_) {
    // ONNX's division of integers truncates: the float quotient (exact division, no reciprocal)
    // truncated, exact while the operands are below 2^24.
    integer_division_ = true;
    elementwise(node);
    integer_division_ = false;
    const ValueId q = values_.at(node.output(0));
    return define(node, 0, truncated(node, q));
  }
  const auto found = binary_op_of(t);
  if (!found) fail(node, "not a binary operation");
  const BinaryOp op = *found;
  if (op == BinaryOp::kMod && attr_int(node, "fmod", 0) != 1) fail(node, "fmod 0 is expanded before");  // expands()
  const bool commutative = is_commutative(op);
  const ConstTensor* c0 = constant(node, 0);
  const ConstTensor* c1 = constant(node, 1);
  // The operation of two tensors.
  const auto of_tensors = [&](ValueId a, ValueId b) {
    // NumPy aligns the trailing dimensions: the operand of lower rank gets leading 1s.
    if (shape(a).rank() < shape(b).rank()) {
      std::vector<int64_t> dims = shape(a).dims();
      dims.insert(dims.begin(), shape(b).rank() - dims.size(), 1);
      a = reshaped(node, a, dims);
    } else if (shape(b).rank() < shape(a).rank()) {
      std::vector<int64_t> dims = shape(b).dims();
      dims.insert(dims.begin(), shape(a).rank() - dims.size(), 1);
      b = reshaped(node, b, dims);
    }
    if (shape(a) == shape(b) && op == BinaryOp::kAdd) return define(node, 0, add(node, OpKind::kAdd, AddAttrs{}, {a, b}));
    // The broadcast operand second (the backends broadcast their second source).
    const auto out = broadcast(shape(a).dims(),
                               shape(b).dims());
    if (commutative && out && Shape(*out) != shape(a) && Shape(*out) == shape(b)) std::swap(a, b);
    // Both broadcast (FocalNet's gates [N, C, 1, 1] times a map [N, 1, H, W]): the first made whole.
    if (out && Shape(*out) != shape(a) && shape(a).rank() == 4) a = expanded(node, a, *out);
    BinaryAttrs attrs;
    attrs.op = op;
    define(node, 0, add(node, OpKind::kBinary, attrs, {a, b}));
  };
  if (!c0 && !c1) return of_tensors(input(node, 0), input(node, 1));
  const int slot = c0 ? 1 : 0;  // the tensor operand
  const ConstTensor& c = c0 ? *c0 : *c1;
  const ValueId x = input(node, slot);
  if (const auto out = broadcast(shape(x).dims(), c.dims); out && product(*out, 0, out->size()) > shape(x).numel()) {
    // The tensor broadcast to the constant's extent (a recurrence's zero state times a gate): the
    // constant as a tensor of the output's shape, then the operation of two tensors.
    const ValueId whole = materialized(node, c, x);
    return slot == 1 ? of_tensors(whole, x) : of_tensors(x, whole);
  }
  if (c.numel() == 1 && (op == BinaryOp::kMul || (op == BinaryOp::kDiv && slot == 0 && !integer_division_))) {
    ScaleAttrs a;
    a.factor = op == BinaryOp::kMul ? c.values[0] : 1.0 / c.values[0];
    define(node, 0, add(node, OpKind::kScale, a, {x}));
    return;
  }
  std::vector<int64_t> dims = c.dims;
  while (dims.size() > shape(x).rank() && dims.front() == 1) dims.erase(dims.begin());
  if (dims.size() > shape(x).rank()) {
    fail(node, cat("the constant [", join(c.dims, ", "), "] has a higher rank than the tensor ",
                   shape(x).to_string()));
  }
  dims.insert(dims.begin(), shape(x).rank() - dims.size(), 1);
  BinaryAttrs attrs;
  attrs.op = op;
  attrs.constant = dims;
  attrs.constant_first = slot == 1 && !commutative;
  define(node, 0, add_weighted(node, OpKind::kBinary, attrs, {x}, c.floats()));
}

ValueId Importer::materialized(const onnx::NodeProto& node, const ConstTensor& c, ValueId like) {
  // Where(like, c, c) is c wherever the condition is; its shape is the broadcast of the two.
  std::vector<int64_t> dims = c.dims;
  if (dims.empty()) dims = {1};
  WhereAttrs a;
  a.x_constant = a.y_constant = true;
  a.x_shape = a.y_shape = dims;
  std::vector<float> values = c.floats();
  OpWeights w;
  w.weight = values;
  w.bias = std::move(values);
  const ValueId v = add(node, OpKind::kWhere, a, {like});
  weights_of_last() = std::move(w);
  return is_row_major(like) ? mark(v) : v;
}

ValueId Importer::constant_tensor(const onnx::NodeProto& node, const ConstTensor& c, ValueId any) {
  // Where of one element of `any` (every axis narrowed to its first), of c's rank.
  ValueId like = any;
  const size_t rank = shape(like).rank();
  for (size_t d = 0; d < rank; ++d) like = narrowed(node, like, static_cast<int64_t>(d), 0, 1);
  return mark(materialized(node, c, reshaped(node, like, std::vector<int64_t>(std::max<size_t>(c.dims.size(), 1), 1))));
}

ValueId Importer::expanded(const onnx::NodeProto& node, ValueId x, const std::vector<int64_t>& to) {
  const Shape s = shape(x);
  if (s[0] != to[0]) fail(node, cat("broadcasting the batch (", s.to_string(), " to ", Shape(to).to_string(), ") is not supported"));
  if (s[1] != to[1]) {  // each output channel a copy of the one input channel: a 1x1 convolution of weight 1
    Conv2dAttrs a;
    a.in_channels = 1;
    a.out_channels = to[1];
    a.kernel = Hw{1, 1};
    x = add_weighted(node, OpKind::kConv2d, a, {x}, std::vector<float>(static_cast<size_t>(to[1]), 1.0f));
  }
  if (s[2] != to[2] || s[3] != to[3]) {  // every pixel a copy of the one input pixel (row, column)
    ResizeAttrs r;
    r.size = Hw{to[2], to[3]};
    r.scale_h = static_cast<double>(to[2]) / static_cast<double>(s[2]);
    r.scale_w = static_cast<double>(to[3]) / static_cast<double>(s[3]);
    x = add(node, OpKind::kResize, r, {x});
  }
  return x;
}

void Importer::sum(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const auto n = static_cast<size_t>(node.input_size());
  if (n == 0) fail(node, "no inputs");
  bool tensors = true;  // no constant among the inputs
  for (int i = 0; i < node.input_size(); ++i) tensors = tensors && !constant(node, i);
  std::vector<ValueId> ins;
  if (tensors) {
    for (int i = 0; i < node.input_size(); ++i) ins.push_back(input(node, i));
  }
  bool same = tensors;
  for (ValueId v : ins) same = same && shape(v) == shape(ins[0]);
  ValueId y = n == 1 ? input(node, 0) : ValueId{};
  if (n > 1 && same && t != "Max" && t != "Min") {
    y = add(node, OpKind::kAdd, AddAttrs{}, ins);
  } else if (n > 1) {
    // Any other count or shapes: a chain of broadcasting binary ops, left to right.
    const std::string name = node.name().empty() ? node.output(0) : node.name();
    const auto partial = [&](size_t i) { return cat(node.output(0), "/partial_", i); };
    for (size_t i = 1; i < n; ++i) {
      onnx::NodeProto step;
      step.set_op_type(t == "Mean" || t == "Sum" ? "Add" : t);
      step.set_name(cat(name, "/", i));
      step.add_input(i == 1 ? node.input(0) : partial(i - 1));
      step.add_input(node.input(static_cast<int>(i)));
      step.add_output(partial(i));
      elementwise(step);
      y = values_.at(step.output(0));
    }
  }
  if (t == "Mean" && n > 1) {
    ScaleAttrs a;
    a.factor = 1.0 / static_cast<double>(n);
    y = add(node, OpKind::kScale, a, {y});
  }
  define(node, 0, y);
}

void Importer::where(const onnx::NodeProto& node) {
  // Each operand an input of the op or a constant in its weights; the kernel broadcasts all three.
  WhereAttrs a;
  OpWeights w;
  std::vector<ValueId> ins;
  bool* flags[3] = {&a.condition_constant, &a.x_constant, &a.y_constant};
  std::vector<int64_t>* shapes[3] = {&a.condition_shape, &a.x_shape, &a.y_shape};
  std::vector<float>* values[3] = {&w.gamma, &w.weight, &w.bias};
  for (int i = 0; i < 3; ++i) {
    if (const ConstTensor* c = constant(node, i)) {
      *flags[i] = true;
      *shapes[i] = c->dims;
      *values[i] = c->floats();
    } else {
      ins.push_back(input(node, i));
    }
  }
  define(node, 0, add(node, OpKind::kWhere, a, ins));
  weights_of_last() = std::move(w);
}

bool Importer::is_boolean(const std::string& name) const {
  // Made by a comparison, a logical op or a cast to bool.
  static const std::set<std::string, std::less<>> kBoolean = {"Equal", "Less", "LessOrEqual", "Greater",
                                                             "GreaterOrEqual", "And", "Or", "Xor", "Not",
                                                             "IsNaN", "IsInf"};
  const auto it = producers_.find(name);
  if (it == producers_.end()) return false;
  const onnx::NodeProto& p = *it->second;
  return kBoolean.count(p.op_type()) > 0 ||
         (p.op_type() == "Cast" && attr_int(p, "to", 0) == onnx::TensorProto::BOOL);
}

void Importer::cast(const onnx::NodeProto& node) {
  // A boolean tensor is float 0s and 1s: to float or from a boolean it stays; to bool it is
  // x != 0 (not of not).
  const auto to = attr_int(node, "to", onnx::TensorProto::FLOAT);
  const ValueId x = input(node, 0);
  // Readers that take any non-zero value as true need no 0 / 1 first.
  bool truthy_readers = !graph_outputs_.count(node.output(0));
  for (const onnx::NodeProto* r : reader_nodes_[node.output(0)]) {
    const std::string& rt = r->op_type();
    truthy_readers = truthy_readers && (rt == "Not" || rt == "And" || rt == "Or" || rt == "Xor" ||
                                        (rt == "Where" && r->input(0) == node.output(0) && r->input(1) != node.output(0) &&
                                         r->input(2) != node.output(0)));
  }
  // Integer values (an integer tensor, or a cast of one to float: our export of top_k's indices).
  const auto integer_valued = [&](std::string name) {
    for (;;) {
      if (is_integer(name)) return true;
      const auto p = producers_.find(name);
      if (p == producers_.end() || p->second->op_type() != "Cast") return false;
      name = p->second->input(0);
    }
  };
  // A float64 tensor (Deformable DETR's sampling offsets) computes in float32, as every float here.
  if (to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE || is_boolean(node.input(0)) ||
      (to == onnx::TensorProto::BOOL && truthy_readers) || (is_integer(node.output(0)) && integer_valued(node.input(0)))) {
    define(node, 0, x);
  } else if (is_integer(node.output(0))) {  // float to an integer type: toward zero
    define(node, 0, truncated(node, x));
  } else if (to == onnx::TensorProto::BOOL) {
    UnaryAttrs n;
    n.fn = UnaryFn::kNot;
    define(node, 0, add(node, OpKind::kUnary, n, {add(node, OpKind::kUnary, n, {x})}));
  } else {
    fail(node, cat("casts of float tensors to element type ", to, " are not supported (float32, float64 as float32, "
                   "integers and bool are)"));
  }
}

void Importer::identity(const onnx::NodeProto& node) { define(node, 0, input(node, 0)); }

}  // namespace stagecraft::graph::onnx_import
