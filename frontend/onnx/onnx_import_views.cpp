// The ONNX importer's views: reshapes, squeezes, transposes and gathers that keep a tensor's
// elements (a graph value seen with another shape until it is shaped back), channel shuffles and
// channel selections.
#include <algorithm>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

Importer::PendingView Importer::view_of(const onnx::NodeProto& node) const {
  if (auto it = pending_views_.find(node.input(0)); it != pending_views_.end()) return it->second;
  const ValueId x = input(node, 0);
  return PendingView{x, shape(x).dims(), 0};
}

void Importer::reshape(const onnx::NodeProto& node) {
  std::vector<int64_t> target = constant_ints(node, 1, "the target shape");
  const PendingView x = view_of(node);
  const bool allowzero = attr_int(node, "allowzero", 0) != 0;
  int64_t known = 1, minus = -1, numel = 1;
  for (int64_t d : x.shape) numel *= d;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero && i < x.shape.size()) target[i] = x.shape[i];
    if (target[i] == -1) minus = static_cast<int64_t>(i);
    else known *= target[i];
  }
  if (minus >= 0 && known > 0) target[static_cast<size_t>(minus)] = numel / known;
  reshape_to(node, x, std::move(target));
}

void Importer::reshape_to(const onnx::NodeProto& node, const PendingView& x, std::vector<int64_t> target) {
  const Shape& base = shape(x.base);
  int64_t numel = 1;
  for (int64_t d : target) numel *= d;
  if (numel != base.numel()) {
    fail(node, cat("reshape of [", join(x.shape, ", "), "] to [", join(target, ", "),
                   "] changes the element count"));
  }
  if (x.space_to_depth > 0) {  // the end of a space-to-depth
    const Shape& s = shape(x.base);
    const int64_t b = x.space_to_depth;
    if (Shape(target) != Shape{s[0], s[1] * b * b, s[2] / b, s[3] / b}) {
      fail(node, cat("a space-to-depth must reshape to [N, C*", b * b, ", H/", b, ", W/", b, "], got [",
                     join(target, ", "), "]"));
    }
    SpaceToDepthAttrs a;
    a.block = b;
    define(node, 0, add(node, OpKind::kSpaceToDepth, a, {x.base}));
    return;
  }
  if (x.shuffle_groups > 0) {  // the end of a channel shuffle
    if (Shape(target) != base) {
      fail(node, cat("a channel shuffle must reshape back to ", base.to_string(), ", got [",
                     join(target, ", "), "]"));
    }
    ChannelShuffleAttrs a;
    a.groups = x.shuffle_groups;
    define(node, 0, add(node, OpKind::kChannelShuffle, a, {x.base}));
    return;
  }
  if (target.size() == 1) {  // every element in a row: a view until it is shaped again
    pending_views_[node.output(0)] = PendingView{x.base, target, 0};
    return;
  }
  if (target.empty() || target[0] != base[0]) {
    if (on_row_major(node)) return;  // a row-major reshape
    fail(node, cat("reshape of [", join(x.shape, ", "), "] to [", join(target, ", "),
                   "] is not supported (the batch dimension must stay first)"));
  }
  if (Shape(target) == base) {
    define(node, 0, x.base);
  } else if (target.size() == 2 || target.size() == 4) {
    ReshapeAttrs a;
    a.dims.assign(target.begin() + 1, target.end());
    define(node, 0, add(node, OpKind::kReshape, a, {x.base}));
  } else {
    pending_views_[node.output(0)] = PendingView{x.base, target, 0};  // rank 3, 5, ...
  }
}

