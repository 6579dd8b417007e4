// ONNX export of the convolutions' ops: Conv (a fused residual as Conv then Add), ConvTranspose
// (weights back to ONNX's order), BatchNormalization, LRN, the pools, Resize (scales or sizes),
// Pad, and the channel ops: Split, Slice, Reshape, and a channel shuffle as Reshape -> Transpose
// -> Reshape.
#include <algorithm>
#include <cmath>

#include "frontend/onnx/onnx_exporter.h"

#include "common/strings.h"
#include "graph/errors.h"

namespace stagecraft::graph::onnx_export {

void Exporter::export_conv(const Op& op, Names in, const std::string& out) {
  const auto& a = op.attrs_as<Conv2dAttrs>();
  const auto& w = weights_of(op);
  in.push_back(floats(op.name + "/W", w.weight, {a.out_channels, a.in_channels / a.groups, a.kernel.h, a.kernel.w}));
  if (a.bias) in.push_back(floats(op.name + "/B", w.bias, {a.out_channels}));
  // A fused residual is ONNX's Conv then Add (inputs: x, W, B; the residual is in[1]).
  const std::string residual = a.residual ? in[1] : "";
  if (a.residual) in.erase(in.begin() + 1);
  const std::string sum = pre_activation(a.activation, out);
  auto* n = node("Conv", op.name, in, {a.residual ? sum + "/conv" : sum});
  ints(n, "kernel_shape", {a.kernel.h, a.kernel.w});
  ints(n, "strides", {a.stride.h, a.stride.w});
  ints(n, "pads", {a.padding.top, a.padding.left, a.padding.bottom, a.padding.right});
  ints(n, "dilations", {a.dilation.h, a.dilation.w});
  integer(n, "group", a.groups);
  if (a.residual) node("Add", op.name + "/residual", {sum + "/conv", residual}, {sum});
  emit_activation(op, a.activation, out);
}

void Exporter::export_conv_transpose(const Op& op, Names in, const std::string& out) {
  // Weights back to ONNX's [in, out / groups, kh, kw].
  const auto& a = op.attrs_as<ConvTranspose2dAttrs>();
  const auto& w = weights_of(op);
  const int64_t in_per = a.in_channels / a.groups, out_per = a.out_channels / a.groups;
  const int64_t taps = a.kernel.h * a.kernel.w;
  std::vector<float> onnx_w(w.weight.size());
  for (int64_t g = 0; g < a.groups; ++g)
    for (int64_t o = 0; o < out_per; ++o)
      for (int64_t i = 0; i < in_per; ++i)
        for (int64_t t = 0; t < taps; ++t) {
          onnx_w[static_cast<size_t>(((g * in_per + i) * out_per + o) * taps + t)] =
              w.weight[static_cast<size_t>(((g * out_per + o) * in_per + i) * taps + t)];
        }
  in.push_back(floats(op.name + "/W", onnx_w, {a.in_channels, out_per, a.kernel.h, a.kernel.w}));
  if (a.bias) in.push_back(floats(op.name + "/B", w.bias, {a.out_channels}));
  auto* n = node("ConvTranspose", op.name, in, {out});
  ints(n, "kernel_shape", {a.kernel.h, a.kernel.w});
  ints(n, "strides", {a.stride.h, a.stride.w});
  ints(n, "pads", {a.padding.top, a.padding.left, a.padding.bottom, a.padding.right});
  ints(n, "dilations", {a.dilation.h, a.dilation.w});
  ints(n, "output_padding", {a.output_padding.h, a.output_padding.w});
  integer(n, "group", a.groups);
}

void Exporter::export_batch_norm(const Op& op, Names in, const std::string& out) {
  const auto& w = weights_of(op);
  const int64_t c = static_cast<int64_t>(w.gamma.size());
  for (auto [suffix, data] : {std::pair{"/scale", &w.gamma}, {"/B", &w.beta}, {"/mean", &w.mean}, {"/var", &w.var}}) {
    in.push_back(floats(op.name + suffix, *data, {c}));
  }
  const auto& a = op.attrs_as<BatchNormAttrs>();
  real(node("BatchNormalization", op.name, in, {pre_activation(a.activation, out)}), "epsilon",
       static_cast<float>(a.eps));
  emit_activation(op, a.activation, out);
}

void Exporter::export_lrn(const Op& op, const Names& in, const std::string& out) {
  const auto& a = op.attrs_as<LrnAttrs>();
  auto* n = node("LRN", op.name, in, {out});
  integer(n, "size", a.size);
  real(n, "alpha", static_cast<float>(a.alpha));
  real(n, "beta", static_cast<float>(a.beta));
  real(n, "bias", static_cast<float>(a.bias));
}

void Exporter::export_pool(const Op& op, const Names& in, const std::string& out) {
  const bool max = op.kind == OpKind::kMaxPool;
  auto* n = node(max ? "MaxPool" : "AveragePool", op.name, in, {out});
  Hw k, s;
  Pads p;
  bool ceil;
  if (max) {
    const auto& a = op.attrs_as<MaxPoolAttrs>();
    k = a.kernel, s = a.stride, p = a.padding, ceil = a.ceil_mode;
  } else {
    const auto& a = op.attrs_as<AvgPoolAttrs>();
    k = a.kernel, s = a.stride, p = a.padding, ceil = a.ceil_mode;
    integer(n, "count_include_pad", a.count_include_pad ? 1 : 0);
  }
  ints(n, "kernel_shape", {k.h, k.w});
  ints(n, "strides", {s.h, s.w});
  ints(n, "pads", {p.top, p.left, p.bottom, p.right});
  integer(n, "ceil_mode", ceil ? 1 : 0);
}

void Exporter::export_pool_nd(const Op& op, const Names& in, const std::string& out) {
  const auto& a = op.attrs_as<PoolNdAttrs>();
  auto* n = node(a.max ? "MaxPool" : "AveragePool", op.name, in, {out});
  if (!a.max) integer(n, "count_include_pad", a.count_include_pad ? 1 : 0);
  ints(n, "kernel_shape", a.kernel);
  ints(n, "strides", a.stride);
  const bool dilated = std::any_of(a.dilation.begin(), a.dilation.end(), [](int64_t d) { return d != 1; });
  if (dilated && !a.max) {
    throw FormatError(cat("cannot export op '", op.name, "': AveragePool has dilations from opset 19, the export writes opset ",
                          kExportOpset));
  }
  if (dilated) ints(n, "dilations", a.dilation);
  std::vector<int64_t> pads = a.pad_begin;
  pads.insert(pads.end(), a.pad_end.begin(), a.pad_end.end());
  ints(n, "pads", pads);
  integer(n, "ceil_mode", a.ceil_mode ? 1 : 0);
}

void Exporter::export_resize(const Op& op, Names in, const std::string& out) {
  // Scales when float32 holds them exactly and they give back the size (in float, as ONNX
  // Runtime computes it), else sizes (the importer then takes size / input as the scale).
  const auto& a = op.attrs_as<ResizeAttrs>();
  const Shape& s = g_.value(op.inputs[0]).desc.shape;
  const auto scale_h = static_cast<float>(a.scale_h), scale_w = static_cast<float>(a.scale_w);
  const bool scales_fit = static_cast<double>(scale_h) == a.scale_h && static_cast<double>(scale_w) == a.scale_w &&
                          static_cast<int64_t>(std::floor(static_cast<float>(s[2]) * scale_h)) == a.size.h &&
                          static_cast<int64_t>(std::floor(static_cast<float>(s[3]) * scale_w)) == a.size.w;
  if (scales_fit) {
    in.insert(in.end(), {"", floats(op.name + "/scales", {1, 1, scale_h, scale_w}, {4})});
  } else {
    in.insert(in.end(), {"", "", int64s(op.name + "/sizes", {s[0], s[1], a.size.h, a.size.w})});
  }
  auto* n = node("Resize", op.name, in, {out});
  const bool interpolated = a.linear || a.cubic;
  text(n, "mode", a.linear ? "linear" : a.cubic ? "cubic" : "nearest");
  text(n, "coordinate_transformation_mode", a.align_corners ? "align_corners" : interpolated ? "half_pixel" : "asymmetric");
  if (!interpolated) text(n, "nearest_mode", "floor");
}

void Exporter::export_resize_nd(const Op& op, Names in, const std::string& out) {
  // As export_resize: scales when float32 holds them and they give back the sizes, else sizes
  // (which the importer divides by the input again: refused where that is another scale).
  const auto& a = op.attrs_as<ResizeNdAttrs>();
  const Shape& s = g_.value(op.inputs[0]).desc.shape;
  if (a.antialias || a.transform == 1) {
    throw FormatError(cat("cannot export op '", op.name, "': ", a.antialias ? "antialias" : "half_pixel_symmetric",
                          " needs a later opset than the export's ", kExportOpset));
  }
  std::vector<float> scales;
  bool scales_fit = true, sizes_fit = true;
  for (size_t d = 0; d < s.rank(); ++d) {
    const auto f = static_cast<float>(a.scales[d]);
    scales.push_back(f);
    scales_fit = scales_fit && static_cast<double>(f) == a.scales[d] &&
                 static_cast<int64_t>(std::floor(static_cast<float>(s[d]) * f)) == a.sizes[d];
    sizes_fit = sizes_fit && static_cast<double>(a.sizes[d]) / static_cast<double>(s[d]) == a.scales[d];
  }
  if (!scales_fit && !sizes_fit) {
    throw FormatError(cat("cannot export op '", op.name, "': neither its scales nor its sizes give both back in ONNX"));
  }
  std::vector<float> roi(a.roi.begin(), a.roi.end());
  in.push_back(a.transform == 5 ? floats(op.name + "/roi", roi, {static_cast<int64_t>(roi.size())}) : std::string());
  if (scales_fit) {
    in.push_back(floats(op.name + "/scales", scales, {static_cast<int64_t>(scales.size())}));
  } else {
    in.insert(in.end(), {"", int64s(op.name + "/sizes", a.sizes)});
  }
  auto* n = node("Resize", op.name, in, {out});
  static const char* const kModes[] = {"nearest", "linear", "cubic"};
  static const char* const kTransforms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                            "align_corners", "asymmetric", "tf_crop_and_resize"};
  static const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  text(n, "mode", kModes[a.mode]);
  text(n, "coordinate_transformation_mode", kTransforms[a.transform]);
  text(n, "nearest_mode", kNearest[a.nearest]);
  real(n, "cubic_coeff_a", static_cast<float>(a.cubic_a));
  integer(n, "exclude_outside", a.exclude_outside ? 1 : 0);
  real(n, "extrapolation_value", static_cast<float>(a.extrapolation));
}

