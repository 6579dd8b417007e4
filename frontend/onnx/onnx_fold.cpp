// Constant folding at import: evaluates a node whose inputs are all constants on ConstTensor
// values, in double precision. This file: the element-wise folds (the unary and binary functions,
// Cast, Div, Mod, Max, Min, Clip, Where, Expand, Identity), BatchNormalization, and the dispatch
// by op type; the folds that move or reduce elements are in onnx_fold_shapes.cpp, those of tables
// and products in onnx_fold_tables.cpp, those that select by value (and Pad) in
// onnx_fold_selection.cpp.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>

#include "common/enum_table.h"
#include "common/strings.h"
#include "frontend/onnx/onnx_constants.h"

namespace stagecraft::graph::onnx_import {

namespace {

using onnx::TensorProto;

[[noreturn]] void invalid(const std::string& why) { throw std::runtime_error(why); }

// The element of `t` (broadcast to `out_dims`) at flat output index `i`.
double broadcast_at(const ConstTensor& t, const std::vector<int64_t>& out_dims,
                    const std::vector<int64_t>& out_strides, int64_t i) {
  if (t.values.size() == 1) return t.values[0];
  if (t.dims == out_dims) return t.values[static_cast<size_t>(i)];
  const size_t offset = out_dims.size() - t.dims.size();
  const std::vector<int64_t> ts = strides_of(t.dims);
  int64_t index = 0;
  for (size_t d = 0; d < out_dims.size(); ++d) {
    const int64_t coord = (i / out_strides[d]) % out_dims[d];
    if (d < offset) continue;
    const int64_t td = t.dims[d - offset];
    index += (td == 1 ? 0 : coord) * ts[d - offset];
  }
  return t.values[static_cast<size_t>(index)];
}

ConstTensor elementwise(const std::vector<const ConstTensor*>& in, ElemKind kind, int32_t onnx_type,
                        const std::function<double(const std::vector<double>&)>& f) {
  std::vector<int64_t> dims = in[0]->dims;
  for (size_t k = 1; k < in.size(); ++k) {
    auto b = broadcast(dims, in[k]->dims);
    if (!b) invalid(cat("shapes do not broadcast"));
    dims = *b;
  }
  ConstTensor out;
  out.kind = kind;
  out.onnx_type = onnx_type;
  out.dims = dims;
  const int64_t n = product(dims);
  const std::vector<int64_t> strides = strides_of(dims);
  out.values.resize(static_cast<size_t>(n));
  std::vector<double> args(in.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < in.size(); ++k) args[k] = broadcast_at(*in[k], dims, strides, i);
    out.values[static_cast<size_t>(i)] = f(args);
  }
  return out;
}

// Element-wise ops that need no attributes: the function of the operands' values, and whether the
// result is Boolean (otherwise it has the first operand's kind).
template <class F>
struct ElementwiseFold {
  std::string_view name;
  F* f;
  bool boolean = false;
};

constexpr ElementwiseFold<double(double)> kUnaryFolds[] = {
    {"Neg", [](double v) { return -v; }},
    {"Abs", [](double v) { return std::fabs(v); }},
    {"Ceil", [](double v) { return std::ceil(v); }},
    {"Floor", [](double v) { return std::floor(v); }},
    {"Round", [](double v) { return std::nearbyint(v); }},
    {"Sqrt", [](double v) { return std::sqrt(v); }},
    {"Exp", [](double v) { return std::exp(v); }},
    {"Log", [](double v) { return std::log(v); }},
    {"Reciprocal", [](double v) { return 1.0 / v; }},
    {"Not", [](double v) { return v == 0 ? 1.0 : 0.0; }, true},
    {"Sign", [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }},
    {"Sin", [](double v) { return std::sin(v); }},
    {"Cos", [](double v) { return std::cos(v); }},
    {"Tanh", [](double v) { return std::tanh(v); }},
    {"Sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
    {"Relu", [](double v) { return v > 0 ? v : 0.0; }},
};

constexpr ElementwiseFold<double(double, double)> kBinaryFolds[] = {
    {"Add", [](double a, double b) { return a + b; }},
    {"Sub", [](double a, double b) { return a - b; }},
    {"Mul", [](double a, double b) { return a * b; }},
    {"Pow", [](double a, double b) { return std::pow(a, b); }},
    {"Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }, true},
    {"Less", [](double a, double b) { return a < b ? 1.0 : 0.0; }, true},
    {"LessOrEqual", [](double a, double b) { return a <= b ? 1.0 : 0.0; }, true},
    {"Greater", [](double a, double b) { return a > b ? 1.0 : 0.0; }, true},
    {"GreaterOrEqual", [](double a, double b) { return a >= b ? 1.0 : 0.0; }, true},
    {"And", [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; }, true},
    {"Or", [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; }, true},
};

// f(x) of every element of input 0, the result of element kind `kind`.
ConstTensor unary(const ConstTensor& x, const std::function<double(double)>& f, ElemKind kind) {
  ConstTensor t = x;
  t.kind = kind;
  for (double& v : t.values) v = f(v);
  return t;
}

// f(a, b) of inputs 0 and 1 broadcast, the result of element kind `kind`.
ConstTensor binary(const std::vector<FoldInput>& in, const std::function<double(double, double)>& f, ElemKind kind) {
  const ConstTensor& x = *in[0].constant;
  const ConstTensor* second = constant_at(in, 1);
  if (!second) invalid("the second operand is missing");
  const int32_t type = kind == ElemKind::kBool ? TensorProto::BOOL : x.onnx_type;
  return elementwise({&x, second}, kind, type, [&](const std::vector<double>& a) { return f(a[0], a[1]); });
}

ConstTensor fold_identity(const onnx::NodeProto&, const std::vector<FoldInput>& in, int64_t) { return *in[0].constant; }

ConstTensor fold_cast(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  const auto to = static_cast<int32_t>(attr_int(node, "to", TensorProto::FLOAT));
  const ElemKind kind = kind_of(to);
  ConstTensor t = x;
  t.kind = kind;
  t.onnx_type = to;
  for (double& v : t.values) {
    if (kind == ElemKind::kInt) v = std::trunc(v);
    if (kind == ElemKind::kBool) v = v != 0 ? 1 : 0;
    if (to == TensorProto::FLOAT) v = static_cast<double>(static_cast<float>(v));
  }
  return t;
}

ConstTensor fold_div(const onnx::NodeProto&, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  if (x.kind != ElemKind::kFloat) {
    return binary(in, [](double a, double b) {
      if (b == 0) invalid("integer division by zero");
      return std::trunc(a / b);
    }, x.kind);
  }
  return binary(in, [](double a, double b) { return a / b; }, x.kind);
}

ConstTensor fold_mod(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const bool fmod = attr_int(node, "fmod", 0) != 0;
  return binary(in, [fmod](double a, double b) {
    if (b == 0) invalid("modulo by zero");
    if (fmod) return std::fmod(a, b);
    const double r = std::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }, in[0].constant->kind);
}

// Max or Min of any number of inputs.
ConstTensor fold_extremum(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  std::vector<const ConstTensor*> args;
  for (size_t i = 0; i < in.size(); ++i) args.push_back(constant_at(in, i));
  const bool max = node.op_type() == "Max";
  return elementwise(args, x.kind, x.onnx_type, [max](const std::vector<double>& a) {
    return max ? *std::max_element(a.begin(), a.end()) : *std::min_element(a.begin(), a.end());
  });
}

ConstTensor fold_clip(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t opset) {
  double lo = -INFINITY, hi = INFINITY;
  if (opset < 11) {
    lo = attr_float(node, "min", -INFINITY);
    hi = attr_float(node, "max", INFINITY);
  } else {
    if (constant_at(in, 1)) lo = constant_at(in, 1)->values.at(0);
    if (constant_at(in, 2)) hi = constant_at(in, 2)->values.at(0);
  }
  return unary(*in[0].constant, [lo, hi](double v) { return std::clamp(v, lo, hi); }, in[0].constant->kind);
}

ConstTensor fold_where(const onnx::NodeProto&, const std::vector<FoldInput>& in, int64_t) {
  // Where(condition, X, Y): inputs 1 and 2 give the result's kind and type.
  const ConstTensor *x = constant_at(in, 1), *y = constant_at(in, 2);
  if (!x || !y) invalid("Where needs three operands");
  return elementwise({in[0].constant, x, y}, x->kind, x->onnx_type,
                     [](const std::vector<double>& a) { return a[0] != 0 ? a[1] : a[2]; });
}

ConstTensor fold_expand(const onnx::NodeProto&, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  if (!constant_at(in, 1)) invalid("Expand without a shape");
  const auto dims = broadcast(x.dims, constant_at(in, 1)->ints());
  if (!dims) invalid("Expand shapes do not broadcast");
  ConstTensor shape_of = ConstTensor::of_floats({}, *dims);
  shape_of.values.assign(static_cast<size_t>(product(*dims)), 0.0);
  return elementwise({&x, &shape_of}, x.kind, x.onnx_type, [](const std::vector<double>& a) { return a[0]; });
}

}  // namespace

// BatchNormalization of constants (NF-Nets standardise their weights with one in training mode:
// statistics of the input itself): Y, and in training mode the running mean and variance.
std::vector<ConstTensor> batch_norm(const onnx::NodeProto& node, const std::vector<FoldInput>& in,
                                    const ConstTensor& x) {
  if (in.size() < 5 || x.dims.size() < 2) invalid("needs X of rank >= 2, scale, bias, mean and variance");
  const int64_t n = x.dims[0], c = x.dims[1];
  const int64_t inner = c == 0 ? 0 : x.numel() / (n * c);
  const auto param = [&](size_t i) {
    const ConstTensor* p = in[i].constant;
    if (!p || p->numel() != c) invalid(cat("input ", i, " must have one value per channel (", c, ")"));
    return p->values;
  };
  const std::vector<double> scale = param(1), bias = param(2), mean_in = param(3), var_in = param(4);
  const double eps = attr_float(node, "epsilon", 1e-5f);
  const bool training = attr_int(node, "training_mode", 0) != 0;
  std::vector<double> mean = mean_in, var = var_in;
  const auto at = [&](int64_t b, int64_t ch, int64_t i) { return static_cast<size_t>((b * c + ch) * inner + i); };
  if (training) {
    const auto count = static_cast<double>(n * inner);
    for (int64_t ch = 0; ch < c; ++ch) {
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) sum += x.values[at(b, ch, i)];
      const double m = sum / count;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) sq += (x.values[at(b, ch, i)] - m) * (x.values[at(b, ch, i)] - m);
      mean[static_cast<size_t>(ch)] = m;
      var[static_cast<size_t>(ch)] = sq / count;
    }
  }
  ConstTensor y = x;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const auto k = static_cast<size_t>(ch);
      const double factor = scale[k] / std::sqrt(var[k] + eps);
      for (int64_t i = 0; i < inner; ++i) {
        double& v = y.values[at(b, ch, i)];
        v = static_cast<float>((v - mean[k]) * factor + bias[k]);
      }
    }
  }
  std::vector<ConstTensor> out{y};
  if (training) {
    const double momentum = attr_float(node, "momentum", 0.9f);
    ConstTensor running_mean = *in[3].constant, running_var = *in[4].constant;
    for (size_t k = 0; k < static_cast<size_t>(c); ++k) {
      running_mean.values[k] = mean_in[k] * momentum + mean[k] * (1 - momentum);
      running_var.values[k] = var_in[k] * momentum + var[k] * (1 - momentum);
    }
    out.push_back(running_mean);
    out.push_back(running_var);
  }
  return out;
}

