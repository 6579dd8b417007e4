// Folds of tables and products of constants: what transformers compute from constants before the
// input matters — GatherND (LeViT's attention biases), ScatterND (Swin's shifted-window masks),
// MatMul, Einsum and Softmax (ConViT's and MaxViT's positional attention of constant relative indices), CumSum and
// Conv (EdgeNeXt's and XCiT's positional encodings: Fourier features of a constant grid, projected by a convolution).
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "common/strings.h"
#include "frontend/onnx/onnx_constants.h"

namespace stagecraft::graph::onnx_import {

namespace {

[[noreturn]] void invalid(const std::string& why) { throw std::runtime_error(why); }

// The flat offset of the k leading coordinates `ids[i * k .. i * k + k)` in `dims`, times the
// elements after them.
int64_t row_of(const std::vector<int64_t>& ids, size_t i, size_t k, const std::vector<int64_t>& dims,
               const char* op) {
  int64_t at = 0;
  for (size_t d = 0; d < k; ++d) {
    int64_t v = ids[i * k + d];
    if (v < 0) v += dims[d];
    if (v < 0 || v >= dims[d]) invalid(cat(op, " index out of range"));
    at = at * dims[d] + v;
  }
  return at;
}

int64_t elements_after(const std::vector<int64_t>& dims, size_t k) {
  int64_t n = 1;
  for (size_t d = k; d < dims.size(); ++d) n *= dims[d];
  return n;
}

size_t index_depth(const ConstTensor& idx, const ConstTensor& x, const char* op) {
  const size_t k = idx.dims.empty() ? 0 : static_cast<size_t>(idx.dims.back());
  if (k == 0 || k > x.dims.size()) invalid(cat(op, " indices must end in 1 .. rank of the data"));
  return k;
}

ConstTensor gather_nd(const onnx::NodeProto& node, const ConstTensor& x, const ConstTensor& idx) {
  if (attr_int(node, "batch_dims", 0) != 0) invalid("GatherND with batch_dims is not supported");
  const size_t k = index_depth(idx, x, "GatherND");
  const int64_t slice = elements_after(x.dims, k);
  const std::vector<int64_t> ids = idx.ints();
  ConstTensor t = x.like();
  t.dims.assign(idx.dims.begin(), idx.dims.end() - 1);
  t.dims.insert(t.dims.end(), x.dims.begin() + static_cast<std::ptrdiff_t>(k), x.dims.end());
  t.values.clear();
  for (size_t i = 0; i < ids.size() / k; ++i) {
    const int64_t at = row_of(ids, i, k, x.dims, "GatherND");
    t.values.insert(t.values.end(), x.values.begin() + at * slice, x.values.begin() + (at + 1) * slice);
  }
  return t;
}

ConstTensor scatter_nd(const onnx::NodeProto& node, const ConstTensor& x, const ConstTensor& idx,
                       const ConstTensor& upd) {
  const std::string reduction = attr_string(node, "reduction");
  if (!reduction.empty() && reduction != "none") invalid("ScatterND with a reduction is not supported");
  const size_t k = index_depth(idx, x, "ScatterND");
  const int64_t slice = elements_after(x.dims, k);
  const std::vector<int64_t> ids = idx.ints();
  const size_t count = ids.size() / k;
  if (static_cast<int64_t>(upd.values.size()) != static_cast<int64_t>(count) * slice) {
    invalid("ScatterND updates do not match its indices");
  }
  ConstTensor t = x;
  for (size_t i = 0; i < count; ++i) {
    const int64_t at = row_of(ids, i, k, x.dims, "ScatterND");
    std::copy(upd.values.begin() + static_cast<int64_t>(i) * slice, upd.values.begin() + static_cast<int64_t>(i + 1) * slice,
              t.values.begin() + at * slice);
  }
  return t;
}

// GatherElements (out[p] = data[p with the axis coordinate indices[p]]) and ScatterElements (a copy
// of data with data[p with the axis coordinate indices[p]] = updates[p], no reduction) of
// constants: the relative-position indices BEiT's dynamo export builds.
ConstTensor by_elements(const onnx::NodeProto& node, const ConstTensor& x, const ConstTensor& idx,
                        const ConstTensor* upd) {
  const bool scatter = upd != nullptr;
  const std::string& op = node.op_type();
  if (scatter) {
    const std::string reduction = attr_string(node, "reduction");
    if (!reduction.empty() && reduction != "none") invalid("ScatterElements with a reduction is not supported");
  }
  const size_t rank = x.dims.size();
  if (idx.dims.size() != rank) invalid(cat(op, ": the indices must have the data's rank"));
  if (scatter && upd->dims != idx.dims) invalid("ScatterElements: the updates must have the indices' shape");
  int64_t axis = attr_int(node, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) invalid(cat(op, ": axis out of range"));
  const auto a = static_cast<size_t>(axis);
  const std::vector<int64_t> ids = idx.ints();
  ConstTensor t = scatter ? x : x.like();
  if (!scatter) {
    t.dims = idx.dims;
    t.values.assign(ids.size(), 0.0);
  }
  std::vector<int64_t> coord(rank, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i);
    for (size_t d = rank; d-- > 0;) {
      coord[d] = rest % idx.dims[d];
      rest /= idx.dims[d];
    }
    int64_t at = ids[i] < 0 ? ids[i] + x.dims[a] : ids[i];
    if (at < 0 || at >= x.dims[a]) invalid(cat(op, ": index ", ids[i], " is outside axis ", axis));
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d) {
      if (d != a && coord[d] >= x.dims[d]) invalid(cat(op, ": the indices exceed the data"));
      offset = offset * x.dims[d] + (d == a ? at : coord[d]);
    }
    if (scatter) t.values[static_cast<size_t>(offset)] = upd->values[i];
    else t.values[i] = x.values[static_cast<size_t>(offset)];
  }
  return t;
}

