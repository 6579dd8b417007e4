#pragma once
/// Typed attributes of the graph IR's ops, part 1: the field types they share (`Hw`, `Pads`,
/// `FieldRule`, `NoAttrs`) and the attributes of the convolutions' ops: convolutions, batch
/// normalisation, pools, channel splits and slices, padding, linear layers, layer and local
/// response normalisation, space-to-depth, resizing, reshapes and channel shuffles. The
/// element-wise ops' attributes are in op_attrs_elementwise.h, the row-major tensor ops' in
/// op_attrs_tensors.h; op.h includes all three.
///
/// Every attribute struct lists its fields once (STAGECRAFT_ATTR_FIELDS), which drives the YAML
/// reader and writer, equality, hashing and labels, so adding a field is a one-word change.

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

// STAGECRAFT_ATTR_FIELDS(Type, (required...), (optional...)) declares an attribute struct's
// `fields(self, visitor)`, which calls visitor("name", self.name, rule) for each field in the
// order given, and its defaulted operator==. A field's name is both its member and its key in
// graph files. (The preprocessor walks a list by rescanning: STAGECRAFT_PP_EACH applies a macro
// to each argument, up to 28 of them; a longer list fails to compile at STAGECRAFT_PP_EACH_AGAIN.)
#define STAGECRAFT_PP_PARENS ()
#define STAGECRAFT_PP_EXPAND(...) STAGECRAFT_PP_EXPAND3(STAGECRAFT_PP_EXPAND3(__VA_ARGS__))
#define STAGECRAFT_PP_EXPAND3(...) \
  STAGECRAFT_PP_EXPAND2(STAGECRAFT_PP_EXPAND2(STAGECRAFT_PP_EXPAND2(__VA_ARGS__)))
#define STAGECRAFT_PP_EXPAND2(...) \
  STAGECRAFT_PP_EXPAND1(STAGECRAFT_PP_EXPAND1(STAGECRAFT_PP_EXPAND1(__VA_ARGS__)))
#define STAGECRAFT_PP_EXPAND1(...) __VA_ARGS__
#define STAGECRAFT_PP_EACH(macro, ...) \
  __VA_OPT__(STAGECRAFT_PP_EXPAND(STAGECRAFT_PP_EACH_NEXT(macro, __VA_ARGS__)))
#define STAGECRAFT_PP_EACH_NEXT(macro, first, ...) \
  macro(first) __VA_OPT__(STAGECRAFT_PP_EACH_AGAIN STAGECRAFT_PP_PARENS(macro, __VA_ARGS__))
#define STAGECRAFT_PP_EACH_AGAIN() STAGECRAFT_PP_EACH_NEXT
#define STAGECRAFT_PP_UNPAREN(...) __VA_ARGS__
#define STAGECRAFT_REQUIRED_FIELD(name) v(#name, a.name, ::stagecraft::graph::FieldRule::kRequired);
#define STAGECRAFT_OPTIONAL_FIELD(name) v(#name, a.name, ::stagecraft::graph::FieldRule::kOptional);
#define STAGECRAFT_ATTR_FIELDS(Type, required, optional)                          \
  template <class Self, class Visitor>                                            \
  static void fields([[maybe_unused]] Self& a, [[maybe_unused]] Visitor&& v) {    \
    STAGECRAFT_PP_EACH(STAGECRAFT_REQUIRED_FIELD, STAGECRAFT_PP_UNPAREN required) \
    STAGECRAFT_PP_EACH(STAGECRAFT_OPTIONAL_FIELD, STAGECRAFT_PP_UNPAREN optional) \
  }                                                                               \
  bool operator==(const Type&) const = default;

/// Attributes of kinds that have none.
struct NoAttrs {
  STAGECRAFT_ATTR_FIELDS(NoAttrs, (), ())
};

/// 2-D convolution. Weights are [out_channels, in_channels / groups, kernel.h, kernel.w].
struct Conv2dAttrs {
  int64_t in_channels = 0;                    ///< input channels (weight shape)
  int64_t out_channels = 0;                   ///< output channels
  Hw kernel{0, 0};                            ///< kernel size
  Hw stride{1, 1};                            ///< stride
  Pads padding;                               ///< zero padding
  Hw dilation{1, 1};                          ///< dilation
  int64_t groups = 1;                         ///< channel groups (in_channels for depthwise)
  bool bias = false;                          ///< whether a bias is added
  Activation activation = Activation::kNone;  ///< fused activation
  /// A second input added before the activation: y = act(conv(x) + bias + residual), a ResNet
  /// shortcut fused into the convolution (fuse_residual_adds).
  bool residual = false;

  STAGECRAFT_ATTR_FIELDS(Conv2dAttrs, (in_channels, out_channels, kernel),
                         (stride, padding, dilation, groups, bias, activation, residual))
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

  STAGECRAFT_ATTR_FIELDS(ConvTranspose2dAttrs, (in_channels, out_channels, kernel),
                         (stride, padding, output_padding, dilation, groups, bias))
};

/// Batch normalisation in inference form: y = act((x - mean) / sqrt(var + eps) * gamma + beta).
struct BatchNormAttrs {
  double eps = 1e-5;  ///< variance epsilon
  Activation activation =
      Activation::kNone;  ///< fused activation (a pre-activation DenseNet's BN+ReLU)
  STAGECRAFT_ATTR_FIELDS(BatchNormAttrs, (), (eps, activation))
};

