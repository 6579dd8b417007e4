// Constant folding at import: evaluates a node whose inputs are all constants (shape arithmetic,
// Cast, Gather, Concat, Reshape, Range, ...) on ConstTensor values, in double precision.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

#include "common/enum_table.h"
#include "common/strings.h"
#include "graph/onnx/onnx_constants.h"

namespace stagecraft::graph::onnx_import {

namespace {

using onnx::TensorProto;

[[noreturn]] void invalid(const std::string& why) { throw std::runtime_error(why); }

// Row-major strides of `dims`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// The element of `t` (broadcast to `out_dims`) at flat output index `i`.
double broadcast_at(const ConstTensor& t, const std::vector<int64_t>& out_dims,
                    const std::vector<int64_t>& out_strides, int64_t i) {
  if (t.values.size() == 1) return t.values[0];
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

int64_t normalise_axis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= std::max<int64_t>(r, 1)) invalid(cat("axis ", axis, " out of range for rank ", rank));
  return axis < 0 ? axis + r : axis;
}

// The axes of a node: the attribute (older opsets) or the input at `slot` (newer ones).
std::optional<std::vector<int64_t>> axes_of(const onnx::NodeProto& node,
                                            const std::vector<FoldInput>& in, size_t slot) {
  if (attribute(node, "axes")) return attr_ints(node, "axes");
  if (in.size() > slot && in[slot].constant) return in[slot].constant->ints();
  return std::nullopt;
}

ConstTensor transpose(const ConstTensor& t, std::vector<int64_t> perm) {
  const size_t r = t.dims.size();
  if (perm.empty()) {
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  }
  if (perm.size() != r) invalid("perm does not match the rank");
  ConstTensor out = t;
  for (size_t i = 0; i < r; ++i) out.dims[i] = t.dims[static_cast<size_t>(perm[i])];
  const auto in_strides = strides_of(t.dims), out_strides = strides_of(out.dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d) {
      const int64_t coord = (i / out_strides[d]) % out.dims[d];
      src += coord * in_strides[static_cast<size_t>(perm[d])];
    }
    out.values[static_cast<size_t>(i)] = t.values[static_cast<size_t>(src)];
  }
  return out;
}

ConstTensor slice(const ConstTensor& t, const std::vector<int64_t>& starts,
                  const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                  std::vector<int64_t> steps) {
  const size_t r = t.dims.size();
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    invalid("starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> begin(r, 0), step(r, 1), count(t.dims);
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t a = static_cast<size_t>(normalise_axis(axes[k], r));
    const int64_t dim = t.dims[a], st = steps[k];
    if (st == 0) invalid("slice step 0");
    auto clamp = [&](int64_t v, bool is_end) {
      if (v < 0) v += dim;
      if (st > 0) return std::clamp<int64_t>(v, 0, dim);
      return std::clamp<int64_t>(v, -1, dim - 1) + (is_end ? 0 : 0);
    };
    const int64_t b = clamp(starts[k], false), e = clamp(ends[k], true);
    begin[a] = b;
    step[a] = st;
    count[a] = st > 0 ? std::max<int64_t>(0, (e - b + st - 1) / st)
                      : std::max<int64_t>(0, (b - e + (-st) - 1) / (-st));
  }
  ConstTensor out = t;
  out.dims = count;
  out.values.assign(static_cast<size_t>(product(count)), 0.0);
  const auto in_strides = strides_of(t.dims), out_strides = strides_of(count);
  for (int64_t i = 0; i < product(count); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d) {
      const int64_t coord = (i / out_strides[d]) % count[d];
      src += (begin[d] + coord * step[d]) * in_strides[d];
    }
    out.values[static_cast<size_t>(i)] = t.values[static_cast<size_t>(src)];
  }
  return out;
}