void Exporter::export_pad(const Op& op, Names in, const std::string& out) {
  const auto& a = op.attrs_as<PadAttrs>();
  in.push_back(int64s(op.name + "/pads", {0, 0, a.pads.top, a.pads.left, 0, 0, a.pads.bottom, a.pads.right}));
  if (a.reflect) {
    text(node("Pad", op.name, in, {out}), "mode", "reflect");
    return;
  }
  in.push_back(floats(op.name + "/value", {static_cast<float>(a.value)}, {}));
  node("Pad", op.name, in, {out});
}

void Exporter::export_split(const Op& op, Names in) {
  Names outs;
  for (ValueId v : op.outputs) outs.push_back(g_.value(v).name);
  in.push_back(int64s(op.name + "/split", op.attrs_as<SplitAttrs>().sizes));
  integer(node("Split", op.name, in, outs), "axis", 1);
}

void Exporter::export_slice(const Op& op, Names in, const std::string& out) {
  const auto& a = op.attrs_as<SliceAttrs>();
  in.push_back(int64s(op.name + "/starts", {a.begin}));
  in.push_back(int64s(op.name + "/ends", {a.end}));
  in.push_back(int64s(op.name + "/axes", {1}));
  node("Slice", op.name, in, {out});
}

void Exporter::export_channel_shuffle(const Op& op, Names in, const std::string& out) {
  const Shape& s = g_.value(op.outputs[0]).desc.shape;
  const int64_t g = op.attrs_as<ChannelShuffleAttrs>().groups;
  if (in.size() > 1) {  // a shuffle of the concatenation of its inputs
    integer(node("Concat", op.name + "/concat", in, {op.name + "/concatenated"}), "axis", 1);
    in = {op.name + "/concatenated"};
  }
  node("Reshape", op.name + "/view", {in[0], int64s(op.name + "/view_shape", {s[0], g, s[1] / g, s[2], s[3]})},
       {op.name + "/grouped"});
  ints(node("Transpose", op.name + "/transpose", {op.name + "/grouped"}, {op.name + "/transposed"}),
       "perm", {0, 2, 1, 3, 4});
  node("Reshape", op.name, {op.name + "/transposed", int64s(op.name + "/shape", {s[0], s[1], s[2], s[3]})},
       {out});
}

void Exporter::export_reshape(const Op& op, Names in, const std::string& out) {
  const Shape& s = g_.value(op.outputs[0]).desc.shape;
  in.push_back(int64s(op.name + "/shape", std::vector<int64_t>(s.dims().begin(), s.dims().end())));
  node("Reshape", op.name, in, {out});
}

}  // namespace stagecraft::graph::onnx_export