// ONNX MatMul of constants: [..., M, K] x [..., K, N] (a 2-D second operand, or equal ranks with
// batch dimensions broadcast).
ConstTensor matmul(const ConstTensor& a, const ConstTensor& b) {
  if (a.dims.size() < 2 || b.dims.size() < 2) invalid("MatMul of 1-D constants is not supported");
  std::vector<int64_t> bd = b.dims;
  bd.insert(bd.begin(), a.dims.size() > bd.size() ? a.dims.size() - bd.size() : 0, 1);
  std::vector<int64_t> ad = a.dims;
  ad.insert(ad.begin(), bd.size() > ad.size() ? bd.size() - ad.size() : 0, 1);
  const size_t r = ad.size();
  const int64_t m = ad[r - 2], k = ad[r - 1], n = bd[r - 1];
  if (bd[r - 2] != k) invalid("MatMul inner dimensions differ");
  ConstTensor t = a;
  t.dims.assign(r, 1);
  for (size_t d = 0; d + 2 < r; ++d) {
    if (ad[d] != bd[d] && ad[d] != 1 && bd[d] != 1) invalid("MatMul batch dimensions do not broadcast");
    t.dims[d] = std::max(ad[d], bd[d]);
  }
  t.dims[r - 2] = m;
  t.dims[r - 1] = n;
  const int64_t batches = elements_after(t.dims, 0) / (m * n);
  t.values.assign(static_cast<size_t>(batches * m * n), 0.0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rest = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t d = r - 2; d-- > 0;) {
      const int64_t coord = rest % t.dims[d];
      rest /= t.dims[d];
      oa += (ad[d] == 1 ? 0 : coord) * sa;
      ob += (bd[d] == 1 ? 0 : coord) * sb;
      sa *= ad[d];
      sb *= bd[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += a.values[static_cast<size_t>(oa * m * k + i * k + p)] * b.values[static_cast<size_t>(ob * k * n + p * n + j)];
        }
        t.values[static_cast<size_t>((bi * m + i) * n + j)] = sum;
      }
  }
  return t;
}

