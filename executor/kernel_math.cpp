#include "executor/kernel_math.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace stagecraft::executor {

float relu6_bound(const graph::TensorDesc& dst) {
  return graph::is_int8(dst.dtype) ? kRelu6Max / dst.scale : kRelu6Max;
}

QuantisedWeights quantise_per_channel(const std::vector<float>& weights, int64_t out_channels,
                                      float max_magnitude) {
  assert(out_channels > 0 && weights.size() % static_cast<size_t>(out_channels) == 0);
  QuantisedWeights q;
  q.values.resize(weights.size());
  q.scales.resize(static_cast<size_t>(out_channels));
  const size_t per = weights.size() / static_cast<size_t>(out_channels);
  for (size_t oc = 0; oc < q.scales.size(); ++oc) {
    const auto begin = weights.begin() + static_cast<std::ptrdiff_t>(oc * per);
    float m = 0;
    for (auto it = begin; it != begin + static_cast<std::ptrdiff_t>(per); ++it) m = std::max(m, std::fabs(*it));
    const float scale = m > 0 ? m / max_magnitude : 1.0f;
    q.scales[oc] = scale;
    for (size_t i = 0; i < per; ++i) {
      q.values[oc * per + i] = static_cast<int8_t>(
          std::clamp(std::nearbyint(weights[oc * per + i] / scale), -max_magnitude, max_magnitude));
    }
  }
  return q;
}

Requantisation requantisation(const graph::TensorDesc& src, const graph::TensorDesc& dst,
                              const std::vector<float>& weight_scales, const std::vector<float>& bias,
                              const std::vector<float>& dst_channel_scales, float src_scale_factor) {
  const float src_scale = src.scale * src_scale_factor;
  Requantisation r;
  r.output_scales.resize(weight_scales.size());
  for (size_t oc = 0; oc < weight_scales.size(); ++oc) {
    const float dst_scale = !graph::is_int8(dst.dtype)    ? 1.0f
                            : dst_channel_scales.empty() ? dst.scale
                                                         : dst_channel_scales[oc];
    r.output_scales[oc] = src_scale * weight_scales[oc] / dst_scale;
    if (!bias.empty()) r.bias.push_back(bias[oc] / (src_scale * weight_scales[oc]));
  }
  r.relu6_max = relu6_bound(dst);
  return r;
}

ConvWeightDims conv_weight_dims(const graph::Conv2dAttrs& attrs) {
  return {attrs.out_channels, attrs.in_channels / std::max<int64_t>(1, attrs.groups),
          attrs.kernel.h, attrs.kernel.w};
}

void place_kernel(const std::vector<float>& src, const ConvWeightDims& s, std::vector<float>& dst,
                  const ConvWeightDims& d, int64_t o_base, int64_t dy, int64_t dx) {
  assert(s.in == d.in && s.kh + dy <= d.kh && s.kw + dx <= d.kw);
  for (int64_t o = 0; o < s.out; ++o)
    for (int64_t i = 0; i < s.in; ++i)
      for (int64_t y = 0; y < s.kh; ++y)
        for (int64_t x = 0; x < s.kw; ++x)
          dst[static_cast<size_t>(d.oihw(o_base + o, i, y + dy, x + dx))] =
              src[static_cast<size_t>(s.oihw(o, i, y, x))];
}

}  // namespace stagecraft::executor
