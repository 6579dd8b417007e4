#include "graph/op.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <utility>

#include "common/enum_table.h"

namespace stagecraft::graph {

namespace {

constexpr Named<Activation> kActivations[] = {
#define STAGECRAFT_X(value, name) {Activation::value, name},
    STAGECRAFT_ACTIVATIONS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

constexpr Named<BinaryOp> kBinaryOps[] = {
#define STAGECRAFT_X(value, name) {BinaryOp::value, name},
    STAGECRAFT_BINARY_OPS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

constexpr Named<UnaryFn> kUnaryFns[] = {
#define STAGECRAFT_X(value, name, onnx) {UnaryFn::value, name},
    STAGECRAFT_UNARY_FNS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

constexpr Named<UnaryFn> kUnaryOnnxTypes[] = {
#define STAGECRAFT_X(value, name, onnx) {UnaryFn::value, onnx},
    STAGECRAFT_UNARY_FNS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

constexpr Named<OpKind> kOpKinds[] = {
#define STAGECRAFT_X(value, name, attrs) {OpKind::value, name},
    STAGECRAFT_OP_KINDS(STAGECRAFT_X)
#undef STAGECRAFT_X
};

}  // namespace

std::string_view to_string(Activation activation) {
  return kActivations[static_cast<int>(activation)].name;
}

std::optional<Activation> parse_activation(std::string_view name) {
  return value_named(kActivations, name);
}

std::vector<std::string> activation_names() { return names_of(kActivations); }

std::string_view to_string(BinaryOp op) { return kBinaryOps[static_cast<int>(op)].name; }

std::optional<BinaryOp> parse_binary_op(std::string_view name) {
  return value_named(kBinaryOps, name);
}

std::vector<std::string> binary_op_names() { return names_of(kBinaryOps); }

float apply_binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kPow: return std::pow(a, b);
    case BinaryOp::kMax: return std::isnan(a) || a > b ? a : b;
    case BinaryOp::kMin: return std::isnan(a) || a < b ? a : b;
    case BinaryOp::kMod: return std::fmod(a, b);
    case BinaryOp::kEqual: return a == b ? 1.0f : 0.0f;
    case BinaryOp::kLess: return a < b ? 1.0f : 0.0f;
    case BinaryOp::kLessEqual: return a <= b ? 1.0f : 0.0f;
    case BinaryOp::kGreater: return a > b ? 1.0f : 0.0f;
    case BinaryOp::kGreaterEqual: return a >= b ? 1.0f : 0.0f;
    case BinaryOp::kAnd: return a != 0 && b != 0 ? 1.0f : 0.0f;
    case BinaryOp::kOr: return a != 0 || b != 0 ? 1.0f : 0.0f;
    case BinaryOp::kXor: return (a != 0) != (b != 0) ? 1.0f : 0.0f;
  }
  return a;
}

std::string_view to_string(UnaryFn fn) { return kUnaryFns[static_cast<int>(fn)].name; }

std::optional<UnaryFn> parse_unary_fn(std::string_view name) { return value_named(kUnaryFns, name); }

std::vector<std::string> unary_fn_names() { return names_of(kUnaryFns); }

std::string_view onnx_op_type(UnaryFn fn) { return kUnaryOnnxTypes[static_cast<int>(fn)].name; }

std::optional<UnaryFn> unary_fn_of_onnx(std::string_view type) {
  return value_named(kUnaryOnnxTypes, type);
}

float apply_unary(const UnaryAttrs& a, float value) {
  const double x = value, alpha = a.alpha, beta = a.beta;
  // log(1 + e^x) without overflow: x + log(1 + e^-x) for large x.
  const auto softplus = [](double v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); };
  double y = x;
  switch (a.fn) {
    case UnaryFn::kAbs: y = std::fabs(x); break;
    case UnaryFn::kExp: y = std::exp(x); break;
    case UnaryFn::kLog: y = std::log(x); break;
    case UnaryFn::kCeil: y = std::ceil(x); break;
    case UnaryFn::kFloor: y = std::floor(x); break;
    case UnaryFn::kRound: y = std::nearbyint(x); break;  // halves to even (the default rounding)
    case UnaryFn::kSign: y = x > 0 ? 1.0 : x < 0 ? -1.0 : x; break;  // 0 and NaN stay
    case UnaryFn::kSin: y = std::sin(x); break;
    case UnaryFn::kCos: y = std::cos(x); break;
    case UnaryFn::kTan: y = std::tan(x); break;
    case UnaryFn::kAsin: y = std::asin(x); break;
    case UnaryFn::kAcos: y = std::acos(x); break;
    case UnaryFn::kAtan: y = std::atan(x); break;
    case UnaryFn::kSinh: y = std::sinh(x); break;
    case UnaryFn::kCosh: y = std::cosh(x); break;
    case UnaryFn::kAsinh: y = std::asinh(x); break;
    case UnaryFn::kAcosh: y = std::acosh(x); break;
    case UnaryFn::kAtanh: y = std::atanh(x); break;
    case UnaryFn::kErf: y = std::erf(x); break;
    case UnaryFn::kSoftplus: y = softplus(x); break;
    case UnaryFn::kSoftsign: y = x / (1.0 + std::fabs(x)); break;
    case UnaryFn::kMish: y = x * std::tanh(softplus(x)); break;
    case UnaryFn::kElu: y = x >= 0 ? x : alpha * std::expm1(x); break;
    case UnaryFn::kSelu: y = x > 0 ? beta * x : beta * alpha * std::expm1(x); break;
    case UnaryFn::kCelu: y = std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha)); break;
    case UnaryFn::kThresholdedRelu: y = x > alpha ? x : 0.0; break;
    case UnaryFn::kShrink: y = x < -alpha ? x + beta : x > alpha ? x - beta : 0.0; break;
    case UnaryFn::kSwish: y = x / (1.0 + std::exp(-alpha * x)); break;
    case UnaryFn::kNot: y = x == 0 ? 1.0 : 0.0; break;
    case UnaryFn::kIsNaN: y = std::isnan(x) ? 1.0 : 0.0; break;
    case UnaryFn::kIsInf: y = std::isinf(x) && ((x < 0 && alpha != 0) || (x > 0 && beta != 0)) ? 1.0 : 0.0; break;
  }
  return static_cast<float>(y);
}