// Calls f(extent, at) for every line of `x` along `axis` (negative: from the end), at(e) giving the
// flat index of the line's element e.
template <class F>
void for_each_line(const ConstTensor& x, int64_t axis, const char* op, F&& f) {
  const auto rank = static_cast<int64_t>(x.dims.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) invalid(cat(op, " axis out of range"));
  const int64_t extent = x.dims[static_cast<size_t>(axis)];
  const int64_t inner = elements_after(x.dims, static_cast<size_t>(axis) + 1);
  const int64_t outer = elements_after(x.dims, 0) / std::max<int64_t>(1, extent * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      f(extent, [&](int64_t e) { return static_cast<size_t>((o * extent + e) * inner + i); });
    }
}

ConstTensor cumsum(const onnx::NodeProto& node, const ConstTensor& x, const ConstTensor& axis_tensor) {
  const bool exclusive = attr_int(node, "exclusive", 0) != 0, reverse = attr_int(node, "reverse", 0) != 0;
  ConstTensor t = x;
  for_each_line(x, axis_tensor.ints().at(0), "CumSum", [&](int64_t extent, const auto& at) {
    double sum = 0;
    for (int64_t s = 0; s < extent; ++s) {
      const size_t i = at(reverse ? extent - 1 - s : s);
      const double v = x.values[i];
      if (!exclusive) sum += v;
      t.values[i] = sum;
      if (exclusive) sum += v;
    }
  });
  return t;
}

// Softmax of constants over one axis (ConViT's positional attention of constant positions).
ConstTensor softmax(const onnx::NodeProto& node, const ConstTensor& x) {
  ConstTensor t = x;
  for_each_line(x, attr_int(node, "axis", -1), "Softmax", [&](int64_t extent, const auto& at) {
    double top = -INFINITY, sum = 0;
    for (int64_t e = 0; e < extent; ++e) top = std::max(top, x.values[at(e)]);
    for (int64_t e = 0; e < extent; ++e) sum += std::exp(x.values[at(e)] - top);
    for (int64_t e = 0; e < extent; ++e) t.values[at(e)] = std::exp(x.values[at(e)] - top) / sum;
  });
  return t;
}

// Einsum of one or two constants with an explicit output (MaxViT's relative position tables).
ConstTensor einsum(const onnx::NodeProto& node, const ConstTensor& a, const ConstTensor* b) {
  std::string eq = attr_string(node, "equation");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->"), comma = eq.find(',');
  if (arrow == std::string::npos || eq.find('.') != std::string::npos) invalid("Einsum needs an explicit output");
  const std::string la = eq.substr(0, std::min(comma, arrow));
  const std::string lb = comma < arrow ? eq.substr(comma + 1, arrow - comma - 1) : "";
  const std::string out = eq.substr(arrow + 2);
  if (la.size() != a.dims.size() || (b && lb.size() != b->dims.size()) || (!b && !lb.empty())) {
    invalid("Einsum operands do not match the equation");
  }
  // Every letter's extent; the letters summed over are those not in the output.
  std::string letters = out;
  std::map<char, int64_t> extent;
  for (size_t i = 0; i < la.size(); ++i) extent[la[i]] = a.dims[i];
  for (size_t i = 0; i < lb.size(); ++i) extent[lb[i]] = b->dims[i];
  for (const auto& [c, e] : extent)
    if (out.find(c) == std::string::npos) letters += c;
  ConstTensor t = a;
  t.dims.clear();
  for (char c : out) t.dims.push_back(extent.at(c));
  const int64_t outputs = elements_after(t.dims, 0);
  int64_t summed = 1;
  for (size_t i = out.size(); i < letters.size(); ++i) summed *= extent.at(letters[i]);
  t.values.assign(static_cast<size_t>(outputs), 0.0);
  std::vector<int64_t> coord(letters.size());
  const auto offset = [&](const std::string& l, const std::vector<int64_t>& dims) {
    int64_t at = 0;
    for (size_t i = 0; i < l.size(); ++i) at = at * dims[i] + coord[letters.find(l[i])];
    return static_cast<size_t>(at);
  };
  for (int64_t o = 0; o < outputs; ++o) {
    for (int64_t s = 0; s < summed; ++s) {
      int64_t rest = o;
      for (size_t i = out.size(); i-- > 0;) {
        coord[i] = rest % extent.at(letters[i]);
        rest /= extent.at(letters[i]);
      }
      rest = s;
      for (size_t i = letters.size(); i-- > out.size();) {
        coord[i] = rest % extent.at(letters[i]);
        rest /= extent.at(letters[i]);
      }
      double v = a.values[offset(la, a.dims)];
      if (b) v *= b->values[offset(lb, b->dims)];
      t.values[static_cast<size_t>(o)] += v;
    }
  }
  return t;
}

