// The ONNX importer's expansion of DeformConv (opset 19): each kernel tap samples the input at its
// position plus a learned offset (bilinear, zero outside the image), the samples are weighted by
// the mask, and a convolution with a 1x1 kernel over the taps gives the output. Written as
// GridSample (all taps of an offset group in one grid), Mul and Conv, the ops ONNX's own reference
// uses.
#include <vector>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"

namespace stagecraft::graph::onnx_import {

namespace {

std::string shape_text(const std::vector<int64_t>& dims) { return Shape(dims).to_string(); }

}  // namespace

void Importer::expand_deform_conv(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  if (in.rank != 4) {
    fail(node, cat("only 2-D deformable convolutions (a 4-D input) are supported, got rank ", in.rank));
  }
  const int64_t n = in.dims[0], c = in.dims[1], h = in.dims[2], w = in.dims[3];
  const std::vector<int64_t> wd = dims_at(node, 1);
  const std::vector<int64_t> offset_dims = dims_at(node, 2);
  if (wd.size() != 4) fail(node, "the weight (input 1) must be 4-D [M, C / group, kH, kW]");
  const int64_t out_channels = wd[0], kh = wd[2], kw = wd[3], taps = kh * kw;
  const int64_t group = attr_int(node, "group", 1), offset_group = attr_int(node, "offset_group", 1);
  if (group < 1 || c % group != 0 || out_channels % group != 0 || wd[1] * group != c) {
    fail(node, cat("group ", group, " does not fit ", c, " input channels and a weight of ", shape_text(wd)));
  }
  if (offset_group < 1 || c % offset_group != 0) {
    fail(node, cat("offset_group ", offset_group, " does not divide the ", c, " input channels"));
  }
  // An attribute of two or four values (`fallback` repeated when absent).
  const auto spatial_attr = [&](const char* name, size_t size, int64_t fallback) {
    std::vector<int64_t> v = attr_ints(node, name);
    if (v.empty()) v.assign(size, fallback);
    if (v.size() != size) fail(node, cat(name, " must have ", size, " values, got ", v.size()));
    return v;
  };
  const std::vector<int64_t> kernel = spatial_attr("kernel_shape", 2, 0);
  if (!attr_ints(node, "kernel_shape").empty() && (kernel[0] != kh || kernel[1] != kw)) {
    fail(node, "kernel_shape does not match the weight");
  }
  const std::vector<int64_t> strides = spatial_attr("strides", 2, 1);
  const std::vector<int64_t> dilations = spatial_attr("dilations", 2, 1);
  const std::vector<int64_t> pads = spatial_attr("pads", 4, 0);
  const int64_t oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) / strides[0] + 1;
  const int64_t ow = (w + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) / strides[1] + 1;
  const std::vector<int64_t> expected_offset = {n, 2 * offset_group * taps, oh, ow};
  if (offset_dims != expected_offset) {
    fail(node, cat("the offset is ", shape_text(offset_dims), "; this input, kernel, stride, padding and offset_group need ",
                   shape_text(expected_offset)));
  }
  if (has_input(node, 4) && dims_at(node, 4) != std::vector<int64_t>{n, offset_group * taps, oh, ow}) {
    fail(node, cat("the mask (input 4) must be ", shape_text({n, offset_group * taps, oh, ow})));
  }

  // The grid of each tap: its offsets (dy, dx) as GridSample's (x, y) in its coordinates without
  // align_corners ((2 · pixel + 1) / size - 1): [dy, dx] times [[0, 2 / H], [2 / W, 0]], plus the
  // tap's position.
  const std::string offsets = e.op("Transpose", {e.reshape(node.input(2), {n, offset_group, taps, 2, oh, ow})},
                                   {ints_attr("perm", {0, 1, 2, 4, 5, 3})});
  const float scale_x = 2.0f / static_cast<float>(w), scale_y = 2.0f / static_cast<float>(h);
  const std::string scaled = e.op("MatMul", {offsets, e.floats({0.0f, scale_y, scale_x, 0.0f}, {2, 2})});
  std::vector<float> base(static_cast<size_t>(taps * oh * ow * 2));
  for (int64_t t = 0; t < taps; ++t) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t y = i * strides[0] - pads[0] + (t / kw) * dilations[0];
        const int64_t x = j * strides[1] - pads[1] + (t % kw) * dilations[1];
        const size_t at = static_cast<size_t>(((t * oh + i) * ow + j) * 2);
        base[at] = (2.0f * static_cast<float>(x) + 1.0f) / static_cast<float>(w) - 1.0f;
        base[at + 1] = (2.0f * static_cast<float>(y) + 1.0f) / static_cast<float>(h) - 1.0f;
      }
    }
  }
  const std::string grid = e.reshape(e.op("Add", {scaled, e.floats(base, {1, 1, taps, oh, ow, 2})}),
                                     {n * offset_group, taps * oh, ow, 2});
  // Each offset group's channels sampled by its grid: [N · G, C / G, taps · oH, oW].
  const std::string x = e.reshape(node.input(0), {n * offset_group, c / offset_group, h, w});
  std::string samples = e.op("GridSample", {x, grid},
                             {string_attr("mode", opset_ >= 20 ? "linear" : "bilinear"),
                              string_attr("padding_mode", "zeros"), int_attr("align_corners", 0)});
  if (has_input(node, 4)) {
    samples = e.op("Mul", {e.reshape(samples, {n, offset_group, c / offset_group, taps, oh, ow}),
                           e.reshape(node.input(4), {n, offset_group, 1, taps, oh, ow})});
  }
  // The taps of each channel side by side, (channel, tap) as the weight orders them: a 1x1
  // convolution over [N, C · taps, oH, oW].
  const std::string columns = e.reshape(samples, {n, c * taps, oh, ow});
  const std::string weight = e.reshape(node.input(1), {out_channels, wd[1] * taps, 1, 1});
  std::vector<std::string> inputs = {columns, weight};
  if (has_input(node, 3)) inputs.push_back(node.input(3));
  e.op("Conv", inputs, {int_attr("group", group), ints_attr("kernel_shape", {1, 1})}, output_of(node, 0));
}

}  // namespace stagecraft::graph::onnx_import
