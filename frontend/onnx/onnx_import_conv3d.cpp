// The ONNX importer's 3-D convolutions (video and volume models): Conv and ConvTranspose of a
// 5-D input [N, C, D, H, W] written as 2-D ones over the depth slices, one per kernel depth kd.
//   Conv: out[od] = sum over kd of Conv2d(x[od · stride - pad + kd · dilation], W[:, :, kd]); the
//     input is taken as [N, D, C, H, W], zero-padded along D, and each kd reads the depths it needs
//     by a strided Slice: kD 2-D convolutions of N · oD images, the FLOPs of the 3-D one.
//   ConvTranspose: input depth d adds ConvTranspose2d(x[d], W[:, :, kd]) at output depth
//     d · stride - pad + kd · dilation: each kd's 2-D result spread along D by the stride (zeros
//     between), shifted to its place and cropped, then summed, the bias added once.
// Kernels, strides, dilations and pads apply per axis; groups as in the 2-D ops.
//
// Also MaxPool and AveragePool of a 5-D input without dilations: a box window is separable, so each
// is a 2-D pool of every depth slice, then a pool along the depth of [N, 1, D, C · oH · oW] (the
// padding and count_include_pad rules hold per axis: a max of maxima; a mean of means, each over
// its axis's valid or padded extent). The host's N-D pool loop took 259 of S3D's 538 ms.
//
// Also the 2-D ConvTranspose whose stride equals its square kernel, unpadded (the 2x2 stride-2
// upsampling of segmentation heads, YOLO's prototype masks): each input pixel fills its own k x k
// block of the output, so it is a 1x1 Conv to M · k · k channels, then DepthToSpace (CRD). oneDNN
// 2.6's deconvolution ran YOLO11n-seg's 64 -> 64 channels at 80x80 in 5.9 ms; this in 1.7.
#include <algorithm>
#include <vector>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"

