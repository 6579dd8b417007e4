#pragma once
/// Arithmetic every backend shares, kept in one place so that the backends agree bit for bit on
/// what a kernel computes: the ReLU6 bound in a tensor's units, symmetric per-output-channel int8
/// weights and the requantising epilogue of int8 convolutions and linear layers (the contract of
/// graph/quantize.h), and the weight re-indexing of merged and NHWC convolutions.
///
/// Example:
///   QuantisedWeights qw = quantise_per_channel(weights.weight, attrs.out_channels);
///   Requantisation r = requantisation(src, dst, qw.scales, weights.bias, spec.dst_channel_scales);
///   // dst[oc] = act(r.output_scales[oc] * (acc[oc] + r.bias[oc])), ReLU6 clipped at r.relu6_max

#include <cstdint>
#include <vector>

#include "graph/op.h"
#include "graph/types.h"

namespace stagecraft::executor {

/// The upper bound of ReLU6 in real units.
inline constexpr float kRelu6Max = 6.0f;
/// The largest magnitude of a symmetric int8 weight.
inline constexpr float kInt8WeightMax = 127.0f;

/// The ReLU6 bound in the units `dst` is stored in: 6 / scale for an 8-bit tensor, 6 otherwise.
float relu6_bound(const graph::TensorDesc& dst);

/// Symmetric per-output-channel int8 weights.
struct QuantisedWeights {
  std::vector<int8_t> values;  ///< same order as the f32 weights (output channel major)
  std::vector<float> scales;   ///< per output channel: max |w| / 127 (1 for an all-zero channel)
};

/// The largest magnitude of an int8 weight read with a u8 source on a CPU without VNNI: there
/// u8 x s8 products are summed in pairs into saturating 16-bit integers (vpmaddubsw), and
/// 255 · 127 · 2 overflows; 7-bit weights cannot (255 · 63 · 2 = 32130), as ONNX Runtime's
/// reduce_range does. (An s8 source oneDNN shifts to u8 and halves the weights itself.)
inline constexpr float kInt8WeightMaxWithoutVnni = 63.0f;

/// Quantises `weights` (output-channel-major: oihw, goihw or oi) with one scale per output
/// channel (max |w| / `max_magnitude`); `out_channels` must divide the size.
QuantisedWeights quantise_per_channel(const std::vector<float>& weights, int64_t out_channels,
                                      float max_magnitude = kInt8WeightMax);

/// The epilogue of an int8 convolution or linear layer: for output channel oc,
/// dst = act(output_scales[oc] * (acc + bias[oc])), where acc is the s32 accumulator of
/// u8/i8 src × i8 weights.
struct Requantisation {
  std::vector<float> output_scales;  ///< src scale × weight scale / dst scale (dst scale 1: f32)
  std::vector<float> bias;           ///< the f32 bias in accumulator units (empty: no bias)
  float relu6_max = kRelu6Max;       ///< ReLU6 bound in the destination's units
};

/// The requantisation of a kernel reading `src` with weight scales `weight_scales` and writing
/// `dst`; `dst_channel_scales` (merged convolutions) overrides dst.scale per channel when not
/// empty; `src_scale_factor` multiplies the source scale (a backend that halves u8 inputs into
/// i8 passes 2).
Requantisation requantisation(const graph::TensorDesc& src, const graph::TensorDesc& dst,
                              const std::vector<float>& weight_scales, const std::vector<float>& bias,
                              const std::vector<float>& dst_channel_scales,
                              float src_scale_factor = 1.0f);

/// Dimensions of a convolution weight tensor in OIHW order (groups folded into O).
struct ConvWeightDims {
  int64_t out = 0, in = 0, kh = 0, kw = 0;  ///< `in` is per group

  /// Offset of element (o, i, y, x) in OIHW order.
  int64_t oihw(int64_t o, int64_t i, int64_t y, int64_t x) const {
    return ((o * in + i) * kh + y) * kw + x;
  }
  /// Offset of element (o, i, y, x) in OHWI order with `in_padded` input channels per row.
  int64_t ohwi(int64_t o, int64_t i, int64_t y, int64_t x, int64_t in_padded) const {
    return ((o * kh + y) * kw + x) * in_padded + i;
  }
  /// Number of elements.
  int64_t size() const { return out * in * kh * kw; }
};

/// The OIHW weight dimensions of a convolution.
ConvWeightDims conv_weight_dims(const graph::Conv2dAttrs& attrs);

/// OIHW weights re-ordered to OHWI with `out_padded` × `in_padded` channels (zero-filled beyond
/// the real ones; pass the real counts for no padding).
template <class T>
std::vector<T> oihw_to_ohwi(const std::vector<T>& oihw, const ConvWeightDims& d, int64_t out_padded,
                            int64_t in_padded) {
  std::vector<T> out(static_cast<size_t>(out_padded * d.kh * d.kw * in_padded), T{});
  for (int64_t o = 0; o < d.out; ++o)
    for (int64_t i = 0; i < d.in; ++i)
      for (int64_t y = 0; y < d.kh; ++y)
        for (int64_t x = 0; x < d.kw; ++x)
          out[static_cast<size_t>(d.ohwi(o, i, y, x, in_padded))] =
              oihw[static_cast<size_t>(d.oihw(o, i, y, x))];
  return out;
}

/// Copies the OIHW weights of a `src`-shaped kernel into the OIHW weights of a larger `dst`-shaped
/// kernel, starting at output channel `o_base`, centred by (`dy`, `dx`) (merged convolutions: the
/// smaller kernels are zero-padded and centred in the largest).
void place_kernel(const std::vector<float>& src, const ConvWeightDims& src_dims,
                  std::vector<float>& dst, const ConvWeightDims& dst_dims, int64_t o_base,
                  int64_t dy, int64_t dx);

}  // namespace stagecraft::executor
