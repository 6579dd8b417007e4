// The ONNX importer's Resize translator (the importer reads opsets 11+). The spatial resamplings
// PyTorch exports (interpolate / nn.Upsample: nearest, bilinear with or without align_corners,
// bicubic) of a 4-D tensor become a resize op, which runs on the convolutions' layouts; every
// other Resize (any rank and axes, coordinate rule, nearest rounding, cubic coefficient,
// exclude_outside, antialias, keep_aspect_ratio_policy, tf_crop_and_resize's region) becomes a
// resize_nd of a row-major tensor, ONNX's definition in full.
#include <cmath>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

namespace {

bool whole(double v) { return v >= 1 && std::floor(v) == v; }

// The index of `value` in `names`, or -1.
int64_t index_of(const std::string& value, std::initializer_list<const char*> names) {
  int64_t i = 0;
  for (const char* n : names) {
    if (value == n) return i;
    ++i;
  }
  return -1;
}

// Whether the resize op (PyTorch's modes on the convolutions' layouts) computes `a` on a 4-D
// tensor `dims`: N and C unchanged, and the rules ResizeAttrs implements.
bool pytorch_resize(const ResizeNdAttrs& a, const std::vector<int64_t>& dims) {
  if (dims.size() != 4 || a.sizes[0] != dims[0] || a.sizes[1] != dims[1] || a.scales[0] != 1 || a.scales[1] != 1) return false;
  if (a.antialias || a.exclude_outside || a.transform == 5) return false;
  const bool half_pixel = a.transform == 0 || a.transform == 2;
  if (a.transform == 2 && (a.sizes[2] == 1 || a.sizes[3] == 1)) return false;
  if (a.mode == 1) return half_pixel || a.transform == 3;  // bilinear, with or without align_corners
  if (a.mode == 2) return half_pixel && a.cubic_a == -0.75;  // PyTorch's bicubic
  // nearest: floor(y / scale), which asymmetric + floor computes, and half_pixel with any rounding
  // when both scales are whole numbers (the offset stays inside (-0.5, 0.5)).
  return (a.transform == 4 && a.nearest == 2) || (half_pixel && whole(a.scales[2]) && whole(a.scales[3]));
}

}  // namespace

