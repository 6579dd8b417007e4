// Constant folding of the ops that select elements by their values (NonZero, NonMaxSuppression:
// their output shapes depend on the data, so a data-dependent tail evaluates them after each run)
// and of Pad in every mode.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "common/strings.h"
#include "frontend/onnx/onnx_constants.h"

namespace stagecraft::graph::onnx_import {

namespace {

using onnx::TensorProto;

[[noreturn]] void invalid(const std::string& why) { throw std::runtime_error(why); }

// The int64 [rank, count] coordinates of the nonzero elements, in row-major order.
ConstTensor non_zero(const ConstTensor& x) {
  if (x.dims.empty()) invalid("NonZero of a scalar (rank 0) is not supported");
  const size_t rank = x.dims.size();
  const std::vector<int64_t> strides = strides_of(x.dims);
  std::vector<int64_t> hits;
  for (size_t i = 0; i < x.values.size(); ++i) {
    if (x.values[i] != 0) hits.push_back(static_cast<int64_t>(i));
  }
  const size_t n = hits.size();
  std::vector<int64_t> out(rank * n);
  for (size_t k = 0; k < n; ++k) {
    for (size_t d = 0; d < rank; ++d) out[d * n + k] = hits[k] / strides[d] % x.dims[d];
  }
  return ConstTensor::of_ints(std::move(out), {static_cast<int64_t>(rank), static_cast<int64_t>(n)});
}

// A box's extent along one axis from two corner coordinates in either order.
struct Extent {
  float lo, hi;
};
Extent extent_of(float a, float b) { return a < b ? Extent{a, b} : Extent{b, a}; }

// Whether box b overlaps box a by more than `threshold` (intersection over union, in float as
// ONNX Runtime computes it; an empty box or intersection suppresses nothing).
bool overlaps(const float* a, const float* b, bool center, float threshold) {
  Extent ax, ay, bx, by;
  if (center) {  // [x_center, y_center, width, height]
    ax = {a[0] - a[2] / 2, a[0] + a[2] / 2};
    ay = {a[1] - a[3] / 2, a[1] + a[3] / 2};
    bx = {b[0] - b[2] / 2, b[0] + b[2] / 2};
    by = {b[1] - b[3] / 2, b[1] + b[3] / 2};
  } else {  // [y1, x1, y2, x2], corners in any order
    ay = extent_of(a[0], a[2]);
    ax = extent_of(a[1], a[3]);
    by = extent_of(b[0], b[2]);
    bx = extent_of(b[1], b[3]);
  }
  const float ix = std::min(ax.hi, bx.hi) - std::max(ax.lo, bx.lo);
  const float iy = std::min(ay.hi, by.hi) - std::max(ay.lo, by.lo);
  if (ix <= 0 || iy <= 0) return false;
  const float inter = ix * iy;
  const float area_a = (ax.hi - ax.lo) * (ay.hi - ay.lo);
  const float area_b = (bx.hi - bx.lo) * (by.hi - by.lo);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

// NonMaxSuppression: per batch and class, boxes by descending score (the lower index first among
// equal scores), each kept unless it overlaps one kept before; int64 [count, 3] (batch, class, box).
ConstTensor non_max_suppression(const onnx::NodeProto& node, const std::vector<FoldInput>& in) {
  const ConstTensor* boxes = constant_at(in, 0);
  const ConstTensor* scores = constant_at(in, 1);
  if (!boxes || !scores) invalid("NonMaxSuppression needs boxes and scores");
  if (boxes->dims.size() != 3 || boxes->dims[2] != 4) {
    invalid(cat("boxes must be [batches, boxes, 4], got [", join(boxes->dims, ", "), "]"));
  }
  if (scores->dims.size() != 3 || scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1]) {
    invalid(cat("scores must be [batches, classes, boxes] = [", boxes->dims[0], ", C, ", boxes->dims[1], "], got [",
                join(scores->dims, ", "), "]"));
  }
  const int64_t center = attr_int(node, "center_point_box", 0);
  if (center != 0 && center != 1) invalid(cat("center_point_box must be 0 or 1, got ", center));
  const ConstTensor* max_c = constant_at(in, 2);
  const ConstTensor* iou_c = constant_at(in, 3);
  const ConstTensor* score_c = constant_at(in, 4);
  const int64_t max_per_class = max_c && !max_c->values.empty() ? std::max<int64_t>(0, max_c->ints()[0]) : 0;
  const float iou = iou_c && !iou_c->values.empty() ? static_cast<float>(iou_c->values[0]) : 0.0f;
  if (!(iou >= 0 && iou <= 1)) invalid(cat("iou_threshold must be in [0, 1], got ", iou));
  const bool thresholded = score_c && !score_c->values.empty();
  const float score_threshold = thresholded ? static_cast<float>(score_c->values[0]) : 0.0f;
  const int64_t batches = boxes->dims[0], classes = scores->dims[1], n = boxes->dims[1];
  const std::vector<float> box = boxes->floats();
  const std::vector<float> score = scores->floats();
  std::vector<int64_t> out;
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batches && max_per_class > 0; ++b) {
    const float* bb = box.data() + b * n * 4;
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = score.data() + (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (!thresholded || s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(), [s](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return overlaps(bb + k * 4, bb + i * 4, center == 1, iou);
        });
        if (suppressed) continue;
        kept.push_back(i);
        out.insert(out.end(), {b, c, i});
      }
    }
  }
  const auto count = static_cast<int64_t>(out.size() / 3);
  return ConstTensor::of_ints(std::move(out), {count, 3});
}

