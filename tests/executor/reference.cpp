// Reference semantics of every op kind (PyTorch's) as plain loops over logical NCHW / NC tensors.
// Inputs: a graph, its weights by op name, its input tensors. Outputs: the graph outputs.
// Complexity: each op's direct definition, e.g. O(N·O·(I/groups)·KH·KW·OH·OW) for a convolution.
// Sums are accumulated in double so that the reference is more accurate than what it checks.

#include "tests/executor/reference.h"
#include "tests/executor/reference_detail.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>

#include "common/random.h"
#include "common/strings.h"
#include "graph/activation_kinds.h"
#include "graph/errors.h"
#include "graph/shape_inference.h"

namespace stagecraft::executor::testing {

namespace detail {

using graph::Activation;
using graph::Shape;

HostTensor zeros(Shape shape) {
  const auto numel = static_cast<size_t>(shape.numel());
  return HostTensor{std::move(shape), std::vector<float>(numel, 0.0f)};
}

double activate(double x, Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return std::max(x, 0.0);
    case Activation::kRelu6:
      return std::clamp(x, 0.0, kRelu6Max);
    case Activation::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Activation::kHardSigmoid:
      return std::clamp(x + 3.0, 0.0, kRelu6Max) / 6.0;
    case Activation::kHardSwish:
      return x * std::clamp(x + 3.0, 0.0, kRelu6Max) / 6.0;
    case Activation::kSilu:
      return x / (1.0 + std::exp(-x));
    case Activation::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kSqrt:
      return std::sqrt(x);
  }
  return x;
}

}  // namespace detail

namespace {

using detail::activate;
using detail::channel_shuffle;
using detail::channel_slice;
using detail::concat;
using detail::resize;
using detail::activate_all;
using detail::add;
using detail::avg_pool;
using detail::batch_norm;
using detail::conv2d;
using detail::conv_transpose2d;
using detail::global_avg_pool;
using detail::global_max_pool;
using detail::layer_norm;
using detail::max_pool;
using detail::pad_constant;
using detail::AxisView;
using detail::Nchw;
using detail::binary;
using detail::grid_sample;
using detail::pool_nd;
using detail::top_k;
using detail::gather_elements;
using detail::resize_nd;
using detail::where;
using detail::zeros;

using graph::Activation;
using graph::GraphError;
using graph::Op;
using graph::OpKind;
using graph::OpWeights;
using graph::Pads;
using graph::Shape;

// random_tensor draws 24-bit integers k and returns k / 2^23 - 1: uniform in [-1, 1) and exact
// in fp32, so no value rounds up to 1.
constexpr int kRandomBits = 24;
constexpr int kRandomDiscardedBits = 64 - kRandomBits;
constexpr double kRandomStep = 2.0 / static_cast<double>(int64_t{1} << kRandomBits);
constexpr double kRandomLow = -1.0;






std::vector<HostTensor> split(const HostTensor& src, const graph::SplitAttrs& a) {
  std::vector<HostTensor> dsts;
  int64_t begin = 0;
  for (int64_t size : a.sizes) {
    dsts.push_back(channel_slice(src, begin, begin + size));
    begin += size;
  }
  return dsts;
}

HostTensor flatten(const HostTensor& src) {
  const int64_t batch = src.shape[0];
  return HostTensor{Shape{batch, src.shape.numel() / batch}, src.data};
}

// Over the last axis (the rows of a rank-2 matrix, or of a row-major tensor of higher rank).
HostTensor linear(const HostTensor& src, const graph::LinearAttrs& a, const OpWeights& w) {
  const int64_t batch = src.shape.numel() / a.in_features;
  std::vector<int64_t> out_dims = src.shape.dims();
  out_dims.back() = a.out_features;
  HostTensor dst = zeros(Shape(out_dims));
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t o = 0; o < a.out_features; ++o) {
      double sum = a.bias ? w.bias[static_cast<size_t>(o)] : 0.0;
      for (int64_t i = 0; i < a.in_features; ++i) {
        sum += static_cast<double>(src.data[static_cast<size_t>(n * a.in_features + i)]) *
               w.weight[static_cast<size_t>(o * a.in_features + i)];
      }
      dst.data[static_cast<size_t>(n * a.out_features + o)] =
          static_cast<float>(activate(sum, a.activation));
    }
  }
  return dst;
}

