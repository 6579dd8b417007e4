#pragma once
/// Typed attributes of the graph IR's ops, part 1: the field types they share (`Hw`, `Pads`,
/// `FieldRule`, `NoAttrs`) and the attributes of the convolutions' ops: convolutions, batch
/// normalisation, pools, channel splits and slices, padding, linear layers, layer and local
/// response normalisation, space-to-depth, resizing, reshapes and channel shuffles. The
/// element-wise ops' attributes are in op_attrs_elementwise.h, the row-major tensor ops' in
/// op_attrs_tensors.h; op.h includes all three.
///
/// Every attribute struct lists its fields once in `fields()`, which drives the YAML reader and
/// writer, equality, hashing and labels, so adding a field is a one-line change.

#include <cstdint>
#include <vector>

#include "graph/op_functions.h"

namespace stagecraft::graph {

/// A (height, width) pair: kernel, stride or dilation.
struct Hw {
  int64_t h = 1;  ///< height component
  int64_t w = 1;  ///< width component
  /// The same value for both.
  static Hw square(int64_t v) { return {v, v}; }
  bool operator==(const Hw&) const = default;
};

/// Zero padding on each side of a 2-D window (negative values crop, for Pad only).
struct Pads {
  int64_t top = 0;     ///< rows added above
  int64_t left = 0;    ///< columns added on the left
  int64_t bottom = 0;  ///< rows added below
  int64_t right = 0;   ///< columns added on the right
  /// The same padding on every side.
  static Pads same(int64_t p) { return {p, p, p, p}; }
  /// Symmetric padding: `h` above and below, `w` left and right.
  static Pads symmetric(int64_t h, int64_t w) { return {h, w, h, w}; }
  bool operator==(const Pads&) const = default;
};

/// Whether a field must appear in a graph file.
enum class FieldRule : uint8_t {
  kRequired,  ///< must be present
  kOptional,  ///< may be omitted; defaults to the value of a default-constructed struct
};

/// Attributes of kinds that have none.
struct NoAttrs {
  template <class Self, class Visitor>
  static void fields(Self&, Visitor&&) {}
  bool operator==(const NoAttrs&) const = default;
};

/// 2-D convolution. Weights are [out_channels, in_channels / groups, kernel.h, kernel.w].
struct Conv2dAttrs {
  int64_t in_channels = 0;                  ///< input channels (weight shape)
  int64_t out_channels = 0;                 ///< output channels
  Hw kernel{0, 0};                          ///< kernel size
  Hw stride{1, 1};                          ///< stride
  Pads padding;                             ///< zero padding
  Hw dilation{1, 1};                        ///< dilation
  int64_t groups = 1;                       ///< channel groups (in_channels for depthwise)
  bool bias = false;                        ///< whether a bias is added
  Activation activation = Activation::kNone;  ///< fused activation
  /// A second input added before the activation: y = act(conv(x) + bias + residual), a ResNet
  /// shortcut fused into the convolution (fuse_residual_adds).
  bool residual = false;

  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("in_channels", a.in_channels, FieldRule::kRequired);
    v("out_channels", a.out_channels, FieldRule::kRequired);
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("dilation", a.dilation, FieldRule::kOptional);
    v("groups", a.groups, FieldRule::kOptional);
    v("bias", a.bias, FieldRule::kOptional);
    v("activation", a.activation, FieldRule::kOptional);
    v("residual", a.residual, FieldRule::kOptional);
  }
  bool operator==(const Conv2dAttrs&) const = default;
};

/// Transposed 2-D convolution (ONNX ConvTranspose, PyTorch's ConvTranspose2d: a segmentation
/// head's learned upsampling): input pixel (y, x) adds weight · x to output pixels
/// (y · stride + ky · dilation - padding.top, ...). Output size per axis: stride · (in - 1) +
/// dilation · (kernel - 1) + 1 + output_padding - padding at both ends. Weights are
/// [out_channels, in_channels / groups, kernel.h, kernel.w], as a convolution's (the importer
/// reorders ONNX's [in, out / groups, ...]).
struct ConvTranspose2dAttrs {
  int64_t in_channels = 0;   ///< input channels
  int64_t out_channels = 0;  ///< output channels
  Hw kernel{0, 0};           ///< kernel size
  Hw stride{1, 1};           ///< stride (the upsampling factor)
  Pads padding;              ///< removed from the output's edges
  Hw output_padding{0, 0};   ///< added to the output's bottom and right (each < stride or dilation)
  Hw dilation{1, 1};         ///< dilation
  int64_t groups = 1;        ///< channel groups
  bool bias = false;         ///< whether a bias is added

  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("in_channels", a.in_channels, FieldRule::kRequired);
    v("out_channels", a.out_channels, FieldRule::kRequired);
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("output_padding", a.output_padding, FieldRule::kOptional);
    v("dilation", a.dilation, FieldRule::kOptional);
    v("groups", a.groups, FieldRule::kOptional);
    v("bias", a.bias, FieldRule::kOptional);
  }
  bool operator==(const ConvTranspose2dAttrs&) const = default;
};