ConstTensor reduce(const ConstTensor& t, std::vector<int64_t> axes, bool keepdims,
                   const std::string& op) {
  const size_t r = t.dims.size();
  std::vector<bool> reduced(r, axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(normalise_axis(a, r))] = true;
  std::vector<int64_t> out_dims;
  for (size_t d = 0; d < r; ++d) {
    if (!reduced[d]) out_dims.push_back(t.dims[d]);
    else if (keepdims) out_dims.push_back(1);
  }
  const double init = op == "ReduceProd" ? 1.0
                      : op == "ReduceMin" ? INFINITY
                      : op == "ReduceMax" ? -INFINITY
                                          : 0.0;
  std::map<int64_t, std::pair<double, int64_t>> acc;
  const auto strides = strides_of(t.dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t key = 0;
    for (size_t d = 0; d < r; ++d) {
      const int64_t coord = (i / strides[d]) % t.dims[d];
      if (!reduced[d]) key = key * t.dims[d] + coord;
    }
    auto [it, fresh] = acc.emplace(key, std::make_pair(init, 0));
    double& a = it->second.first;
    const double v = t.values[static_cast<size_t>(i)];
    if (op == "ReduceProd") a *= v;
    else if (op == "ReduceMin") a = std::min(a, v);
    else if (op == "ReduceMax") a = std::max(a, v);
    else a += v;
    ++it->second.second;
  }
  ConstTensor out = t;
  out.dims = out_dims;
  out.values.clear();
  for (const auto& [key, v] : acc) {
    out.values.push_back(op == "ReduceMean" ? v.first / static_cast<double>(v.second) : v.first);
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

std::optional<std::vector<ConstTensor>> fold(const onnx::NodeProto& node,
                                             const std::vector<FoldInput>& in, int64_t opset) {
  const std::string& op = node.op_type();
  const auto c = [&](size_t i) -> const ConstTensor* {
    return i < in.size() ? in[i].constant : nullptr;
  };
  // Shape and Size need only the shape of their input.
  if (op == "Shape" || op == "Size") {
    std::vector<int64_t> dims;
    if (c(0)) dims = c(0)->dims;
    else if (!in.empty() && in[0].shape) dims = *in[0].shape;
    else return std::nullopt;
    if (op == "Size") return std::vector<ConstTensor>{ConstTensor::of_ints({product(dims)}, {})};
    const int64_t r = static_cast<int64_t>(dims.size());
    int64_t start = attr_int(node, "start", 0), end = attr_int(node, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    std::vector<int64_t> part(dims.begin() + start, dims.begin() + end);
    const int64_t n = static_cast<int64_t>(part.size());
    return std::vector<ConstTensor>{ConstTensor::of_ints(std::move(part), {n})};
  }
  // Every other op needs all its (present) inputs constant.
  for (size_t i = 0; i < in.size(); ++i) {
    const bool present = in[i].shape.has_value() ||
                         (i < static_cast<size_t>(node.input_size()) && !node.input(static_cast<int>(i)).empty());
    if (!in[i].constant && present) return std::nullopt;
  }
  if (in.empty() || !c(0)) return std::nullopt;
  const ConstTensor& x = *c(0);
  std::vector<ConstTensor> out;
  const auto unary = [&](const std::function<double(double)>& f, ElemKind kind) {
    ConstTensor t = x;
    t.kind = kind;
    for (double& v : t.values) v = f(v);
    out.push_back(t);
  };
  const auto binary = [&](const std::function<double(double, double)>& f, ElemKind kind) {
    if (!c(1)) invalid("the second operand is missing");
    const int32_t type = kind == ElemKind::kBool ? TensorProto::BOOL : x.onnx_type;
    out.push_back(elementwise({&x, c(1)}, kind, type, [&](const std::vector<double>& a) { return f(a[0], a[1]); }));
  };
  const bool integer = x.kind != ElemKind::kFloat;
  if (const auto* one = entry_named(kUnaryFolds, op)) {
    unary(one->f, one->boolean ? ElemKind::kBool : x.kind);
  } else if (const auto* two = entry_named(kBinaryFolds, op)) {
    binary(two->f, two->boolean ? ElemKind::kBool : x.kind);
  } else if (op == "Identity") {
    out.push_back(x);
  } else if (op == "BatchNormalization") {
    out = batch_norm(node, in, x);
  } else if (op == "Cast") {
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
    out.push_back(t);
  } else if (op == "Div") {
    if (integer) {
      binary([](double a, double b) {
        if (b == 0) invalid("integer division by zero");
        return std::trunc(a / b);
      }, x.kind);
    } else {
      binary([](double a, double b) { return a / b; }, x.kind);
    }
  } else if (op == "Mod") {
    const bool fmod = attr_int(node, "fmod", 0) != 0;
    binary([fmod](double a, double b) {
      if (b == 0) invalid("modulo by zero");
      if (fmod) return std::fmod(a, b);
      const double r = std::fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }, x.kind);
  } else if (op == "Max" || op == "Min") {
    std::vector<const ConstTensor*> args;
    for (size_t i = 0; i < in.size(); ++i) args.push_back(c(i));
    const bool max = op == "Max";
    out.push_back(elementwise(args, x.kind, x.onnx_type, [max](const std::vector<double>& a) {
      return max ? *std::max_element(a.begin(), a.end()) : *std::min_element(a.begin(), a.end());
    }));
  } else if (op == "Clip") {
    double lo = -INFINITY, hi = INFINITY;
    if (opset < 11) {
      lo = attr_float(node, "min", -INFINITY);
      hi = attr_float(node, "max", INFINITY);
    } else {
      if (c(1)) lo = c(1)->values.at(0);
      if (c(2)) hi = c(2)->values.at(0);
    }
    unary([lo, hi](double v) { return std::clamp(v, lo, hi); }, x.kind);
  } else if (op == "Where") {
    if (!c(1) || !c(2)) invalid("Where needs three operands");
    out.push_back(elementwise({&x, c(1), c(2)}, c(1)->kind, c(1)->onnx_type,
                              [](const std::vector<double>& a) { return a[0] != 0 ? a[1] : a[2]; }));
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    const auto axes = axes_of(node, in, 1);
    ConstTensor t = x;
    if (op == "Unsqueeze") {
      if (!axes) invalid("Unsqueeze without axes");
      const size_t r = x.dims.size() + axes->size();
      std::vector<bool> inserted(r, false);
      for (int64_t a : *axes) inserted[static_cast<size_t>(normalise_axis(a, r))] = true;
      t.dims.clear();
      size_t k = 0;
      for (size_t d = 0; d < r; ++d) t.dims.push_back(inserted[d] ? 1 : x.dims[k++]);
    } else {
      std::vector<bool> removed(x.dims.size(), false);
      if (axes) {
        for (int64_t a : *axes) removed[static_cast<size_t>(normalise_axis(a, x.dims.size()))] = true;
      } else {
        for (size_t d = 0; d < x.dims.size(); ++d) removed[d] = x.dims[d] == 1;
      }
      t.dims.clear();
      for (size_t d = 0; d < x.dims.size(); ++d)
        if (!removed[d]) t.dims.push_back(x.dims[d]);
    }
    out.push_back(t);
  } else if (op == "Concat") {
    const int64_t axis = normalise_axis(attr_int(node, "axis", 0), x.dims.size());
    std::vector<const ConstTensor*> parts;
    for (size_t i = 0; i < in.size(); ++i) parts.push_back(c(i));
    ConstTensor t = x;
    int64_t total = 0;
    for (const ConstTensor* p : parts) total += p->dims.at(static_cast<size_t>(axis));
    t.dims[static_cast<size_t>(axis)] = total;
    t.values.clear();
    const int64_t outer = product(std::vector<int64_t>(x.dims.begin(), x.dims.begin() + axis));
    for (int64_t o = 0; o < outer; ++o) {
      for (const ConstTensor* p : parts) {
        const int64_t inner = p->numel() / std::max<int64_t>(1, outer);
        t.values.insert(t.values.end(), p->values.begin() + o * inner, p->values.begin() + (o + 1) * inner);
      }
    }
    out.push_back(t);
  } else if (op == "Gather") {
    if (!c(1)) invalid("Gather without indices");
    const ConstTensor& idx = *c(1);
    const int64_t axis = normalise_axis(attr_int(node, "axis", 0), x.dims.size());
    const int64_t dim = x.dims[static_cast<size_t>(axis)];
    const int64_t outer = product(std::vector<int64_t>(x.dims.begin(), x.dims.begin() + axis));
    const int64_t inner = product(std::vector<int64_t>(x.dims.begin() + axis + 1, x.dims.end()));
    ConstTensor t = x;
    t.dims.clear();
    t.dims.insert(t.dims.end(), x.dims.begin(), x.dims.begin() + axis);
    t.dims.insert(t.dims.end(), idx.dims.begin(), idx.dims.end());
    t.dims.insert(t.dims.end(), x.dims.begin() + axis + 1, x.dims.end());
    t.values.clear();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j : idx.ints()) {
        if (j < 0) j += dim;
        if (j < 0 || j >= dim) invalid(cat("Gather index out of range [0, ", dim, ")"));
        const auto first = x.values.begin() + (o * dim + j) * inner;
        t.values.insert(t.values.end(), first, first + inner);
      }
    }
    out.push_back(t);
  } else if (op == "Slice") {
    const auto get = [&](size_t slot, const char* attr_name) {
      if (opset < 10) return attr_ints(node, attr_name);
      return c(slot) ? c(slot)->ints() : std::vector<int64_t>{};
    };
    out.push_back(slice(x, get(1, "starts"), get(2, "ends"), get(3, "axes"), get(4, "steps")));
  } else if (op == "Reshape") {
    if (!c(1)) invalid("Reshape without a shape");
    std::vector<int64_t> target = c(1)->ints();
    const bool allowzero = attr_int(node, "allowzero", 0) != 0;
    int64_t known = 1, minus = -1;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0 && !allowzero) target[i] = x.dims.at(i);
      if (target[i] == -1) minus = static_cast<int64_t>(i);
      else known *= target[i];
    }
    if (minus >= 0) target[static_cast<size_t>(minus)] = known == 0 ? 0 : x.numel() / known;
    if (product(target) != x.numel()) invalid("Reshape changes the number of elements");
    ConstTensor t = x;
    t.dims = target;
    out.push_back(t);
  } else if (op == "Flatten") {
    const int64_t axis = normalise_axis(attr_int(node, "axis", 1), x.dims.size() + 1);
    ConstTensor t = x;
    t.dims = {product(std::vector<int64_t>(x.dims.begin(), x.dims.begin() + axis)),
              product(std::vector<int64_t>(x.dims.begin() + axis, x.dims.end()))};
    out.push_back(t);
  } else if (op == "Transpose") {
    out.push_back(transpose(x, attr_ints(node, "perm")));
  } else if (op == "Expand") {
    if (!c(1)) invalid("Expand without a shape");
    const auto dims = broadcast(x.dims, c(1)->ints());
    if (!dims) invalid("Expand shapes do not broadcast");
    ConstTensor shape_of = ConstTensor::of_floats({}, *dims);
    shape_of.values.assign(static_cast<size_t>(product(*dims)), 0.0);
    out.push_back(elementwise({&x, &shape_of}, x.kind, x.onnx_type,
                              [](const std::vector<double>& a) { return a[0]; }));
  } else if (op == "ConstantOfShape") {
    const std::vector<int64_t> dims = x.ints();
    ConstTensor t = ConstTensor::of_floats({}, dims);
    t.values.assign(static_cast<size_t>(product(dims)), 0.0);
    if (const auto* v = attribute(node, "value"); v && v->has_t()) {
      std::string why;
      const auto value = from_proto(v->t(), &why);
      if (!value || value->values.size() != 1) invalid("ConstantOfShape needs a one-element value");
      t.kind = value->kind;
      t.onnx_type = value->onnx_type;
      std::fill(t.values.begin(), t.values.end(), value->values[0]);
    }
    out.push_back(t);
  } else if (op == "Range") {
    if (!c(1) || !c(2)) invalid("Range needs start, limit and delta");
    const double start = x.values.at(0), limit = c(1)->values.at(0), delta = c(2)->values.at(0);
    if (delta == 0) invalid("Range with delta 0");
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    ConstTensor t = x;
    t.dims = {n};
    t.values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t.values[static_cast<size_t>(i)] = start + static_cast<double>(i) * delta;
    out.push_back(t);
  } else if (auto more = fold_tables(node, x, c(1), c(2))) {
    out.push_back(std::move(*more));
  } else if (op == "ReduceProd" || op == "ReduceSum" || op == "ReduceMin" || op == "ReduceMax" ||
             op == "ReduceMean") {
    const auto axes = axes_of(node, in, 1);
    const bool keepdims = attr_int(node, "keepdims", 1) != 0;
    if ((!axes || axes->empty()) && attr_int(node, "noop_with_empty_axes", 0) != 0) {
      out.push_back(x);
    } else {
      out.push_back(reduce(x, axes.value_or(std::vector<int64_t>{}), keepdims, op));
    }
  } else {
    return std::nullopt;
  }
  return out;
}

}  // namespace stagecraft::graph::onnx_import