// Softmax of each row, shifted by the row's maximum so that exp never overflows.
// Softmax over one axis (1: the features of a row, the channels of a pixel).
HostTensor softmax(const HostTensor& src, int64_t axis) {
  const AxisView v(src.shape, static_cast<size_t>(axis));
  const int64_t rows = v.outer, cols = v.extent, pixels = v.inner;
  HostTensor dst = zeros(src.shape);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < pixels; ++p) {
      const auto at = [&](int64_t c) { return static_cast<size_t>((r * cols + c) * pixels + p); };
      double row_max = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < cols; ++c) row_max = std::max<double>(row_max, src.data[at(c)]);
      double sum = 0.0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(src.data[at(c)] - row_max);
      for (int64_t c = 0; c < cols; ++c) dst.data[at(c)] = static_cast<float>(std::exp(src.data[at(c)] - row_max) / sum);
    }
  }
  return dst;
}

// ONNX MatMul of tensors of equal rank >= 3, batch dimensions broadcast, in double.
HostTensor matmul(const HostTensor& a, const HostTensor& b) {
  const size_t r = a.shape.rank();
  const int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  std::vector<int64_t> dims(r);
  for (size_t d = 0; d + 2 < r; ++d) dims[d] = std::max(a.shape[d], b.shape[d]);
  dims[r - 2] = m;
  dims[r - 1] = n;
  HostTensor y = zeros(Shape(dims));
  const int64_t batches = y.shape.numel() / (m * n);
  for (int64_t bi = 0; bi < batches; ++bi) {
    // The batch's offsets in a and b (broadcast dimensions of size 1 repeat).
    int64_t rest = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t d = r - 2; d-- > 0;) {
      const int64_t c = rest % dims[d];
      rest /= dims[d];
      oa += (a.shape[d] == 1 ? 0 : c) * sa;
      ob += (b.shape[d] == 1 ? 0 : c) * sb;
      sa *= a.shape[d];
      sb *= b.shape[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t t = 0; t < k; ++t)
          sum += static_cast<double>(a.data[static_cast<size_t>(oa * m * k + i * k + t)]) *
                 b.data[static_cast<size_t>(ob * k * n + t * n + j)];
        y.data[static_cast<size_t>((bi * m + i) * n + j)] = static_cast<float>(sum);
      }
  }
  return y;
}

// Output dimension i is input dimension perm[i].
HostTensor transpose(const HostTensor& x, const std::vector<int64_t>& perm) {
  const size_t r = x.shape.rank();
  std::vector<int64_t> in_strides(r, 1), dims(r);
  for (size_t d = r; d-- > 1;) in_strides[d - 1] = in_strides[d] * x.shape[d];
  for (size_t d = 0; d < r; ++d) dims[d] = x.shape[static_cast<size_t>(perm[d])];
  HostTensor y = zeros(Shape(dims));
  for (int64_t i = 0; i < y.shape.numel(); ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = r; d-- > 0;) {
      offset += rest % dims[d] * in_strides[static_cast<size_t>(perm[d])];
      rest /= dims[d];
    }
    y.data[static_cast<size_t>(i)] = x.data[static_cast<size_t>(offset)];
  }
  return y;
}

const OpWeights& weights_of(const graph::WeightStore& weights, const Op& op) {
  const OpWeights* w = weights.find(op.name);
  if (!w) throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): no weights"));
  return *w;
}