ResizeNdAttrs Importer::resize_attrs(const onnx::NodeProto& node, const std::vector<int64_t>& dims) const {
  const auto rank = static_cast<int64_t>(dims.size());
  ResizeNdAttrs a;
  std::string mode = attr_string(node, "mode");
  a.mode = index_of(mode.empty() ? "nearest" : mode, {"nearest", "linear", "cubic"});
  if (a.mode < 0) fail(node, cat("mode '", mode, "' is not nearest, linear or cubic"));
  std::string transform = attr_string(node, "coordinate_transformation_mode");
  if (transform.empty()) transform = "half_pixel";
  a.transform = index_of(transform, {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_crop_and_resize"});
  if (a.transform < 0) fail(node, cat("coordinate_transformation_mode '", transform, "' is not supported"));
  std::string nearest = attr_string(node, "nearest_mode");
  a.nearest = index_of(nearest.empty() ? "round_prefer_floor" : nearest, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  if (a.nearest < 0) fail(node, cat("nearest_mode '", nearest, "' is not supported"));
  a.cubic_a = attr_float(node, "cubic_coeff_a", -0.75f);
  a.exclude_outside = attr_int(node, "exclude_outside", 0) != 0;
  a.antialias = attr_int(node, "antialias", 0) != 0;
  if (a.antialias && a.mode == 0) fail(node, "antialias applies to linear and cubic resizing, not nearest");
  a.extrapolation = attr_float(node, "extrapolation_value", 0.0f);
  std::string policy = attr_string(node, "keep_aspect_ratio_policy");
  if (policy.empty()) policy = "stretch";
  if (index_of(policy, {"stretch", "not_larger", "not_smaller"}) < 0) {
    fail(node, cat("keep_aspect_ratio_policy '", policy, "' is not stretch, not_larger or not_smaller"));
  }

  // The axes that scales, sizes and the region name (every axis when `axes` is absent).
  std::vector<int64_t> axes = attr_ints(node, "axes");
  for (int64_t& ax : axes) ax = ax < 0 ? ax + rank : ax;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t ax : axes) {
    if (ax < 0 || ax >= rank) fail(node, cat("axes: ", ax, " is outside the input's ", rank, " axes"));
  }
  const size_t n = axes.size();
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  if (has_input(node, 2) && !constant_floats(node, 2, "scales").empty()) {
    scales = constant_floats(node, 2, "scales");
    if (scales.size() != n) fail(node, cat("scales has ", scales.size(), " values for ", n, " axes"));
  } else if (has_input(node, 3)) {
    sizes = constant_ints(node, 3, "sizes");
    if (sizes.size() != n) fail(node, cat("sizes has ", sizes.size(), " values for ", n, " axes"));
  } else {
    fail(node, "neither scales nor sizes are given");
  }
  a.sizes = dims;
  a.scales.assign(dims.size(), 1.0);
  if (!scales.empty()) {  // the output size in float arithmetic, as ONNX Runtime computes it
    for (size_t i = 0; i < n; ++i) {
      const auto ax = static_cast<size_t>(axes[i]);
      a.scales[ax] = scales[i];
      a.sizes[ax] = static_cast<int64_t>(std::floor(static_cast<float>(dims[ax]) * scales[i]));
    }
  } else {
    double keep = policy == "not_larger" ? 1e300 : 0;
    for (size_t i = 0; i < n; ++i) {
      const double s = static_cast<double>(sizes[i]) / static_cast<double>(dims[static_cast<size_t>(axes[i])]);
      keep = policy == "not_larger" ? std::min(keep, s) : std::max(keep, s);
    }
    for (size_t i = 0; i < n; ++i) {
      const auto ax = static_cast<size_t>(axes[i]);
      const double s = policy == "stretch" ? static_cast<double>(sizes[i]) / static_cast<double>(dims[ax]) : keep;
      a.scales[ax] = s;
      a.sizes[ax] = policy == "stretch" ? sizes[i] : static_cast<int64_t>(s * static_cast<double>(dims[ax]) + 0.5);
    }
  }
  for (int64_t s : a.sizes) {
    if (s <= 0) fail(node, "the output would be empty");
  }
  if (a.transform == 5) {  // the region, starts then ends, of the axes named; whole elsewhere
    const std::vector<float> roi = has_input(node, 1) ? constant_floats(node, 1, "roi") : std::vector<float>{};
    if (roi.size() != 2 * n) fail(node, cat("tf_crop_and_resize needs a region (roi) of ", 2 * n, " values"));
    a.roi.assign(dims.size(), 0.0);
    a.roi.resize(2 * dims.size(), 1.0);
    for (size_t i = 0; i < n; ++i) {
      a.roi[static_cast<size_t>(axes[i])] = roi[i];
      a.roi[dims.size() + static_cast<size_t>(axes[i])] = roi[n + i];
    }
  }
  return a;
}

void Importer::resize(const onnx::NodeProto& node) {
  if (const ConstTensor* c = constant(node, 0)) {
    // A constant resized (DETR's padding mask to each feature map's size): a constant.
    const ResizeNdAttrs a = resize_attrs(node, c->dims);
    const std::vector<float> given = c->floats();
    std::vector<double> v(given.begin(), given.end());
    std::vector<int64_t> dims = c->dims;
    for (size_t axis = 0; axis < dims.size(); ++axis) {
      const ResizeTaps taps = resize_taps(a, axis, dims[axis]);
      if (taps.identity) continue;
      const int64_t outer = product(dims, 0, axis), inner = product(dims, axis + 1, dims.size());
      const int64_t out = a.sizes[axis];
      std::vector<double> next(static_cast<size_t>(outer * out * inner));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < out; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            double sum = 0;
            const auto& index = taps.index[static_cast<size_t>(j)];
            for (size_t t = 0; t < index.size(); ++t) {
              sum += taps.weight[static_cast<size_t>(j)][t] * v[static_cast<size_t>((o * dims[axis] + index[t]) * inner + i)];
            }
            next[static_cast<size_t>((o * out + j) * inner + i)] = taps.outside[static_cast<size_t>(j)] ? a.extrapolation : sum;
          }
      v = std::move(next);
      dims[axis] = out;
    }
    constants_[node.output(0)] = ConstTensor::of_floats(std::vector<float>(v.begin(), v.end()), dims);
    return;
  }
  const bool rank4 = rank_of(node.input(0)) == 4u && !is_row_major(input(node, 0));
  const ValueId x = rank4 ? input(node, 0) : row_major(node, 0);
  const std::vector<int64_t> dims = dims_of(shape(x));
  const ResizeNdAttrs a = resize_attrs(node, dims);
  if (rank4 && pytorch_resize(a, dims)) {
    ResizeAttrs r;
    r.size = {a.sizes[2], a.sizes[3]};
    r.scale_h = a.scales[2];
    r.scale_w = a.scales[3];
    r.linear = a.mode == 1;
    r.cubic = a.mode == 2;
    r.align_corners = a.mode == 1 && a.transform == 3;
    return define(node, 0, add(node, OpKind::kResize, r, {x}));
  }
  const ValueId rows = rank4 ? row_major(node, 0) : x;
  define_row_major(node, add(node, OpKind::kResizeNd, a, {rows}));
}

}  // namespace stagecraft::graph::onnx_import