std::vector<std::vector<int64_t>> where_operand_shapes(const WhereAttrs& a,
                                                       const std::vector<std::vector<int64_t>>& inputs) {
  std::vector<std::vector<int64_t>> shapes;
  size_t next = 0;
  for (const auto& [constant, shape] : {std::pair{a.condition_constant, &a.condition_shape}, {a.x_constant, &a.x_shape},
                                        {a.y_constant, &a.y_shape}}) {
    if (constant) shapes.push_back(*shape);
    else shapes.push_back(next < inputs.size() ? inputs[next++] : std::vector<int64_t>{});
  }
  return shapes;
}

std::vector<int64_t> constant_shape(const BinaryAttrs& attrs, size_t rank) {
  std::vector<int64_t> dims = attrs.constant;
  if (dims.size() < rank) dims.insert(dims.begin(), rank - dims.size(), 1);
  return dims;
}

std::string_view to_string(OpKind kind) { return kOpKinds[static_cast<int>(kind)].name; }

std::optional<OpKind> parse_op_kind(std::string_view name) { return value_named(kOpKinds, name); }

std::vector<std::string> op_kind_names() { return names_of(kOpKinds); }

std::vector<OpKind> all_op_kinds() {
  std::vector<OpKind> kinds;
  for (const auto& info : kOpKinds) kinds.push_back(info.value);
  return kinds;
}

OpAttrs default_attrs(OpKind kind) {
  switch (kind) {
#define STAGECRAFT_X(value, name, attrs) \
  case OpKind::value:                    \
    return attrs{};
    STAGECRAFT_OP_KINDS(STAGECRAFT_X)
#undef STAGECRAFT_X
  }
  assert(false && "unhandled op kind");
  return NoAttrs{};
}