/// Batch normalisation in inference form: y = act((x - mean) / sqrt(var + eps) * gamma + beta).
struct BatchNormAttrs {
  double eps = 1e-5;                          ///< variance epsilon
  Activation activation = Activation::kNone;  ///< fused activation (a pre-activation DenseNet's BN+ReLU)
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("eps", a.eps, FieldRule::kOptional);
    v("activation", a.activation, FieldRule::kOptional);
  }
  bool operator==(const BatchNormAttrs&) const = default;
};

/// Max pooling over 2-D windows.
struct MaxPoolAttrs {
  Hw kernel{0, 0};         ///< window size
  Hw stride{1, 1};         ///< stride
  Pads padding;            ///< implicit padding (never selected)
  bool ceil_mode = false;  ///< round the output size up, as PyTorch's ceil_mode
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("ceil_mode", a.ceil_mode, FieldRule::kOptional);
  }
  bool operator==(const MaxPoolAttrs&) const = default;
};

/// Average pooling over 2-D windows.
struct AvgPoolAttrs {
  Hw kernel{0, 0};                 ///< window size
  Hw stride{1, 1};                 ///< stride
  Pads padding;                    ///< zero padding
  bool ceil_mode = false;          ///< round the output size up
  bool count_include_pad = true;   ///< divide by the full window, padding included
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("kernel", a.kernel, FieldRule::kRequired);
    v("stride", a.stride, FieldRule::kOptional);
    v("padding", a.padding, FieldRule::kOptional);
    v("ceil_mode", a.ceil_mode, FieldRule::kOptional);
    v("count_include_pad", a.count_include_pad, FieldRule::kOptional);
  }
  bool operator==(const AvgPoolAttrs&) const = default;
};

/// Split along channels into consecutive parts of the given sizes (one output per part).
struct SplitAttrs {
  std::vector<int64_t> sizes;  ///< channels of each output
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("sizes", a.sizes, FieldRule::kRequired);
  }
  bool operator==(const SplitAttrs&) const = default;
};

/// Channel slice [begin, end) of the input.
struct SliceAttrs {
  int64_t begin = 0;  ///< first channel
  int64_t end = 0;    ///< one past the last channel
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("begin", a.begin, FieldRule::kRequired);
    v("end", a.end, FieldRule::kRequired);
  }
  bool operator==(const SliceAttrs&) const = default;
};

/// Constant padding of H and W (negative amounts crop).
struct PadAttrs {
  Pads pads;          ///< amount per side
  double value = 0;   ///< fill value
  /// Mirror the pixels next to the edge instead of filling (ONNX mode "reflect": row -1 is row 1);
  /// pads must then be >= 0 and smaller than the side they extend.
  bool reflect = false;
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("pads", a.pads, FieldRule::kRequired);
    v("value", a.value, FieldRule::kOptional);
    v("reflect", a.reflect, FieldRule::kOptional);
  }
  bool operator==(const PadAttrs&) const = default;
};

/// Fully connected layer (GEMM): y = x Wᵀ + b with W [out_features, in_features], over the last
/// axis of its input (rank 2, or a row-major tensor of rank 3 or more: a transformer's tokens).
struct LinearAttrs {
  int64_t in_features = 0;                    ///< input features (weight shape)
  int64_t out_features = 0;                   ///< output features
  bool bias = true;                           ///< whether a bias is added
  Activation activation = Activation::kNone;  ///< fused activation
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("in_features", a.in_features, FieldRule::kRequired);
    v("out_features", a.out_features, FieldRule::kRequired);
    v("bias", a.bias, FieldRule::kOptional);
    v("activation", a.activation, FieldRule::kOptional);
  }
  bool operator==(const LinearAttrs&) const = default;
};

/// Layer normalisation over the channels of each pixel (rank 4) or the features of each row
/// (rank 2), or the last axis of a row-major tensor of another rank (a transformer's tokens
/// [N, T, C]): y = (x - mean) / sqrt(var + eps) · gamma + beta, mean and (biased) variance over the
/// C values, gamma and beta per channel in the op's weights. ONNX LayerNormalization over the last
/// axis of a channels-last view (ConvNeXt, ViT).
struct LayerNormAttrs {
  double eps = 1e-5;  ///< added to the variance
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("eps", a.eps, FieldRule::kOptional);
  }
  bool operator==(const LayerNormAttrs&) const = default;
};