namespace stagecraft::graph::onnx_import {

namespace {

struct Conv3d {
  std::vector<int64_t> kernel, strides, dilations, pads, output_padding;  // pads: d0, h0, w0, d1, h1, w1
  int64_t group = 1;
};

// The 2-D attributes of a 3-D op: the H and W entries of its per-axis attributes.
std::vector<onnx::AttributeProto> plane_attrs(const Conv3d& c, bool transposed) {
  std::vector<onnx::AttributeProto> a = {
      ints_attr("kernel_shape", {c.kernel[1], c.kernel[2]}), ints_attr("strides", {c.strides[1], c.strides[2]}),
      ints_attr("dilations", {c.dilations[1], c.dilations[2]}),
      ints_attr("pads", {c.pads[1], c.pads[2], c.pads[4], c.pads[5]}), int_attr("group", c.group)};
  if (transposed) a.push_back(ints_attr("output_padding", {c.output_padding[1], c.output_padding[2]}));
  return a;
}

// The weight's slice at kernel depth kd: [A, B, kD, kH, kW] -> [A, B, kH, kW].
std::vector<float> depth_slice(const std::vector<float>& w, const std::vector<int64_t>& dims, int64_t kd) {
  const int64_t outer = dims[0] * dims[1], plane = dims[3] * dims[4];
  std::vector<float> s(static_cast<size_t>(outer * plane));
  for (int64_t o = 0; o < outer; ++o) {
    std::copy_n(w.begin() + (o * dims[2] + kd) * plane, plane, s.begin() + o * plane);
  }
  return s;
}

}  // namespace

bool Importer::is_separable_pool(const onnx::NodeProto& node) const {
  const std::string& t = node.op_type();
  if ((t != "MaxPool" && t != "AveragePool") || rank_of(node.input(0)) != 5u) return false;
  const std::vector<int64_t> dilations = attr_ints(node, "dilations");
  const std::string auto_pad = attr_string(node, "auto_pad");
  // An average counting the padding, in ceil mode, divides the last window by its extent within the
  // padded input on every axis at once: left to the N-D pool.
  if (t == "AveragePool" && attr_int(node, "count_include_pad", 0) != 0 && attr_int(node, "ceil_mode", 0) != 0) return false;
  return std::all_of(dilations.begin(), dilations.end(), [](int64_t d) { return d == 1; }) &&
         (auto_pad.empty() || auto_pad == "NOTSET") && attr_ints(node, "kernel_shape").size() == 3 &&
         attr_int(node, "storage_order", 0) == 0 && (node.output_size() < 2 || node.output(1).empty());
}

void Importer::expand_separable_pool(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  const std::vector<int64_t> kernel = attr_ints(node, "kernel_shape");
  std::vector<int64_t> strides = attr_ints(node, "strides"), pads = attr_ints(node, "pads");
  if (strides.empty()) strides.assign(3, 1);
  if (pads.empty()) pads.assign(6, 0);
  if (strides.size() != 3 || pads.size() != 6) fail(node, "strides and pads must have 3 and 6 values");
  const int64_t n = in.dims[0], c = in.dims[1], depth = in.dims[2], h = in.dims[3], w = in.dims[4];
  const int64_t ceil = attr_int(node, "ceil_mode", 0);
  const auto out_extent = [&](int64_t size, size_t d) {
    const int64_t span = size + pads[d] + pads[d + 3] - kernel[d];
    int64_t o = (ceil ? (span + strides[d] - 1) / strides[d] : span / strides[d]) + 1;
    if (ceil && (o - 1) * strides[d] >= size + pads[d]) --o;  // the last window starts in the padding
    return o;
  };
  const int64_t oh = out_extent(h, 1), ow = out_extent(w, 2), od = out_extent(depth, 0);
  if (oh < 1 || ow < 1 || od < 1) fail(node, cat("the window is larger than the padded input"));
  std::vector<onnx::AttributeProto> shared;
  for (const auto& a : node.attribute()) {
    if (a.name() == "count_include_pad" || a.name() == "ceil_mode") shared.push_back(a);
  }
  const char* type = node.op_type() == "MaxPool" ? "MaxPool" : "AveragePool";
  // Every depth slice pooled over H and W: [N · D, C, oH, oW].
  const std::string slices = e.reshape(e.op("Transpose", {node.input(0)}, {ints_attr("perm", {0, 2, 1, 3, 4})}), {n * depth, c, h, w});
  std::vector<onnx::AttributeProto> plane = shared;
  plane.push_back(ints_attr("kernel_shape", {kernel[1], kernel[2]}));
  plane.push_back(ints_attr("strides", {strides[1], strides[2]}));
  plane.push_back(ints_attr("pads", {pads[1], pads[2], pads[4], pads[5]}));
  const std::string planes = e.op(type, {slices}, plane);
  // Then along the depth: [N, 1, D, C · oH · oW] pooled by (kD, 1).
  std::vector<onnx::AttributeProto> along = shared;
  along.push_back(ints_attr("kernel_shape", {kernel[0], 1}));
  along.push_back(ints_attr("strides", {strides[0], 1}));
  along.push_back(ints_attr("pads", {pads[0], 0, pads[3], 0}));
  const std::string pooled = e.op(type, {e.reshape(planes, {n, 1, depth, c * oh * ow})}, along);
  e.op("Transpose", {e.reshape(pooled, {n, od, c, oh, ow})}, {ints_attr("perm", {0, 2, 1, 3, 4})}, output_of(node, 0));
}

bool Importer::is_block_upsampling(const onnx::NodeProto& node) const {
  if (node.op_type() != "ConvTranspose" || rank_of(node.input(0)) != 4u) return false;
  const ConstTensor* w = constant(node, 1);
  if (!w || w->dims.size() != 4 || w->dims[2] != w->dims[3] || w->dims[2] < 2) return false;
  if (has_input(node, 2) && !constant(node, 2)) return false;
  const auto all = [&](const char* name, int64_t v) {
    const std::vector<int64_t> a = attr_ints(node, name);
    return std::all_of(a.begin(), a.end(), [v](int64_t x) { return x == v; });
  };
  const std::string auto_pad = attr_string(node, "auto_pad");
  return attr_int(node, "group", 1) == 1 && all("strides", w->dims[2]) && attr_ints(node, "strides").size() == 2 &&
         all("pads", 0) && all("dilations", 1) && all("output_padding", 0) && attr_ints(node, "output_shape").empty() &&
         (auto_pad.empty() || auto_pad == "NOTSET");
}

void Importer::expand_block_upsampling(const onnx::NodeProto& node, Expansion& e, const ExpandedInput&) {
  const ConstTensor& wt = *constant(node, 1);  // [C, M, k, k]
  const int64_t c = wt.dims[0], m = wt.dims[1], k = wt.dims[2];
  const std::vector<float> w = constant_floats(node, 1, "the weight");
  std::vector<float> conv(w.size());  // [M · k · k, C, 1, 1]: output channel (o, i, j) reads W[:, o, i, j]
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t t = 0; t < k * k; ++t) conv[static_cast<size_t>((o * k * k + t) * c + ci)] = w[static_cast<size_t>((ci * m + o) * k * k + t)];
  std::vector<std::string> inputs = {node.input(0), e.floats(conv, {m * k * k, c, 1, 1})};
  if (has_input(node, 2)) {
    const std::vector<float> b = constant_floats(node, 2, "the bias");
    std::vector<float> repeated;
    for (float v : b) repeated.insert(repeated.end(), static_cast<size_t>(k * k), v);
    inputs.push_back(e.floats(repeated, {m * k * k}));
  }
  const std::string blocks = e.op("Conv", inputs, {ints_attr("kernel_shape", {1, 1})});
  e.op("DepthToSpace", {blocks}, {int_attr("blocksize", k), string_attr("mode", "CRD")}, output_of(node, 0));
}