void Importer::transpose(const onnx::NodeProto& node) {
  const PendingView x = view_of(node);
  std::vector<int64_t> perm = attr_ints(node, "perm");
  if (perm.empty()) {  // ONNX's default: the axes reversed
    for (size_t i = x.shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  bool identity = !perm.empty();
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity && x.shape.size() == perm.size()) {
    if (auto it = pending_views_.find(node.input(0)); it != pending_views_.end()) {
      pending_views_[node.output(0)] = it->second;
    } else {
      define(node, 0, x.base);
    }
    return;
  }
  const Shape& base = shape(x.base);
  if (perm == std::vector<int64_t>{0, 2, 3, 1} && x.shape.size() == 4 && !pending_views_.count(node.input(0))) {
    pending_views_[node.output(0)] = PendingView{x.base, {base[0], base[2], base[3], base[1]}, 0, true};
    return;
  }
  // A permutation that keeps the order of the dimensions larger than 1 moves no element: a reshape.
  // Reshape(N, C, H/b, b, W/b, b) -> Transpose(0, 3, 5, 1, 2, 4): a space-to-depth (TResNet).
  if (perm == std::vector<int64_t>{0, 3, 5, 1, 2, 4} && x.space_to_depth == 0 && x.shuffle_groups == 0 &&
      !x.channels_last && base.rank() == 4 && x.shape.size() == 6 && x.shape[3] == x.shape[5] &&
      x.shape[0] == base[0] && x.shape[1] == base[1] && x.shape[2] * x.shape[3] == base[2] &&
      x.shape[4] * x.shape[5] == base[3]) {
    PendingView v{x.base, {x.shape[0], x.shape[3], x.shape[5], x.shape[1], x.shape[2], x.shape[4]}, 0};
    v.space_to_depth = x.shape[3];
    pending_views_[node.output(0)] = v;
    return;
  }
  if (perm.size() == x.shape.size() && x.shuffle_groups == 0 && !x.channels_last && x.space_to_depth == 0) {
    std::vector<int64_t> moved, target;
    for (size_t i = 0; i < perm.size(); ++i) {
      const int64_t d = x.shape[static_cast<size_t>(perm[i])];
      target.push_back(d);
      if (d != 1) moved.push_back(perm[i]);
    }
    if (std::is_sorted(moved.begin(), moved.end())) return reshape_to(node, x, target);
  }
  const bool shuffle = perm == std::vector<int64_t>{0, 2, 1, 3, 4} && x.shuffle_groups == 0 &&
                       base.rank() == 4 && x.shape.size() == 5 && x.shape[0] == base[0] &&
                       x.shape[1] * x.shape[2] == base[1] && x.shape[3] == base[2] &&
                       x.shape[4] == base[3];
  if (!shuffle) {
    if (on_row_major(node)) return;  // real data movement
    fail(node, cat("only Transpose(0, 2, 3, 1) of a 4-D tensor (a channels-last view), "
                   "Transpose(0, 3, 5, 1, 2, 4) of a space-to-depth's 6-D view, a transpose moving only "
                   "dimensions of size 1, and the "
                   "Transpose(0, 2, 1, 3, 4) of a channel shuffle's 5-D view are supported "
                   "(perm [", join(perm, ", "), "] of [", join(x.shape, ", "), "])"));
  }
  pending_views_[node.output(0)] =
      PendingView{x.base, {x.shape[0], x.shape[2], x.shape[1], x.shape[3], x.shape[4]}, x.shape[1]};
}

void Importer::squeeze(const onnx::NodeProto& node) {
  const PendingView x = view_of(node);
  const std::vector<int64_t>& s = x.shape;
  const bool unsqueeze = node.op_type() == "Unsqueeze";
  const auto ax = axes(node, 1);
  std::vector<int64_t> target;
  if (unsqueeze) {
    if (!ax) fail(node, "axes are required");
    const size_t rank = s.size() + ax->size();
    const auto a = normalised_axes(*ax, rank);
    size_t k = 0;
    for (size_t d = 0; d < rank; ++d) {
      target.push_back(std::binary_search(a.begin(), a.end(), static_cast<int64_t>(d)) ? 1 : s[k++]);
    }
  } else {
    const auto a = ax ? normalised_axes(*ax, s.size()) : std::vector<int64_t>{};
    for (size_t d = 0; d < s.size(); ++d) {
      const bool removed = ax ? std::binary_search(a.begin(), a.end(), static_cast<int64_t>(d)) : s[d] == 1;
      if (removed && s[d] != 1) fail(node, cat("cannot squeeze dimension ", d, " of [", join(s, ", "), "]"));
      if (!removed) target.push_back(s[d]);
    }
  }
  reshape_to(node, x, std::move(target));
}

void Importer::gather(const onnx::NodeProto& node) {
  // Every element of a flat view in order (the dynamo exporter's as_strided): a reshape.
  if (auto v = pending_views_.find(node.input(0)); v != pending_views_.end() && v->second.shape.size() == 1) {
    const ConstTensor* idx = constant(node, 1);
    const std::vector<int64_t> order = idx ? idx->ints() : std::vector<int64_t>{};
    bool in_order = idx && static_cast<int64_t>(order.size()) == v->second.shape[0] && attr_int(node, "axis", 0) == 0;
    for (size_t i = 0; in_order && i < order.size(); ++i) in_order = order[i] == static_cast<int64_t>(i);
    if (!in_order) fail(node, "a flattened tensor is gathered only whole and in order (a reshape)");
    return reshape_to(node, v->second, idx->dims);
  }
  // Selecting channels of a 4-D tensor (x[:, c], x[:, [c0, c1]]): channel slices.
  const ValueId x = input(node, 0);
  const ConstTensor* idx = constant(node, 1);
  int64_t axis = attr_int(node, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(shape(x).rank());
  if (!idx || axis != 1 || shape(x).rank() != 4 || idx->dims.size() > 1) {
    // Along another axis (a mask's batch), or by indices of more dimensions: the row-major gather.
    values_[node.input(0)] = row_major(node, 0);
    return narrow_row_major(node);
  }
  const int64_t channels = shape(x)[1];
  std::vector<std::pair<int64_t, int64_t>> runs;  // [begin, end) of consecutive indices
  for (int64_t c : idx->ints()) {
    if (c < 0) c += channels;
    if (c < 0 || c >= channels) fail(node, cat("channel index out of range [0, ", channels, ")"));
    if (!runs.empty() && runs.back().second == c) {
      ++runs.back().second;
    } else {
      runs.emplace_back(c, c + 1);
    }
  }
  std::vector<ValueId> parts;
  for (const auto& [begin, end] : runs) {
    SliceAttrs a;
    a.begin = begin;
    a.end = end;
    parts.push_back(begin == 0 && end == channels ? x : add(node, OpKind::kSlice, a, {x}));
  }
  const ValueId y = parts.size() == 1 ? parts[0] : add(node, OpKind::kConcat, ConcatAttrs{}, parts);
  if (idx->dims.empty()) {  // a scalar index drops the channel axis: [N, H, W], a view
    const Shape& s = shape(y);
    pending_views_[node.output(0)] = PendingView{y, {s[0], s[2], s[3]}, 0};
  } else {
    define(node, 0, y);
  }
}

}  // namespace stagecraft::graph::onnx_import