/// Local response normalisation across channels (AlexNet, GoogLeNet; ONNX LRN): y = x / (bias +
/// alpha / size · Σ x²)^beta, the sum over the `size` channels centred on each (odd `size`).
struct LrnAttrs {
  int64_t size = 5;     ///< channels in the window (odd)
  double alpha = 1e-4;  ///< scale of the sum of squares (divided by size)
  double beta = 0.75;   ///< exponent
  double bias = 1.0;    ///< added before the power
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("size", a.size, FieldRule::kRequired);
    v("alpha", a.alpha, FieldRule::kOptional);
    v("beta", a.beta, FieldRule::kOptional);
    v("bias", a.bias, FieldRule::kOptional);
  }
  bool operator==(const LrnAttrs&) const = default;
};

/// Space to depth (ONNX SpaceToDepth, TResNet's stem): each block x block patch of pixels becomes
/// channels; output channel (bh · block + bw) · C + c at (y, x) is input channel c at
/// (y · block + bh, x · block + bw). H and W must be multiples of the block.
struct SpaceToDepthAttrs {
  int64_t block = 2;  ///< patch side
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("block", a.block, FieldRule::kRequired);
  }
  bool operator==(const SpaceToDepthAttrs&) const = default;
};

/// Resampling of H and W (ONNX Resize, PyTorch's interpolate/Upsample) to `size`. A destination
/// pixel y maps to the source coordinate y / scale_h (x likewise): nearest takes source pixel
/// floor(y / scale_h) (ONNX "asymmetric" with nearest_mode "floor": PyTorch's "nearest"); linear
/// interpolates between the two nearest pixels at (y + 0.5) / scale_h - 0.5 clamped to the
/// source (ONNX "half_pixel": PyTorch's "bilinear" with align_corners=False).
struct ResizeAttrs {
  Hw size;             ///< output height and width
  double scale_h = 0;  ///< coordinate scale (output / input when the model gives sizes)
  double scale_w = 0;
  bool linear = false;  ///< bilinear; nearest otherwise
  /// bicubic (linear false): the 4 x 4 pixels around the linear coordinate, unclamped, weighted by
  /// Keys' kernel with a = -0.75, edge pixels repeated (PyTorch's "bicubic")
  bool cubic = false;
  /// linear only: source coordinate y · (in - 1) / (in · scale - 1) (= (out - 1) when the size
  /// gives the scale), the corners' pixels kept (ONNX
  /// "align_corners": PyTorch's bilinear with align_corners=True, DPT's fusion stages)
  bool align_corners = false;
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("size", a.size, FieldRule::kRequired);
    v("scale_h", a.scale_h, FieldRule::kRequired);
    v("scale_w", a.scale_w, FieldRule::kRequired);
    v("linear", a.linear, FieldRule::kOptional);
    v("cubic", a.cubic, FieldRule::kOptional);
    v("align_corners", a.align_corners, FieldRule::kOptional);
  }
  bool operator==(const ResizeAttrs&) const = default;
};

/// Reshape keeping the batch: the output is [N, dims...] with the same elements in plain (NCHW or
/// NC) order; rank 2 or 4 in and out ([N, C, 1, 1] <-> [N, C], flattening, unflattening).
struct ReshapeAttrs {
  /// Output dimensions after the batch (1 or 3 of them); with `full`, every output dimension
  /// (any rank; the elements keep their row-major order, so the input must be in a plain layout).
  std::vector<int64_t> dims;
  bool full = false;  ///< `dims` includes the first dimension
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("dims", a.dims, FieldRule::kRequired);
    v("full", a.full, FieldRule::kOptional);
  }
  bool operator==(const ReshapeAttrs&) const = default;
};

/// Channel shuffle (ShuffleNet): channels viewed as [groups, C / groups], transposed, flattened:
/// output channel k · groups + g is input channel g · (C / groups) + k. With several inputs it
/// shuffles their concatenation along channels (fold_concats_into_shuffles makes those).
struct ChannelShuffleAttrs {
  int64_t groups = 1;  ///< the number of groups
  template <class Self, class Visitor>
  static void fields(Self& a, Visitor&& v) {
    v("groups", a.groups, FieldRule::kRequired);
  }
  bool operator==(const ChannelShuffleAttrs&) const = default;
};

}  // namespace stagecraft::graph