/// Max pooling over 2-D windows.
struct MaxPoolAttrs {
  Hw kernel{0, 0};         ///< window size
  Hw stride{1, 1};         ///< stride
  Pads padding;            ///< implicit padding (never selected)
  bool ceil_mode = false;  ///< round the output size up, as PyTorch's ceil_mode
  STAGECRAFT_ATTR_FIELDS(MaxPoolAttrs, (kernel), (stride, padding, ceil_mode))
};

/// Average pooling over 2-D windows.
struct AvgPoolAttrs {
  Hw kernel{0, 0};                ///< window size
  Hw stride{1, 1};                ///< stride
  Pads padding;                   ///< zero padding
  bool ceil_mode = false;         ///< round the output size up
  bool count_include_pad = true;  ///< divide by the full window, padding included
  STAGECRAFT_ATTR_FIELDS(AvgPoolAttrs, (kernel), (stride, padding, ceil_mode, count_include_pad))
};

/// Split along channels into consecutive parts of the given sizes (one output per part).
struct SplitAttrs {
  std::vector<int64_t> sizes;  ///< channels of each output
  STAGECRAFT_ATTR_FIELDS(SplitAttrs, (sizes), ())
};

/// Channel slice [begin, end) of the input.
struct SliceAttrs {
  int64_t begin = 0;  ///< first channel
  int64_t end = 0;    ///< one past the last channel
  STAGECRAFT_ATTR_FIELDS(SliceAttrs, (begin, end), ())
};

/// Constant padding of H and W (negative amounts crop).
struct PadAttrs {
  Pads pads;         ///< amount per side
  double value = 0;  ///< fill value
  /// Mirror the pixels next to the edge instead of filling (ONNX mode "reflect": row -1 is row 1);
  /// pads must then be >= 0 and smaller than the side they extend.
  bool reflect = false;
  STAGECRAFT_ATTR_FIELDS(PadAttrs, (pads), (value, reflect))
};

/// Fully connected layer (GEMM): y = x Wᵀ + b with W [out_features, in_features], over the last
/// axis of its input (rank 2, or a row-major tensor of rank 3 or more: a transformer's tokens).
struct LinearAttrs {
  int64_t in_features = 0;                    ///< input features (weight shape)
  int64_t out_features = 0;                   ///< output features
  bool bias = true;                           ///< whether a bias is added
  Activation activation = Activation::kNone;  ///< fused activation
  STAGECRAFT_ATTR_FIELDS(LinearAttrs, (in_features, out_features), (bias, activation))
};

/// Layer normalisation over the channels of each pixel (rank 4) or the features of each row
/// (rank 2), or the last axis of a row-major tensor of another rank (a transformer's tokens
/// [N, T, C]): y = (x - mean) / sqrt(var + eps) · gamma + beta, mean and (biased) variance over the
/// C values, gamma and beta per channel in the op's weights. ONNX LayerNormalization over the last
/// axis of a channels-last view (ConvNeXt, ViT).
struct LayerNormAttrs {
  double eps = 1e-5;  ///< added to the variance
  STAGECRAFT_ATTR_FIELDS(LayerNormAttrs, (), (eps))
};

/// Local response normalisation across channels (AlexNet, GoogLeNet; ONNX LRN): y = x / (bias +
/// alpha / size · Σ x²)^beta, the sum over the `size` channels centred on each (odd `size`).
struct LrnAttrs {
  int64_t size = 5;     ///< channels in the window (odd)
  double alpha = 1e-4;  ///< scale of the sum of squares (divided by size)
  double beta = 0.75;   ///< exponent
  double bias = 1.0;    ///< added before the power
  STAGECRAFT_ATTR_FIELDS(LrnAttrs, (size), (alpha, beta, bias))
};

/// Space to depth (ONNX SpaceToDepth, TResNet's stem): each block x block patch of pixels becomes
/// channels; output channel (bh · block + bw) · C + c at (y, x) is input channel c at
/// (y · block + bh, x · block + bw). H and W must be multiples of the block.
struct SpaceToDepthAttrs {
  int64_t block = 2;  ///< patch side
  STAGECRAFT_ATTR_FIELDS(SpaceToDepthAttrs, (block), ())
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
  STAGECRAFT_ATTR_FIELDS(ResizeAttrs, (size, scale_h, scale_w), (linear, cubic, align_corners))
};

/// Reshape keeping the batch: the output is [N, dims...] with the same elements in plain (NCHW or
/// NC) order; rank 2 or 4 in and out ([N, C, 1, 1] <-> [N, C], flattening, unflattening).
struct ReshapeAttrs {
  /// Output dimensions after the batch (1 or 3 of them); with `full`, every output dimension
  /// (any rank; the elements keep their row-major order, so the input must be in a plain layout).
  std::vector<int64_t> dims;
  bool full = false;  ///< `dims` includes the first dimension
  STAGECRAFT_ATTR_FIELDS(ReshapeAttrs, (dims), (full))
};

/// Channel shuffle (ShuffleNet): channels viewed as [groups, C / groups], transposed, flattened:
/// output channel k · groups + g is input channel g · (C / groups) + k. With several inputs it
/// shuffles their concatenation along channels (fold_concats_into_shuffles makes those).
struct ChannelShuffleAttrs {
  int64_t groups = 1;  ///< the number of groups
  STAGECRAFT_ATTR_FIELDS(ChannelShuffleAttrs, (groups), ())
};

}  // namespace stagecraft::graph