// ONNX Conv of constants, 1-D or 2-D (N x C x [H x] W), in double precision: explicit pads or
// auto_pad, strides, dilations, groups, an optional bias.
ConstTensor conv(const onnx::NodeProto& node, const ConstTensor& x, const ConstTensor& w,
                 const ConstTensor* bias) {
  const size_t spatial = x.dims.size() < 3 ? 0 : x.dims.size() - 2;
  if (spatial < 1 || spatial > 2 || w.dims.size() != x.dims.size()) {
    invalid("Conv of constants: only 1-D and 2-D convolutions are folded");
  }
  // Both as 2-D: a 1-D convolution has height 1.
  const auto two_d = [&](const std::vector<int64_t>& v, int64_t fill) {
    return spatial == 2 ? v : std::vector<int64_t>{fill, v.at(0)};
  };
  const std::vector<int64_t> in_hw = two_d({x.dims.begin() + 2, x.dims.end()}, 1);
  const std::vector<int64_t> k_hw = two_d({w.dims.begin() + 2, w.dims.end()}, 1);
  std::vector<int64_t> strides = attr_ints(node, "strides"), dilations = attr_ints(node, "dilations");
  strides = strides.empty() ? std::vector<int64_t>{1, 1} : two_d(strides, 1);
  dilations = dilations.empty() ? std::vector<int64_t>{1, 1} : two_d(dilations, 1);
  const int64_t groups = attr_int(node, "group", 1);
  const int64_t n = x.dims[0], c = x.dims[1], m = w.dims[0];
  if (groups < 1 || c % groups != 0 || m % groups != 0 || w.dims[1] != c / groups) {
    invalid("Conv of constants: weight channels do not match the input's and the groups");
  }
  if (bias && bias->numel() != m) invalid("Conv of constants: the bias needs one value per output channel");
  // pads as {top, left, bottom, right}
  std::vector<int64_t> pads(4, 0);
  const std::string auto_pad = attr_string(node, "auto_pad");
  std::vector<int64_t> out_hw(2);
  for (size_t d = 0; d < 2; ++d) {
    const int64_t span = (k_hw[d] - 1) * dilations[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out_hw[d] = (in_hw[d] + strides[d] - 1) / strides[d];
      const int64_t total = std::max<int64_t>(0, (out_hw[d] - 1) * strides[d] + span - in_hw[d]);
      const int64_t small = total / 2;
      pads[d] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[d + 2] = total - pads[d];
    } else {
      if (auto_pad != "" && auto_pad != "NOTSET" && auto_pad != "VALID") {
        invalid(cat("Conv of constants: auto_pad ", auto_pad, " is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"));
      }
      if (auto_pad != "VALID") {
        const std::vector<int64_t> given = attr_ints(node, "pads");
        if (!given.empty()) {
          const std::vector<int64_t> p = spatial == 2 ? given : std::vector<int64_t>{0, given.at(0), 0, given.at(1)};
          pads = p;
        }
      }
      out_hw[d] = (in_hw[d] + pads[d] + pads[d + 2] - span) / strides[d] + 1;
    }
    if (out_hw[d] < 1) invalid("Conv of constants: the kernel is larger than the padded input");
  }
  ConstTensor t = x.like();
  t.dims = {n, m};
  if (spatial == 2) t.dims.insert(t.dims.end(), out_hw.begin(), out_hw.end());
  else t.dims.push_back(out_hw[1]);
  t.values.assign(static_cast<size_t>(n * m * out_hw[0] * out_hw[1]), 0.0);
  const int64_t cg = c / groups, mg = m / groups;
  const auto at = [](const std::vector<double>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o) {
      const int64_t g = o / mg;
      for (int64_t oy = 0; oy < out_hw[0]; ++oy)
        for (int64_t ox = 0; ox < out_hw[1]; ++ox) {
          double sum = bias ? at(bias->values, o) : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < k_hw[0]; ++ky) {
              const int64_t iy = oy * strides[0] - pads[0] + ky * dilations[0];
              if (iy < 0 || iy >= in_hw[0]) continue;
              for (int64_t kx = 0; kx < k_hw[1]; ++kx) {
                const int64_t ix = ox * strides[1] - pads[1] + kx * dilations[1];
                if (ix < 0 || ix >= in_hw[1]) continue;
                sum += at(x.values, ((b * c + g * cg + ci) * in_hw[0] + iy) * in_hw[1] + ix) *
                       at(w.values, ((o * cg + ci) * k_hw[0] + ky) * k_hw[1] + kx);
              }
            }
          t.values[static_cast<size_t>(((b * m + o) * out_hw[0] + oy) * out_hw[1] + ox)] = sum;
        }
    }
  return t;
}

