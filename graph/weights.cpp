#include "graph/weights.h"

#include <cmath>
#include <tuple>

#include "common/random.h"
#include "common/strings.h"
#include "graph/errors.h"

namespace stagecraft::graph {

namespace {

// He-uniform bound sqrt(6 / fan_in): the variance 2 / fan_in of He initialisation.
constexpr double kHeNumerator = 6.0;
constexpr double kBiasScale = 0.1;

std::vector<float> uniform(SplitMix64& rng, size_t n, double lo, double hi) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform());
  return v;
}

// A batch norm's multiplier of channel c: gamma / sqrt(var + eps).
double bn_scale(const OpWeights& bn, size_t c, double eps) {
  return bn.gamma[c] / std::sqrt(static_cast<double>(bn.var[c]) + eps);
}

}  // namespace

const OpWeights* WeightStore::find(const std::string& op) const {
  auto it = weights_.find(op);
  return it == weights_.end() ? nullptr : &it->second;
}

std::pair<size_t, size_t> weight_shape(const Graph& graph, OpId id) {
  const Op& op = graph.op(id);
  if (op.kind == OpKind::kConv2d) {
    const auto& a = op.attrs_as<Conv2dAttrs>();
    return {static_cast<size_t>(a.out_channels * (a.in_channels / a.groups) * a.kernel.h *
                                a.kernel.w),
            a.bias ? static_cast<size_t>(a.out_channels) : 0};
  }
  if (op.kind == OpKind::kConvTranspose2d) {
    const auto& a = op.attrs_as<ConvTranspose2dAttrs>();
    return {static_cast<size_t>(a.out_channels * (a.in_channels / a.groups) * a.kernel.h * a.kernel.w),
            a.bias ? static_cast<size_t>(a.out_channels) : 0};
  }
  if (op.kind == OpKind::kLinear) {
    const auto& a = op.attrs_as<LinearAttrs>();
    return {static_cast<size_t>(a.in_features * a.out_features),
            a.bias ? static_cast<size_t>(a.out_features) : 0};
  }
  if (op.kind == OpKind::kConcatConstant) {
    const auto& a = op.attrs_as<ConcatConstantAttrs>();
    const Shape& in = graph.value(op.inputs[0]).desc.shape;
    const int64_t extent = a.axis >= 1 && a.axis < static_cast<int64_t>(in.rank()) ? in[static_cast<size_t>(a.axis)] : 1;
    return {static_cast<size_t>(in.numel() / in[0] / extent * a.count), 0};
  }
  if (op.kind == OpKind::kBinary) {
    const auto& a = op.attrs_as<BinaryAttrs>();
    if (a.constant.empty()) return {0, 0};
    size_t n = 1;
    for (int64_t d : a.constant) n *= static_cast<size_t>(d);
    return {n, 0};
  }
  return {0, 0};
}

WeightStore random_weights(const Graph& graph, uint64_t seed) {
  WeightStore store;
  for (const Op& op : graph.ops()) {
    SplitMix64 rng(derive_seed(seed, static_cast<uint64_t>(op.id)));
    if (op.kind == OpKind::kConv2d || op.kind == OpKind::kLinear || op.kind == OpKind::kConvTranspose2d) {
      const auto [w, b] = weight_shape(graph, op.id);
      const size_t outputs = op.kind == OpKind::kConv2d ? static_cast<size_t>(op.attrs_as<Conv2dAttrs>().out_channels)
                             : op.kind == OpKind::kLinear
                                 ? static_cast<size_t>(op.attrs_as<LinearAttrs>().out_features)
                                 : static_cast<size_t>(op.attrs_as<ConvTranspose2dAttrs>().out_channels);
      const double fan_in = static_cast<double>(w / outputs);
      const double bound = std::sqrt(kHeNumerator / fan_in);
      OpWeights& entry = store[op.name];
      entry.weight = uniform(rng, w, -bound, bound);
      if (b > 0) entry.bias = uniform(rng, b, -kBiasScale, kBiasScale);
    } else if ((op.kind == OpKind::kBinary || op.kind == OpKind::kConcatConstant) &&
               weight_shape(graph, op.id).first > 0) {
      // Constants of scale-like size, away from 0 (they may divide).
      store[op.name].weight = uniform(rng, weight_shape(graph, op.id).first, 0.5, 1.5);
    } else if (op.kind == OpKind::kWhere) {
      const auto& a = op.attrs_as<WhereAttrs>();
      OpWeights& entry = store[op.name];
      if (a.condition_constant) {
        entry.gamma = uniform(rng, static_cast<size_t>(Shape(a.condition_shape).numel()), 0.0, 1.0);
        for (float& v : entry.gamma) v = v < 0.5f ? 0.0f : 1.0f;
      }
      if (a.x_constant) entry.weight = uniform(rng, static_cast<size_t>(Shape(a.x_shape).numel()), -1.0, 1.0);
      if (a.y_constant) entry.bias = uniform(rng, static_cast<size_t>(Shape(a.y_shape).numel()), -1.0, 1.0);
    } else if (op.kind == OpKind::kBatchNorm) {
      const size_t c = static_cast<size_t>(graph.value(op.inputs[0]).desc.shape[1]);
      OpWeights& entry = store[op.name];
      entry.gamma = uniform(rng, c, 0.5, 1.5);
      entry.beta = uniform(rng, c, -kBiasScale, kBiasScale);
      entry.mean = uniform(rng, c, -kBiasScale, kBiasScale);
      entry.var = uniform(rng, c, 0.5, 1.5);
    } else if (op.kind == OpKind::kLayerNorm) {
      const TensorDesc& x = graph.value(op.inputs[0]).desc;
      const size_t c = static_cast<size_t>(x.shape[takes_layouts(x) ? 1 : x.shape.rank() - 1]);
      OpWeights& entry = store[op.name];
      entry.gamma = uniform(rng, c, 0.5, 1.5);
      entry.beta = uniform(rng, c, -kBiasScale, kBiasScale);
    }
  }
  return store;
}