// The outputs of one op from its inputs (in slot order).
std::vector<HostTensor> evaluate(const Op& op, const std::vector<const HostTensor*>& srcs,
                                 const graph::WeightStore& weights) {
  const HostTensor& x = *srcs[0];
  switch (op.kind) {
    case OpKind::kConvTranspose2d:
      return {conv_transpose2d(x, op.attrs_as<graph::ConvTranspose2dAttrs>(), weights_of(weights, op))};
    case OpKind::kConv2d:
      return {conv2d(x, op.attrs_as<graph::Conv2dAttrs>(), weights_of(weights, op),
                     srcs.size() > 1 ? srcs[1] : nullptr)};
    case OpKind::kBatchNorm: {
      const auto& a = op.attrs_as<graph::BatchNormAttrs>();
      return {activate_all(batch_norm(x, a, weights_of(weights, op)), a.activation)};
    }
    case OpKind::kMaxPool:
      return {max_pool(x, op.attrs_as<graph::MaxPoolAttrs>())};
    case OpKind::kAvgPool:
      return {avg_pool(x, op.attrs_as<graph::AvgPoolAttrs>())};
    case OpKind::kGlobalAvgPool:
      return {global_avg_pool(x)};
    case OpKind::kAdd:
      return {add(srcs, op.attrs_as<graph::AddAttrs>())};
    case OpKind::kConcat:
      return {concat(srcs)};
    case OpKind::kSplit:
      return split(x, op.attrs_as<graph::SplitAttrs>());
    case OpKind::kSlice: {
      const auto& a = op.attrs_as<graph::SliceAttrs>();
      return {channel_slice(x, a.begin, a.end)};
    }
    case OpKind::kIdentity:
      return {x};
    case OpKind::kScale: {
      HostTensor y = x;
      const double factor = op.attrs_as<graph::ScaleAttrs>().factor;
      for (float& v : y.data) v = static_cast<float>(v * factor);
      return {y};
    }
    case OpKind::kPad: {
      const auto& a = op.attrs_as<graph::PadAttrs>();
      if (a.reflect) {
        const Nchw in(x.shape);
        HostTensor y = zeros(Shape{in.n, in.c, in.h + a.pads.top + a.pads.bottom, in.w + a.pads.left + a.pads.right});
        const Nchw out(y.shape);
        const auto mirror = [](int64_t i, int64_t size) { return i < 0 ? -i : i >= size ? 2 * (size - 1) - i : i; };
        for (int64_t n = 0; n < out.n; ++n)
          for (int64_t c = 0; c < out.c; ++c)
            for (int64_t r = 0; r < out.h; ++r)
              for (int64_t col = 0; col < out.w; ++col)
                y.data[out.at(n, c, r, col)] =
                    x.data[in.at(n, c, mirror(r - a.pads.top, in.h), mirror(col - a.pads.left, in.w))];
        return {y};
      }
      return {pad_constant(x, a.pads, static_cast<float>(a.value))};
    }
    case OpKind::kFlatten:
      return {flatten(x)};
    case OpKind::kLinear:
      return {linear(x, op.attrs_as<graph::LinearAttrs>(), weights_of(weights, op))};
    case OpKind::kSoftmax: {
      const auto& a = op.attrs_as<graph::SoftmaxAttrs>();
      if (a.hard) {  // 1 at the first largest element of each line along the axis
        HostTensor y = x;
        int64_t inner = 1;
        for (size_t d = static_cast<size_t>(a.axis) + 1; d < x.shape.rank(); ++d) inner *= x.shape[d];
        const int64_t n = x.shape[static_cast<size_t>(a.axis)];
        for (int64_t o = 0; o < x.shape.numel() / (n * inner); ++o) {
          for (int64_t j = 0; j < inner; ++j) {
            int64_t best = 0;
            for (int64_t k = 1; k < n; ++k) {
              if (x.data[static_cast<size_t>((o * n + k) * inner + j)] > x.data[static_cast<size_t>((o * n + best) * inner + j)]) best = k;
            }
            for (int64_t k = 0; k < n; ++k) y.data[static_cast<size_t>((o * n + k) * inner + j)] = k == best ? 1.0f : 0.0f;
          }
        }
        return {y};
      }
      HostTensor y = softmax(x, a.axis);
      if (a.log) {  // log of the double-precision softmax: the reference's accuracy is enough here
        for (float& v : y.data) v = static_cast<float>(std::log(static_cast<double>(v)));
      }
      return {y};
    }
    case OpKind::kClip: {
      const auto& a = op.attrs_as<graph::ClipAttrs>();
      HostTensor y = x;
      for (float& v : y.data) v = static_cast<float>(std::clamp(static_cast<double>(v), a.min, a.max));
      return {y};
    }
    case OpKind::kHardSigmoid: {
      const auto& a = op.attrs_as<graph::HardSigmoidAttrs>();
      HostTensor y = x;
      for (float& v : y.data) v = static_cast<float>(std::clamp(a.alpha * v + a.beta, 0.0, 1.0));
      return {y};
    }
    STAGECRAFT_PLAIN_ACTIVATION_KINDS:
      return {activate_all(x, graph::activation_of_kind(op.kind))};
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceSum:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd: {
      const auto& axes = op.attrs_as<graph::ReduceAttrs>().axes;
      Shape out_shape = x.shape;
      for (int64_t a : axes) out_shape[static_cast<size_t>(a)] = 1;
      const bool max = op.kind == OpKind::kReduceMax, min = op.kind == OpKind::kReduceMin;
      const bool prod = op.kind == OpKind::kReduceProd;
      std::vector<double> acc(static_cast<size_t>(out_shape.numel()), max ? -1e300 : min ? 1e300 : prod ? 1.0 : 0.0);
      const size_t rank = x.shape.rank();
      for (int64_t i = 0; i < x.shape.numel(); ++i) {
        // The output element of input element i: its coordinates with the reduced ones at 0.
        int64_t rest = i, at = 0, stride = 1;
        for (size_t d = rank; d-- > 0;) {
          const int64_t coord = rest % x.shape[d];
          rest /= x.shape[d];
          at += (out_shape[d] == 1 ? 0 : coord) * stride;
          stride *= out_shape[d];
        }
        double& a = acc[static_cast<size_t>(at)];
        const double v = x.data[static_cast<size_t>(i)];
        a = max ? std::max(a, v) : min ? std::min(a, v) : prod ? a * v : a + v;
      }
      const double count = static_cast<double>(x.shape.numel() / out_shape.numel());
      HostTensor y = zeros(out_shape);
      for (size_t i = 0; i < acc.size(); ++i) {
        y.data[i] = static_cast<float>(op.kind == OpKind::kReduceMean ? acc[i] / count : acc[i]);
      }
      return {y};
    }
    case OpKind::kSpaceToDepth: {
      const int64_t b = op.attrs_as<graph::SpaceToDepthAttrs>().block;
      const Nchw in(x.shape);
      HostTensor y = zeros(Shape{in.n, in.c * b * b, in.h / b, in.w / b});
      const Nchw out(y.shape);
      for (int64_t n = 0; n < out.n; ++n)
        for (int64_t oc = 0; oc < out.c; ++oc)
          for (int64_t r = 0; r < out.h; ++r)
            for (int64_t col = 0; col < out.w; ++col) {
              const int64_t patch = oc / in.c, c = oc % in.c;
              y.data[out.at(n, oc, r, col)] = x.data[in.at(n, c, r * b + patch / b, col * b + patch % b)];
            }
      return {y};
    }
    case OpKind::kLayerNorm:
      return {layer_norm(x, op.attrs_as<graph::LayerNormAttrs>(), weights_of(weights, op))};
    case OpKind::kBinary:
      return {binary(srcs, op.attrs_as<graph::BinaryAttrs>(), weights, op)};
    case OpKind::kWhere:
      return {where(srcs, op.attrs_as<graph::WhereAttrs>(), weights, op)};
    case OpKind::kGridSample:
      return {grid_sample(x, *srcs[1], op.attrs_as<graph::GridSampleAttrs>())};
    case OpKind::kPoolNd:
      return {pool_nd(x, op.attrs_as<graph::PoolNdAttrs>())};
    case OpKind::kResizeNd:
      return {resize_nd(x, op.attrs_as<graph::ResizeNdAttrs>())};
    case OpKind::kTopK:
      return top_k(x, op.attrs_as<graph::TopKAttrs>());
    case OpKind::kGatherElements:
      return {gather_elements(x, *srcs[1], op.attrs_as<graph::GatherElementsAttrs>())};
    case OpKind::kGlobalMaxPool:
      return {global_max_pool(x)};
    case OpKind::kReshape: {
      const auto& a = op.attrs_as<graph::ReshapeAttrs>();
      std::vector<int64_t> dims;
      if (!a.full) dims.push_back(x.shape[0]);
      dims.insert(dims.end(), a.dims.begin(), a.dims.end());
      return {HostTensor{Shape(dims), x.data}};  // plain order is unchanged
    }
    case OpKind::kMatMul:
      return {matmul(x, *srcs[1])};
    case OpKind::kTranspose:
      return {transpose(x, op.attrs_as<graph::TransposeAttrs>().perm)};
    case OpKind::kNarrow: {
      const auto& a = op.attrs_as<graph::NarrowAttrs>();
      const AxisView v(x.shape, static_cast<size_t>(a.axis));
      Shape out = x.shape;
      out[static_cast<size_t>(a.axis)] = a.end - a.begin;
      HostTensor y = zeros(out);
      size_t k = 0;
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t e = a.begin; e < a.end; ++e)
          for (int64_t i = 0; i < v.inner; ++i) y.data[k++] = x.data[static_cast<size_t>((o * v.extent + e) * v.inner + i)];
      return {y};
    }
    case OpKind::kConcatConstant: {
      const auto& a = op.attrs_as<graph::ConcatConstantAttrs>();
      const std::vector<float>& c = weights_of(weights, op).weight;
      const AxisView v(x.shape, static_cast<size_t>(a.axis));
      const int64_t per_sample = v.outer / x.shape[0];  // the constant's rows before the axis
      Shape out = x.shape;
      out[static_cast<size_t>(a.axis)] += a.count;
      HostTensor y = zeros(out);
      size_t k = 0;
      for (int64_t o = 0; o < v.outer; ++o) {
        const auto input = [&] {
          for (int64_t e = 0; e < v.extent * v.inner; ++e) y.data[k++] = x.data[static_cast<size_t>(o * v.extent * v.inner + e)];
        };
        const auto constant = [&] {
          for (int64_t e = 0; e < a.count * v.inner; ++e) y.data[k++] = c[static_cast<size_t>((o % per_sample) * a.count * v.inner + e)];
        };
        if (a.before) constant(), input();
        else input(), constant();
      }
      return {y};
    }
    case OpKind::kChannelShuffle:  // of the concatenation of its inputs
      return {channel_shuffle(srcs.size() == 1 ? x : concat(srcs), op.attrs_as<graph::ChannelShuffleAttrs>().groups)};
    case OpKind::kResize:
      return {resize(x, op.attrs_as<graph::ResizeAttrs>())};
    case OpKind::kLeakyRelu: {
      const double alpha = op.attrs_as<graph::LeakyReluAttrs>().alpha;
      HostTensor y = x;
      for (float& v : y.data) v = v >= 0 ? v : static_cast<float>(alpha * v);
      return {y};
    }
    case OpKind::kLrn: {  // ONNX's definition, in double
      const auto& a = op.attrs_as<graph::LrnAttrs>();
      const int64_t n = x.shape[0], c = x.shape[1], hw = x.shape[2] * x.shape[3];
      const int64_t before = (a.size - 1) / 2, after = a.size - 1 - before;
      HostTensor y = x;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t p = 0; p < hw; ++p) {
            double sum = 0;
            for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
              const double v = x.data[static_cast<size_t>((b * c + k) * hw + p)];
              sum += v * v;
            }
            const auto i = static_cast<size_t>((b * c + ch) * hw + p);
            y.data[i] = static_cast<float>(x.data[i] / std::pow(a.bias + a.alpha / static_cast<double>(a.size) * sum, a.beta));
          }
        }
      }
      return {y};
    }
    case OpKind::kUnary: {
      const auto& a = op.attrs_as<graph::UnaryAttrs>();
      HostTensor y = x;
      for (float& v : y.data) v = graph::apply_unary(a, v);
      return {y};
    }
  }
  throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): no reference"));
}

}  // namespace

