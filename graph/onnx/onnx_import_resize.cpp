// The ONNX importer's Resize translator (the importer reads opsets 11+): the spatial resamplings
// PyTorch exports (interpolate / nn.Upsample, "nearest" and "bilinear" without
// align_corners) become a resize op; other coordinate rules are refused, naming the attribute.
#include <cmath>

#include "common/strings.h"
#include "graph/onnx/onnx_importer.h"

namespace stagecraft::graph::onnx_import {

namespace {

bool whole(double v) { return v >= 1 && std::floor(v) == v; }

}  // namespace

void Importer::resize(const onnx::NodeProto& node) {
  const ValueId x = input(node, 0);
  const Shape& in = shape(x);
  if (in.rank() != 4) fail(node, "only resizing of a 4-D (N, C, H, W) tensor is supported");
  std::string mode = attr_string(node, "mode");
  if (mode.empty()) mode = "nearest";
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    fail(node, cat("mode '", mode, "' is not supported (nearest, linear, cubic)"));
  }
  if (mode == "cubic" && (attr_float(node, "cubic_coeff_a", -0.75f) != -0.75f || attr_int(node, "exclude_outside", 0) != 0)) {
    fail(node, "cubic resizing is supported with cubic_coeff_a -0.75 and exclude_outside 0 (PyTorch's bicubic)");
  }
  std::string transform = attr_string(node, "coordinate_transformation_mode");
  if (transform.empty()) transform = "half_pixel";
  std::string nearest = attr_string(node, "nearest_mode");
  if (nearest.empty()) nearest = "round_prefer_floor";
  if (attr_int(node, "antialias", 0) != 0) fail(node, "antialias is not supported");
  const std::string policy = attr_string(node, "keep_aspect_ratio_policy");
  if (!policy.empty() && policy != "stretch") fail(node, cat("keep_aspect_ratio_policy '", policy, "' is not supported"));

  // Scales (input 2) or sizes (input 3) per axis: all four, or H and W when `axes` says so.
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  if (has_input(node, 2) && !constant_floats(node, 2, "scales").empty()) {
    scales = constant_floats(node, 2, "scales");
  } else if (has_input(node, 3)) {
    sizes = constant_ints(node, 3, "sizes");
  } else {
    fail(node, "neither scales nor sizes are given");
  }
  const std::vector<int64_t> axes = attr_ints(node, "axes");
  if (!axes.empty()) {
    const bool hw = axes.size() == 2 && (axes[0] == 2 || axes[0] == -2) && (axes[1] == 3 || axes[1] == -1);
    if (!hw) fail(node, "only axes [2, 3] (H and W) are supported");
    if (!scales.empty()) scales = {1, 1, scales.at(0), scales.at(1)};
    if (!sizes.empty()) sizes = {in[0], in[1], sizes.at(0), sizes.at(1)};
  }
  if (!scales.empty() && (scales.size() != 4 || scales[0] != 1 || scales[1] != 1)) {
    fail(node, "only H and W may be scaled (scales of N and C must be 1)");
  }
  if (!sizes.empty() && (sizes.size() != 4 || sizes[0] != in[0] || sizes[1] != in[1])) {
    fail(node, "only H and W may be resized (sizes of N and C must be the input's)");
  }
  ResizeAttrs a;
  if (!scales.empty()) {  // the output size in float arithmetic, as ONNX Runtime computes it
    a.size = {static_cast<int64_t>(std::floor(static_cast<float>(in[2]) * scales[2])),
              static_cast<int64_t>(std::floor(static_cast<float>(in[3]) * scales[3]))};
    a.scale_h = scales[2];
    a.scale_w = scales[3];
  } else {
    a.size = {sizes[2], sizes[3]};
    a.scale_h = static_cast<double>(sizes[2]) / static_cast<double>(in[2]);
    a.scale_w = static_cast<double>(sizes[3]) / static_cast<double>(in[3]);
  }
  if (a.size.h <= 0 || a.size.w <= 0) fail(node, "the output would be empty");

  // The coordinate rules the resize op computes (see ResizeAttrs).
  const bool half_pixel = transform == "half_pixel" || transform == "pytorch_half_pixel";
  if (mode == "linear" && transform == "align_corners") {
    a.linear = a.align_corners = true;
  } else if (mode == "linear" || mode == "cubic") {
    if (!half_pixel) {
      fail(node, cat(mode, " resizing with coordinate_transformation_mode '", transform,
                     "' is not supported (half_pixel or pytorch_half_pixel: PyTorch's align_corners=False; linear also align_corners)"));
    }
    if (transform == "pytorch_half_pixel" && (a.size.h == 1 || a.size.w == 1)) {
      fail(node, "pytorch_half_pixel resizing to a size of 1 is not supported");
    }
    a.linear = mode == "linear";
    a.cubic = mode == "cubic";
  } else {
    // floor(y / scale) is what asymmetric + floor computes, and what half_pixel computes with
    // any rounding when both scales are whole numbers (the offset stays inside (-0.5, 0.5)).
    const bool floor_rule = transform == "asymmetric" && nearest == "floor";
    const bool whole_upsampling = half_pixel && whole(a.scale_h) && whole(a.scale_w);
    if (!floor_rule && !whole_upsampling) {
      fail(node, cat("nearest resizing with coordinate_transformation_mode '", transform, "' and nearest_mode '",
                     nearest, "' is not supported (asymmetric with floor, as PyTorch exports, or whole "
                     "upsampling factors)"));
    }
  }
  define(node, 0, add(node, OpKind::kResize, a, {x}));
}

}  // namespace stagecraft::graph::onnx_import