bool attrs_match(OpKind kind, const OpAttrs& attrs) {
  switch (kind) {
#define STAGECRAFT_X(value, name, attrs_type) \
  case OpKind::value:                         \
    return std::holds_alternative<attrs_type>(attrs);
    STAGECRAFT_OP_KINDS(STAGECRAFT_X)
#undef STAGECRAFT_X
  }
  return false;
}

Activation activation_of_kind(OpKind kind, const OpAttrs& attrs) {
  // Element-wise op kinds that are a fused activation as they are.
  static constexpr std::pair<OpKind, Activation> kSame[] = {
      {OpKind::kRelu, Activation::kRelu},         {OpKind::kRelu6, Activation::kRelu6},
      {OpKind::kSigmoid, Activation::kSigmoid},   {OpKind::kHardSwish, Activation::kHardSwish},
      {OpKind::kSilu, Activation::kSilu},         {OpKind::kGelu, Activation::kGelu},
      {OpKind::kGeluTanh, Activation::kGeluTanh}, {OpKind::kTanh, Activation::kTanh},
      {OpKind::kSqrt, Activation::kSqrt},
  };
  for (const auto& [k, act] : kSame)
    if (k == kind) return act;
  if (kind == OpKind::kHardSigmoid) {
    const auto* a = std::get_if<HardSigmoidAttrs>(&attrs);
    const bool pytorch = a == nullptr || (a->alpha == kHardSigmoidAlpha && a->beta == kHardSigmoidBeta);
    return pytorch ? Activation::kHardSigmoid : Activation::kNone;
  }
  return Activation::kNone;
}

bool is_activation_kind(OpKind kind) {
  return kind == OpKind::kHardSigmoid || kind == OpKind::kLeakyRelu || kind == OpKind::kClip ||
         activation_of_kind(kind) != Activation::kNone;
}

Activation* fused_activation_field(OpAttrs& attrs) {
  return std::visit(
      [](auto& a) -> Activation* {
        if constexpr (requires { a.activation; }) {
          return &a.activation;
        } else {
          return nullptr;
        }
      },
      attrs);
}

Activation fused_activation(OpKind kind, const OpAttrs& attrs) {
  switch (kind) {
    case OpKind::kConv2d:
    case OpKind::kLinear:
    case OpKind::kBatchNorm:
    case OpKind::kAdd:
    case OpKind::kBinary:
      return std::visit(
          [](const auto& a) {
            if constexpr (requires { a.activation; }) {
              return a.activation;
            } else {
              return Activation::kNone;
            }
          },
          attrs);
    default:
      return Activation::kNone;
  }
}

float apply_activation(Activation act, float x) {
  const auto relu6 = [](float v) { return std::min(6.0f, std::max(0.0f, v)); };
  switch (act) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return std::max(0.0f, x);
    case Activation::kRelu6:
      return relu6(x);
    case Activation::kSigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case Activation::kHardSigmoid:
      return relu6(x + 3.0f) / 6.0f;
    case Activation::kHardSwish:
      return x * relu6(x + 3.0f) / 6.0f;
    case Activation::kSilu:
      return x / (1.0f + std::exp(-x));
    case Activation::kGelu:  // 0.5 x (1 + erf(x / sqrt 2))
      return static_cast<float>(0.5 * x * (1.0 + std::erf(x * 0.70710678118654752)));
    case Activation::kGeluTanh: {  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      const double v = x;
      return static_cast<float>(0.5 * v * (1.0 + std::tanh(0.79788456080286536 * (v + 0.044715 * v * v * v))));
    }
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kSqrt:
      return std::sqrt(x);
  }
  return x;
}