const ConstTensor* constant_at(const std::vector<FoldInput>& in, size_t i) {
  return i < in.size() ? in[i].constant : nullptr;
}

std::optional<std::vector<ConstTensor>> fold(const onnx::NodeProto& node,
                                             const std::vector<FoldInput>& in, int64_t opset) {
  // The folds of one op type each, of the node and its inputs (all constant).
  using Fold = ConstTensor (*)(const onnx::NodeProto&, const std::vector<FoldInput>&, int64_t);
  static const std::map<std::string, Fold, std::less<>> kFolds = {
      {"Identity", &fold_identity}, {"Cast", &fold_cast}, {"Div", &fold_div},   {"Mod", &fold_mod},
      {"Max", &fold_extremum},      {"Min", &fold_extremum}, {"Clip", &fold_clip}, {"Where", &fold_where},
      {"Expand", &fold_expand},
  };
  const std::string& op = node.op_type();
  // Shape and Size need only the shape of their input.
  if (op == "Shape" || op == "Size") return fold_shape(node, in);
  // Every other op needs all its (present) inputs constant.
  for (size_t i = 0; i < in.size(); ++i) {
    const bool present = in[i].shape.has_value() ||
                         (i < static_cast<size_t>(node.input_size()) && !node.input(static_cast<int>(i)).empty());
    if (!in[i].constant && present) return std::nullopt;
  }
  if (in.empty() || !constant_at(in, 0)) return std::nullopt;
  const ConstTensor& x = *constant_at(in, 0);
  if (const auto* one = entry_named(kUnaryFolds, op)) {
    return std::vector<ConstTensor>{unary(x, one->f, one->boolean ? ElemKind::kBool : x.kind)};
  }
  if (const auto* two = entry_named(kBinaryFolds, op)) {
    return std::vector<ConstTensor>{binary(in, two->f, two->boolean ? ElemKind::kBool : x.kind)};
  }
  if (op == "BatchNormalization") return batch_norm(node, in, x);
  if (const auto f = kFolds.find(op); f != kFolds.end()) return std::vector<ConstTensor>{f->second(node, in, opset)};
  if (auto moved = fold_shapes(node, in, opset)) return std::vector<ConstTensor>{std::move(*moved)};
  if (auto selected = fold_selection(node, in, opset)) return std::vector<ConstTensor>{std::move(*selected)};
  if (auto more = fold_tables(node, x, constant_at(in, 1), constant_at(in, 2))) {
    return std::vector<ConstTensor>{std::move(*more)};
  }
  return std::nullopt;
}

}  // namespace stagecraft::graph::onnx_import