HostTensor random_tensor(const graph::Shape& shape, uint64_t seed) {
  SplitMix64 rng(seed);
  HostTensor t = zeros(shape);
  for (float& v : t.data) {
    const auto k = static_cast<double>(rng.next() >> kRandomDiscardedBits);
    v = static_cast<float>(kRandomLow + k * kRandomStep);
  }
  return t;
}

std::vector<HostTensor> reference_run(const graph::Graph& graph, const graph::WeightStore& weights,
                                      const std::vector<HostTensor>& inputs) {
  graph::check_weights(graph, weights);
  const std::vector<graph::ValueId>& graph_inputs = graph.inputs();
  if (inputs.size() != graph_inputs.size()) {
    throw GraphError(cat("run graph '", graph.name(), "': it has ", graph_inputs.size(),
                         " input(s), got ", inputs.size()));
  }
  std::vector<HostTensor> values(graph.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const graph::Value& value = graph.value(graph_inputs[i]);
    const HostTensor& src = inputs[i];
    if (src.shape != value.desc.shape ||
        src.data.size() != static_cast<size_t>(src.shape.numel())) {
      throw GraphError(cat("run graph '", graph.name(), "': input '", value.name, "' is ",
                           src.shape.to_string(), " with ", src.data.size(), " values, expected ",
                           value.desc.shape.to_string()));
    }
    values[static_cast<size_t>(value.id)] = src;
  }
  for (graph::OpId id : graph.topological_order()) {
    const Op& op = graph.op(id);
    std::vector<const HostTensor*> srcs;
    for (graph::ValueId v : op.inputs) srcs.push_back(&values[static_cast<size_t>(v)]);
    std::vector<HostTensor> dsts = evaluate(op, srcs, weights);
    assert(dsts.size() == op.outputs.size());
    for (size_t i = 0; i < dsts.size(); ++i) {
      const graph::Value& value = graph.value(op.outputs[i]);
      if (dsts[i].shape != value.desc.shape) {
        throw GraphError(cat("op '", op.name, "' (", to_string(op.kind), "): reference output ", i,
                             " is ", dsts[i].shape.to_string(), " but the graph says ",
                             value.desc.shape.to_string()));
      }
      values[static_cast<size_t>(value.id)] = std::move(dsts[i]);
    }
  }
  std::vector<HostTensor> outputs;
  for (graph::ValueId v : graph.outputs()) outputs.push_back(values[static_cast<size_t>(v)]);
  return outputs;
}

double max_relative_error(const HostTensor& got, const HostTensor& want) {
  // The executor's definition; kept under this name for the reference's own tests.
  if (got.data.size() != static_cast<size_t>(got.shape.numel())) {
    return std::numeric_limits<double>::infinity();
  }
  return relative_error(got, want);
}

}  // namespace stagecraft::executor::testing