namespace {

struct SignatureWriter {
  std::string& out;
  void operator()(const char* name, const int64_t& v, FieldRule) { put(name, std::to_string(v)); }
  void operator()(const char* name, const bool& v, FieldRule) { put(name, v ? "1" : "0"); }
  void operator()(const char* name, const double& v, FieldRule) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.17g", v);
    put(name, buffer);
  }
  void operator()(const char* name, const Activation& v, FieldRule) {
    put(name, std::string(to_string(v)));
  }
  void operator()(const char* name, const BinaryOp& v, FieldRule) {
    put(name, std::string(to_string(v)));
  }
  void operator()(const char* name, const UnaryFn& v, FieldRule) {
    put(name, std::string(to_string(v)));
  }
  void operator()(const char* name, const Hw& v, FieldRule) {
    put(name, std::to_string(v.h) + "x" + std::to_string(v.w));
  }
  void operator()(const char* name, const Pads& v, FieldRule) {
    put(name, std::to_string(v.top) + "," + std::to_string(v.left) + "," +
                  std::to_string(v.bottom) + "," + std::to_string(v.right));
  }
  void operator()(const char* name, const std::vector<int64_t>& v, FieldRule) {
    std::string text;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) text += ',';
      text += std::to_string(v[i]);
    }
    put(name, text);
  }
  void operator()(const char* name, const std::vector<double>& v, FieldRule) {
    std::string text;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) text += ',';
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "%.17g", v[i]);
      text += buffer;
    }
    put(name, text);
  }
  void put(const char* name, const std::string& value) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += value;
  }
};

}  // namespace

std::string attrs_signature(const OpAttrs& attrs) {
  std::string out;
  std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        A::fields(a, SignatureWriter{out});
      },
      attrs);
  return out;
}

int64_t op_macs(const Op& op, const std::vector<TensorDesc>& inputs,
                const std::vector<TensorDesc>& outputs) {
  switch (op.kind) {
    case OpKind::kConv2d: {
      const auto& a = op.attrs_as<Conv2dAttrs>();
      const Shape& out = outputs.at(0).shape;
      return out.numel() * (a.in_channels / a.groups) * a.kernel.h * a.kernel.w;
    }
    case OpKind::kLinear: {
      const auto& a = op.attrs_as<LinearAttrs>();
      return inputs.at(0).shape.numel() / a.in_features * a.in_features * a.out_features;
    }
    case OpKind::kConvTranspose2d: {  // every input element times its group's outputs and taps
      const auto& a = op.attrs_as<ConvTranspose2dAttrs>();
      return inputs.at(0).shape.numel() * (a.out_channels / a.groups) * a.kernel.h * a.kernel.w;
    }
    case OpKind::kMatMul: {
      const Shape& out = outputs.at(0).shape;
      return out.numel() * inputs.at(0).shape[inputs.at(0).shape.rank() - 1];
    }
    default:
      return 0;
  }
}

int64_t op_params(const Op& op, const std::vector<TensorDesc>& inputs) {
  switch (op.kind) {
    case OpKind::kConv2d: {
      const auto& a = op.attrs_as<Conv2dAttrs>();
      return a.out_channels * (a.in_channels / a.groups) * a.kernel.h * a.kernel.w +
             (a.bias ? a.out_channels : 0);
    }
    case OpKind::kLinear: {
      const auto& a = op.attrs_as<LinearAttrs>();
      return a.out_features * a.in_features + (a.bias ? a.out_features : 0);
    }
    case OpKind::kConvTranspose2d: {
      const auto& a = op.attrs_as<ConvTranspose2dAttrs>();
      return a.out_channels * (a.in_channels / a.groups) * a.kernel.h * a.kernel.w + (a.bias ? a.out_channels : 0);
    }
    case OpKind::kBatchNorm:
      return 2 * inputs.at(0).shape[1];  // scale and shift; running statistics are buffers
    case OpKind::kLayerNorm: {
      const TensorDesc& x = inputs.at(0);
      return 2 * x.shape[takes_layouts(x) ? 1 : x.shape.rank() - 1];
    }
    default:
      return 0;
  }
}

int64_t pool_nd_extent(const PoolNdAttrs& a, size_t axis, int64_t in) {
  const int64_t window = (a.kernel[axis] - 1) * a.dilation[axis] + 1;
  const int64_t span = in + a.pad_begin[axis] + a.pad_end[axis] - window;
  if (span < 0) return 0;
  int64_t extent = (a.ceil_mode ? (span + a.stride[axis] - 1) / a.stride[axis] : span / a.stride[axis]) + 1;
  // The last window must start inside the input or its begin padding.
  if (a.ceil_mode && (extent - 1) * a.stride[axis] >= in + a.pad_begin[axis]) --extent;
  return extent;
}

}  // namespace stagecraft::graph