// Index `i` of an axis of `n` elements, outside it by the mode's rule; -1: the constant.
int64_t padded_index(int64_t i, int64_t n, const std::string& mode) {
  if (i >= 0 && i < n) return i;
  if (mode == "constant" || n == 0) return -1;
  if (mode == "edge") return std::clamp(i, int64_t{0}, n - 1);
  if (mode == "wrap") return ((i % n) + n) % n;
  // reflect: mirrored about the first and last elements (not repeating them)
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t r = ((i % period) + period) % period;
  return r < n ? r : period - r;
}

ConstTensor pad(const onnx::NodeProto& node, const std::vector<FoldInput>& in, int64_t opset) {
  const ConstTensor& x = *constant_at(in, 0);
  const size_t rank = x.dims.size();
  std::string mode = attr_string(node, "mode");
  if (mode.empty()) mode = "constant";
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    invalid(cat("unknown Pad mode '", mode, "'"));
  }
  std::vector<int64_t> pads;
  double value = 0;
  std::vector<int64_t> axes;
  if (opset < 11) {
    pads = attr_ints(node, "pads");
    value = attr_float(node, "value", 0.0f);
  } else {
    if (!constant_at(in, 1)) invalid("Pad needs its pads");
    pads = constant_at(in, 1)->ints();
    if (const ConstTensor* v = constant_at(in, 2); v && !v->values.empty()) value = v->values[0];
    if (const ConstTensor* a = constant_at(in, 3)) axes = a->ints();
  }
  if (axes.empty()) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), int64_t{0});
  }
  if (pads.size() != 2 * axes.size()) {
    invalid(cat("pads has ", pads.size(), " values; ", axes.size(), " axes need ", 2 * axes.size()));
  }
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = axes[k] < 0 ? axes[k] + static_cast<int64_t>(rank) : axes[k];
    if (a < 0 || a >= static_cast<int64_t>(rank)) invalid(cat("axis ", axes[k], " is outside rank ", rank));
    before[static_cast<size_t>(a)] = pads[k];
    after[static_cast<size_t>(a)] = pads[k + axes.size()];
  }
  // Negative pads crop first; the positive ones then pad what is left (ONNX Runtime's order, which
  // decides what edge, reflect and wrap repeat).
  std::vector<int64_t> first(rank), kept(rank);
  ConstTensor out;
  out.kind = x.kind;
  out.onnx_type = x.onnx_type;
  out.dims.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    first[d] = std::max<int64_t>(0, -before[d]);
    kept[d] = x.dims[d] - first[d] - std::max<int64_t>(0, -after[d]);
    if (kept[d] < 0) invalid(cat("pads remove more than axis ", d, " holds"));
    before[d] = std::max<int64_t>(0, before[d]);
    out.dims[d] = kept[d] + before[d] + std::max<int64_t>(0, after[d]);
    if (kept[d] == 0 && out.dims[d] > 0 && mode != "constant") {
      invalid(cat("mode '", mode, "' pads an empty axis ", d));
    }
  }
  const int64_t total = product(out.dims);
  const std::vector<int64_t> os = strides_of(out.dims), xs = strides_of(x.dims);
  out.values.resize(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < rank && src >= 0; ++d) {
      const int64_t j = padded_index(i / os[d] % out.dims[d] - before[d], kept[d], mode);
      src = j < 0 ? -1 : src + (first[d] + j) * xs[d];
    }
    out.values[static_cast<size_t>(i)] = src < 0 ? value : x.values[static_cast<size_t>(src)];
  }
  return out;
}

}  // namespace

std::optional<ConstTensor> fold_selection(const onnx::NodeProto& node, const std::vector<FoldInput>& in,
                                          int64_t opset) {
  const std::string& op = node.op_type();
  if (op == "NonZero") return non_zero(*constant_at(in, 0));
  if (op == "NonMaxSuppression") return non_max_suppression(node, in);
  if (op == "Pad") return pad(node, in, opset);
  return std::nullopt;
}

}  // namespace stagecraft::graph::onnx_import
