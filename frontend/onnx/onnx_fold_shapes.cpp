// Constant folding at import, continued (see onnx_fold.cpp): the folds that move or reduce
// elements: Shape and Size (of a constant or a tensor of known shape), Squeeze, Unsqueeze, Concat,
// Gather, Slice, Reshape, Flatten, Transpose, ConstantOfShape, Range and the reductions
// (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd).
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "common/strings.h"
#include "frontend/onnx/onnx_constants.h"

namespace stagecraft::graph::onnx_import {

namespace {

[[noreturn]] void invalid(const std::string& why) { throw std::runtime_error(why); }

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

ConstTensor fold_squeeze(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  // Squeeze and Unsqueeze.
  const ConstTensor& x = *in[0].constant;
  const auto axes = axes_of(node, in, 1);
  ConstTensor t = x;
  if (node.op_type() == "Unsqueeze") {
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
  return t;
}

ConstTensor fold_concat(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  const int64_t axis = normalise_axis(attr_int(node, "axis", 0), x.dims.size());
  std::vector<const ConstTensor*> parts;
  for (size_t i = 0; i < in.size(); ++i) parts.push_back(constant_at(in, i));
  ConstTensor t = x.like();
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
  return t;
}

ConstTensor fold_gather(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  if (!constant_at(in, 1)) invalid("Gather without indices");
  const ConstTensor& idx = *constant_at(in, 1);
  const int64_t axis = normalise_axis(attr_int(node, "axis", 0), x.dims.size());
  const int64_t dim = x.dims[static_cast<size_t>(axis)];
  const int64_t outer = product(std::vector<int64_t>(x.dims.begin(), x.dims.begin() + axis));
  const int64_t inner = product(std::vector<int64_t>(x.dims.begin() + axis + 1, x.dims.end()));
  ConstTensor t = x.like();
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
  return t;
}

ConstTensor fold_slice(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t opset) {
  const auto get = [&](size_t slot, const char* attr_name) {
    if (opset < 10) return attr_ints(node, attr_name);
    return constant_at(in, slot) ? constant_at(in, slot)->ints() : std::vector<int64_t>{};
  };
  return slice(*in[0].constant, get(1, "starts"), get(2, "ends"), get(3, "axes"), get(4, "steps"));
}

ConstTensor fold_reshape(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  if (!constant_at(in, 1)) invalid("Reshape without a shape");
  std::vector<int64_t> target = constant_at(in, 1)->ints();
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
  return t;
}

ConstTensor fold_flatten(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  const int64_t axis = normalise_axis(attr_int(node, "axis", 1), x.dims.size() + 1);
  ConstTensor t = x;
  t.dims = {product(std::vector<int64_t>(x.dims.begin(), x.dims.begin() + axis)),
            product(std::vector<int64_t>(x.dims.begin() + axis, x.dims.end()))};
  return t;
}

ConstTensor fold_transpose(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  return transpose(*in[0].constant, attr_ints(node, "perm"));
}

ConstTensor fold_constant_of_shape(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const std::vector<int64_t> dims = in[0].constant->ints();
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
  return t;
}

ConstTensor fold_range(const onnx::NodeProto&, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  const ConstTensor *limit_t = constant_at(in, 1), *delta_t = constant_at(in, 2);
  if (!limit_t || !delta_t) invalid("Range needs start, limit and delta");
  const double start = x.values.at(0), limit = limit_t->values.at(0), delta = delta_t->values.at(0);
  if (delta == 0) invalid("Range with delta 0");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  ConstTensor t = x;
  t.dims = {n};
  t.values.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t.values[static_cast<size_t>(i)] = start + static_cast<double>(i) * delta;
  return t;
}

ConstTensor fold_reduce(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t) {
  const ConstTensor& x = *in[0].constant;
  const auto axes = axes_of(node, in, 1);
  const bool keepdims = attr_int(node, "keepdims", 1) != 0;
  if ((!axes || axes->empty()) && attr_int(node, "noop_with_empty_axes", 0) != 0) return x;
  return reduce(x, axes.value_or(std::vector<int64_t>{}), keepdims, node.op_type());
}

}  // namespace

std::optional<std::vector<ConstTensor>> fold_shape(const onnx::NodeProto& node, const std::vector<FoldInput>& in) {
  const std::string& op = node.op_type();
  std::vector<int64_t> dims;
  if (constant_at(in, 0)) dims = constant_at(in, 0)->dims;
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

std::optional<ConstTensor> fold_shapes(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t opset) {
  using Fold = ConstTensor (*)(const onnx::NodeProto&, const std::vector<FoldInput>&, int64_t);
  static const std::map<std::string, Fold, std::less<>> kFolds = {
      {"Squeeze", &fold_squeeze},
      {"Unsqueeze", &fold_squeeze},
      {"Concat", &fold_concat},
      {"Gather", &fold_gather},
      {"Slice", &fold_slice},
      {"Reshape", &fold_reshape},
      {"Flatten", &fold_flatten},
      {"Transpose", &fold_transpose},
      {"ConstantOfShape", &fold_constant_of_shape},
      {"Range", &fold_range},
      {"ReduceProd", &fold_reduce},
      {"ReduceSum", &fold_reduce},
      {"ReduceMin", &fold_reduce},
      {"ReduceMax", &fold_reduce},
      {"ReduceMean", &fold_reduce},
  };
  const auto f = kFolds.find(node.op_type());
  if (f == kFolds.end()) return std::nullopt;
  return f->second(node, in, opset);
}

}  // namespace stagecraft::graph::onnx_import