// ONNX Tile of a constant: each dimension repeated `repeats` times (XCiT's positional encoding,
// repeated for the batch).
ConstTensor tile(const ConstTensor& x, const std::vector<int64_t>& repeats) {
  if (repeats.size() != x.dims.size()) invalid("Tile needs one repeat count per dimension");
  ConstTensor t = x.like();
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) invalid("Tile repeat counts must not be negative");
    t.dims[d] = x.dims[d] * repeats[d];
  }
  t.values.assign(static_cast<size_t>(elements_after(t.dims, 0)), 0.0);
  for (int64_t i = 0; i < static_cast<int64_t>(t.values.size()); ++i) {
    int64_t rest = i, from = 0, stride = 1;
    for (size_t d = t.dims.size(); d-- > 0;) {
      from += (rest % t.dims[d]) % x.dims[d] * stride;
      rest /= t.dims[d];
      stride *= x.dims[d];
    }
    t.values[static_cast<size_t>(i)] = x.values[static_cast<size_t>(from)];
  }
  return t;
}

}  // namespace

std::optional<ConstTensor> fold_tables(const onnx::NodeProto& node, const ConstTensor& x,
                                       const ConstTensor* second, const ConstTensor* third) {
  const std::string& op = node.op_type();
  if (op == "Softmax") return softmax(node, x);
  if (op == "Einsum") return einsum(node, x, second);
  if (op == "Tile") {
    if (!second) invalid("Tile needs its repeat counts");
    return tile(x, second->ints());
  }
  if (op == "Conv") {
    if (!second) invalid("Conv needs its weights");
    return conv(node, x, *second, third);
  }
  if (op == "GatherElements" || op == "ScatterElements") {
    if (!second || (op == "ScatterElements" && !third)) invalid(cat(op, " needs all its inputs"));
    return by_elements(node, x, *second, op == "ScatterElements" ? third : nullptr);
  }
  if (op != "GatherND" && op != "ScatterND" && op != "MatMul" && op != "CumSum") return std::nullopt;
  if (!second || (op == "ScatterND" && !third)) invalid(cat(op, " needs all its inputs"));
  if (op == "GatherND") return gather_nd(node, x, *second);
  if (op == "ScatterND") return scatter_nd(node, x, *second, *third);
  if (op == "MatMul") return matmul(x, *second);
  return cumsum(node, x, *second);
}

}  // namespace stagecraft::graph::onnx_import