WeightStore fold_weights(const Graph& raw, WeightStore weights, const PassLog& log) {
  for (const FoldedBatchNorm& f : log.folded) {
    const OpWeights* bn = weights.find(f.batch_norm);
    const auto bn_id = raw.find_op(f.batch_norm);
    if (!bn || !weights.find(f.conv) || !bn_id) {
      throw GraphError(cat("cannot fold batch norm '", f.batch_norm, "' into '", f.conv,
                           "': weights missing"));
    }
    const double eps = raw.op(*bn_id).attrs_as<BatchNormAttrs>().eps;
    OpWeights& conv = weights[f.conv];  // folded in place
    const size_t channels = bn->gamma.size();
    const size_t per_channel = conv.weight.size() / channels;
    std::vector<float> bias(channels, 0.0f);
    for (size_t c = 0; c < channels; ++c) {
      const double scale = bn_scale(*bn, c, eps);
      for (size_t i = 0; i < per_channel; ++i) {
        float& w = conv.weight[c * per_channel + i];
        w = static_cast<float>(w * scale);
      }
      const double b = conv.bias.empty() ? 0.0 : conv.bias[c];
      bias[c] = static_cast<float>((b - bn->mean[c]) * scale + bn->beta[c]);
    }
    conv.bias = std::move(bias);
  }
  for (const std::string& name : log.batch_norm_convolutions) {
    const auto bn_id = raw.find_op(name);
    OpWeights* w = weights.find(name) ? &weights[name] : nullptr;
    if (!bn_id || !w || w->gamma.empty()) {
      throw GraphError(cat("cannot make batch norm '", name, "' a convolution: weights missing"));
    }
    const double eps = raw.op(*bn_id).attrs_as<BatchNormAttrs>().eps;
    const size_t channels = w->gamma.size();
    w->weight.resize(channels);
    w->bias.resize(channels);
    for (size_t c = 0; c < channels; ++c) {
      const double scale = bn_scale(*w, c, eps);
      w->weight[c] = static_cast<float>(scale);
      w->bias[c] = static_cast<float>(w->beta[c] - w->mean[c] * scale);
    }
    w->gamma.clear();
    w->beta.clear();
    w->mean.clear();
    w->var.clear();
  }
  // After the batch norms: a scale folds into the convolution as the batch norm left it.
  for (const FoldedScale& f : log.scales) {
    OpWeights* conv = weights.find(f.conv) ? &weights[f.conv] : nullptr;
    if (!conv) throw GraphError(cat("cannot fold scale '", f.scale, "' into '", f.conv, "': weights missing"));
    for (float& w : conv->weight) w = static_cast<float>(w * f.factor);
    for (float& b : conv->bias) b = static_cast<float>(b * f.factor);
  }
  // Then per-channel constants, in the order they were folded.
  for (const FoldedConstant& f : log.constants) {
    OpWeights* conv = weights.find(f.conv) ? &weights[f.conv] : nullptr;
    const OpWeights* binary = weights.find(f.binary);
    const auto conv_id = raw.find_op(f.conv);
    if (!conv || !binary || binary->weight.empty() || !conv_id) {
      throw GraphError(cat("cannot fold '", f.binary, "' into '", f.conv, "': weights missing"));
    }
    const Op& producer = raw.op(*conv_id);
    const auto out = static_cast<size_t>(producer.kind == OpKind::kLinear
                                             ? producer.attrs_as<LinearAttrs>().out_features
                                             : producer.attrs_as<Conv2dAttrs>().out_channels);
    const std::vector<float>& c = binary->weight;
    const auto at = [&](size_t k) { return static_cast<double>(c.size() == 1 ? c[0] : c.at(k)); };
    if (f.op == BinaryOp::kAdd || f.op == BinaryOp::kSub) {
      if (conv->bias.empty()) conv->bias.assign(out, 0.0f);
      for (size_t k = 0; k < out; ++k) {
        conv->bias[k] = static_cast<float>(conv->bias[k] + (f.op == BinaryOp::kAdd ? at(k) : -at(k)));
      }
      continue;
    }
    const size_t per_channel = conv->weight.size() / out;
    const auto apply = [&](float v, size_t k) {
      return static_cast<float>(f.op == BinaryOp::kMul ? v * at(k) : v / at(k));
    };
    for (size_t i = 0; i < conv->weight.size(); ++i) conv->weight[i] = apply(conv->weight[i], i / per_channel);
    for (size_t k = 0; k < conv->bias.size(); ++k) conv->bias[k] = apply(conv->bias[k], k);
  }
  return weights;
}