void Importer::expand_conv_transpose(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  if (in.rank == 5) return expand_conv3d(node, e, in);
  expand_block_upsampling(node, e, in);
}

void Importer::expand_conv3d(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  const bool transposed = node.op_type() == "ConvTranspose";
  const ConstTensor* wt = constant(node, 1);
  if (!wt) fail_not_constant(node, 1, "the weight (input 1) must be a constant");
  const std::vector<int64_t> wd = wt->dims;
  if (wd.size() != 5) fail(node, cat("a 5-D input needs a 5-D weight, got ", Shape(wd).to_string()));
  const std::string auto_pad = attr_string(node, "auto_pad");
  if (!auto_pad.empty() && auto_pad != "NOTSET") fail(node, cat("auto_pad=", auto_pad, " of a 3-D convolution is not supported (give pads)"));
  if (transposed && !attr_ints(node, "output_shape").empty()) fail(node, "output_shape of a 3-D ConvTranspose is not supported (give pads)");
  const auto per_axis = [&](const char* name, size_t size, int64_t fallback) {
    std::vector<int64_t> v = attr_ints(node, name);
    if (v.empty()) v.assign(size, fallback);
    if (v.size() != size) fail(node, cat(name, " must have ", size, " values, got ", v.size()));
    return v;
  };
  Conv3d c;
  c.kernel = {wd[2], wd[3], wd[4]};
  if (!attr_ints(node, "kernel_shape").empty() && per_axis("kernel_shape", 3, 0) != c.kernel) fail(node, "kernel_shape does not match the weight");
  c.strides = per_axis("strides", 3, 1);
  c.dilations = per_axis("dilations", 3, 1);
  c.pads = per_axis("pads", 6, 0);
  c.output_padding = per_axis("output_padding", 3, 0);
  c.group = attr_int(node, "group", 1);
  const int64_t n = in.dims[0], ch = in.dims[1], depth = in.dims[2], h = in.dims[3], w = in.dims[4];
  const int64_t in_per_group = transposed ? wd[0] / c.group : wd[1];
  if (c.group < 1 || ch % c.group != 0 || (transposed ? wd[0] != ch : wd[1] * c.group != ch) || in_per_group < 1) {
    fail(node, cat("group ", c.group, " does not fit ", ch, " input channels and a weight of ", Shape(wd).to_string()));
  }
  const int64_t out_channels = transposed ? wd[1] * c.group : wd[0];
  const int64_t reach = c.dilations[0] * (c.kernel[0] - 1);  // the kernel's extent along D, less one
  const int64_t out_depth = transposed ? (depth - 1) * c.strides[0] + reach + 1 - c.pads[0] - c.pads[3] + c.output_padding[0]
                                       : (depth + c.pads[0] + c.pads[3] - reach - 1) / c.strides[0] + 1;
  if (out_depth < 1) fail(node, cat("the output would have ", out_depth, " depths"));
  const std::vector<float> weight = constant_floats(node, 1, "the weight");
  // [N, D, C, H, W] as [N · D, C, H, W]: the 2-D ops' images.
  std::string x = e.op("Transpose", {node.input(0)}, {ints_attr("perm", {0, 2, 1, 3, 4})});
  std::vector<int64_t> out_hw(2);
  for (size_t d = 1; d < 3; ++d) {
    const int64_t size = in.dims[d + 2], extent = c.dilations[d] * (c.kernel[d] - 1);
    out_hw[d - 1] = transposed ? (size - 1) * c.strides[d] + extent + 1 - c.pads[d] - c.pads[d + 3] + c.output_padding[d]
                               : (size + c.pads[d] + c.pads[d + 3] - extent - 1) / c.strides[d] + 1;
  }
  if (out_hw[0] < 1 || out_hw[1] < 1) fail(node, cat("the output would be ", out_hw[0], " x ", out_hw[1]));
  const int64_t plane = out_channels * out_hw[0] * out_hw[1];  // one depth of the output
  std::vector<std::string> parts;
  if (!transposed) {
    // Each kd takes depths start + s · od: a contiguous run of oD · s depths seen as [oD, s] and its
    // first column (padded at the end with zeros where the last run passes the input).
    const int64_t stride = c.strides[0], padded = depth + c.pads[0] + c.pads[3];
    const int64_t end_pad = c.pads[3] + std::max<int64_t>(0, reach + out_depth * stride - padded);
    if (c.pads[0] > 0 || end_pad > 0) x = e.op("Pad", {x, e.ints({0, c.pads[0], 0, 0, 0, 0, end_pad, 0, 0, 0})});
    for (int64_t kd = 0; kd < c.kernel[0]; ++kd) {
      const int64_t start = kd * c.dilations[0];
      std::string taken = e.op("Slice", {x, e.ints({start}), e.ints({start + out_depth * stride}), e.ints({1})});
      if (stride > 1) {
        taken = e.reshape(taken, {n, out_depth, stride, ch * h * w});
        taken = e.op("Slice", {taken, e.ints({0}), e.ints({1}), e.ints({2})});
      }
      std::vector<std::string> inputs = {e.reshape(taken, {n * out_depth, ch, h, w}),
                                         e.floats(depth_slice(weight, wd, kd), {wd[0], wd[1], wd[3], wd[4]})};
      if (kd == 0 && has_input(node, 2)) inputs.push_back(node.input(2));
      parts.push_back(e.op("Conv", inputs, plane_attrs(c, false)));
    }
  } else {
    const std::string images = e.reshape(x, {n * depth, ch, h, w});
    for (int64_t kd = 0; kd < c.kernel[0]; ++kd) {
      std::string y = e.op("ConvTranspose", {images, e.floats(depth_slice(weight, wd, kd), {wd[0], wd[1], wd[3], wd[4]})},
                           plane_attrs(c, true));
      // Input depth d at d · stride: the stride's zeros after each depth.
      y = e.reshape(y, {n, depth, 1, plane});
      if (c.strides[0] > 1) y = e.op("Pad", {y, e.ints({0, 0, 0, 0, 0, 0, c.strides[0] - 1, 0})});
      const int64_t spread = depth * c.strides[0];
      y = e.reshape(y, {n, spread, plane});
      // Shifted by kd · dilation - pad: the depths [first, first + length) of the spread land at
      // output depths [before, before + length); the rest of the output gets zeros.
      const int64_t shift = kd * c.dilations[0] - c.pads[0];
      const int64_t first = std::max<int64_t>(-shift, 0), before = std::max<int64_t>(shift, 0);
      const int64_t length = std::min(spread - first, out_depth - before);
      if (length <= 0) continue;  // this kernel depth reaches no output depth
      if (first > 0 || length < spread) y = e.op("Slice", {y, e.ints({first}), e.ints({first + length}), e.ints({1})});
      const int64_t after = out_depth - before - length;
      if (before > 0 || after > 0) y = e.op("Pad", {y, e.ints({0, before, 0, 0, after, 0})});
      parts.push_back(y);
    }
    if (parts.empty()) fail(node, "no kernel depth reaches the output (pads larger than the output)");
  }
  std::string sum = parts.size() == 1 ? parts[0] : e.op("Sum", parts);
  sum = e.reshape(sum, {n, out_depth, out_channels, out_hw[0], out_hw[1]});
  if (!transposed) {
    e.op("Transpose", {sum}, {ints_attr("perm", {0, 2, 1, 3, 4})}, output_of(node, 0));
    return;
  }
  sum = e.op("Transpose", {sum}, {ints_attr("perm", {0, 2, 1, 3, 4})});
  if (!has_input(node, 2)) {
    e.op("Identity", {sum}, {}, output_of(node, 0));
    return;
  }
  e.op("Add", {sum, e.reshape(node.input(2), {1, out_channels, 1, 1, 1})}, {}, output_of(node, 0));
}

}  // namespace stagecraft::graph::onnx_import