void check_weights(const Graph& graph, const WeightStore& weights) {
  for (const Op& op : graph.ops()) {
    if (op.kind == OpKind::kBatchNorm) {
      const OpWeights* w = weights.find(op.name);
      const size_t c = static_cast<size_t>(graph.value(op.inputs[0]).desc.shape[1]);
      if (!w || w->gamma.size() != c || w->beta.size() != c || w->mean.size() != c ||
          w->var.size() != c) {
        throw GraphError(cat("op '", op.name, "' (batch_norm): needs scale, shift, mean and "
                             "variance of ", c, " channels"));
      }
      continue;
    }
    if (op.kind == OpKind::kWhere) {
      const auto& a = op.attrs_as<WhereAttrs>();
      const OpWeights* w = weights.find(op.name);
      static const OpWeights kNone;
      const OpWeights& e = w ? *w : kNone;
      for (const auto& [constant, shape, values, what] :
           {std::tuple{a.condition_constant, &a.condition_shape, &e.gamma, "condition"},
            {a.x_constant, &a.x_shape, &e.weight, "x"}, {a.y_constant, &a.y_shape, &e.bias, "y"}}) {
        if (constant && static_cast<int64_t>(values->size()) != Shape(*shape).numel()) {
          throw GraphError(cat("op '", op.name, "' (where): the constant ", what, " needs ", Shape(*shape).numel(),
                               " values, got ", values->size()));
        }
      }
      continue;
    }
    if (op.kind == OpKind::kLayerNorm) {
      const OpWeights* w = weights.find(op.name);
      const TensorDesc& x = graph.value(op.inputs[0]).desc;
      const size_t c = static_cast<size_t>(x.shape[takes_layouts(x) ? 1 : x.shape.rank() - 1]);
      if (!w || w->gamma.size() != c || w->beta.size() != c) {
        throw GraphError(cat("op '", op.name, "' (layer_norm): needs scale and shift of ", c, " channels"));
      }
      continue;
    }
    const auto [w, b] = weight_shape(graph, op.id);
    if (w == 0) continue;
    const OpWeights* entry = weights.find(op.name);
    if (!entry) throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): no weights"));
    if (entry->weight.size() != w || entry->bias.size() != b) {
      throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): weights have ",
                           entry->weight.size(), "+", entry->bias.size(), " values, expected ", w,
                           "+", b));
    }
  }
}

namespace {

// Scales input channel c of convolution (or batch norm made one) `name` by factors[c].
void scale_input_channels(const Graph& graph, WeightStore& weights, const std::string& name,
                          const std::vector<float>& factors) {
  const auto id = graph.find_op(name);
  OpWeights* w = weights.find(name) ? &weights[name] : nullptr;
  if (!id || !w) throw GraphError(cat("cannot scale the input channels of '", name, "': no such op or weights"));
  const Op& op = graph.op(*id);
  size_t in = factors.size(), out = in, groups = in, taps = 1;  // a batch norm: one weight per channel
  if (op.kind == OpKind::kConv2d) {
    const auto& a = op.attrs_as<Conv2dAttrs>();
    in = static_cast<size_t>(a.in_channels);
    out = static_cast<size_t>(a.out_channels);
    groups = static_cast<size_t>(a.groups);
    taps = static_cast<size_t>(a.kernel.h * a.kernel.w);
  } else if (op.kind != OpKind::kBatchNorm) {
    throw GraphError(cat("cannot scale the input channels of '", name, "' (", to_string(op.kind), ")"));
  }
  const size_t per_group = in / groups;
  if (factors.size() != in || w->weight.size() != out * per_group * taps) {
    throw GraphError(cat("cannot scale the input channels of '", name, "': ", factors.size(),
                         " factors for ", in, " channels, ", w->weight.size(), " weights"));
  }
  for (size_t o = 0; o < out; ++o) {
    const size_t first = o / (out / groups) * per_group;  // the group's first input channel
    for (size_t i = 0; i < per_group; ++i) {
      float* tap = &w->weight[(o * per_group + i) * taps];
      for (size_t t = 0; t < taps; ++t) tap[t] *= factors[first + i];
    }
  }
}

}  // namespace

WeightStore quantised_weights(const Graph& graph, WeightStore weights, const QuantizeReport& report) {
  PassLog log;
  log.batch_norm_convolutions = report.batch_norm_convolutions;
  WeightStore folded = fold_weights(graph, std::move(weights), log);
  for (const auto& [name, factors] : report.input_channel_factors)
    scale_input_channels(graph, folded, name, factors);
  return folded;
}

}  // namespace stagecraft::graph
