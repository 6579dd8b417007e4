#pragma once
// What the reference's files share (tests/executor/reference.cpp, reference_conv.cpp and
// reference_nd.cpp): a tensor of zeros, the fused activations, NCHW and axis views, and the loops of
// the convolutions' ops and of the ops of any rank.
#include <vector>

#include "executor/tensor.h"
#include "graph/op.h"
#include "graph/weights.h"

namespace stagecraft::executor::testing::detail {

// Upper clamp of ReLU6.
inline constexpr double kRelu6Max = 6.0;

// Sizes of a rank-4 tensor and the offset of one element in NCHW order.
struct Nchw {
  int64_t n;
  int64_t c;
  int64_t h;
  int64_t w;

  explicit Nchw(const graph::Shape& s) : n(s[0]), c(s[1]), h(s[2]), w(s[3]) {}
  size_t at(int64_t in, int64_t ic, int64_t ih, int64_t iw) const {
    return static_cast<size_t>(((in * c + ic) * h + ih) * w + iw);
  }
};

// A tensor seen as [outer, extent of `axis`, inner].
struct AxisView {
  int64_t outer = 1, extent = 1, inner = 1;
  AxisView(const graph::Shape& s, size_t axis) {
    for (size_t d = 0; d < s.rank(); ++d) (d < axis ? outer : d == axis ? extent : inner) *= s[d];
  }
};

HostTensor zeros(graph::Shape shape);
double activate(double x, graph::Activation activation);

HostTensor where(const std::vector<const HostTensor*>& srcs, const graph::WhereAttrs& a, const graph::WeightStore& weights,
                 const graph::Op& op);
HostTensor binary(const std::vector<const HostTensor*>& srcs, const graph::BinaryAttrs& a,
                  const graph::WeightStore& weights, const graph::Op& op);
HostTensor grid_sample(const HostTensor& x, const HostTensor& grid, const graph::GridSampleAttrs& a);
HostTensor pool_nd(const HostTensor& x, const graph::PoolNdAttrs& a);
HostTensor resize_nd(const HostTensor& x, const graph::ResizeNdAttrs& a);
std::vector<HostTensor> top_k(const HostTensor& x, const graph::TopKAttrs& a);
HostTensor gather_elements(const HostTensor& x, const HostTensor& indices, const graph::GatherElementsAttrs& a);

// reference_conv.cpp
HostTensor activate_all(const HostTensor& src, graph::Activation activation);
HostTensor pad_constant(const HostTensor& src, const graph::Pads& pads, float value);
HostTensor conv_transpose2d(const HostTensor& src, const graph::ConvTranspose2dAttrs& a, const graph::OpWeights& w);
HostTensor conv2d(const HostTensor& src, const graph::Conv2dAttrs& a, const graph::OpWeights& w,
                  const HostTensor* residual = nullptr);
HostTensor batch_norm(const HostTensor& src, const graph::BatchNormAttrs& a, const graph::OpWeights& w);
HostTensor layer_norm(const HostTensor& src, const graph::LayerNormAttrs& a, const graph::OpWeights& w);
HostTensor max_pool(const HostTensor& src, const graph::MaxPoolAttrs& a);
HostTensor avg_pool(const HostTensor& src, const graph::AvgPoolAttrs& a);
HostTensor global_avg_pool(const HostTensor& src);
HostTensor global_max_pool(const HostTensor& src);
HostTensor add(const std::vector<const HostTensor*>& srcs, const graph::AddAttrs& a);
HostTensor channel_shuffle(const HostTensor& src, int64_t groups);
HostTensor channel_slice(const HostTensor& src, int64_t begin, int64_t end);
HostTensor concat(const std::vector<const HostTensor*>& srcs);
HostTensor resize(const HostTensor& src, const graph::ResizeAttrs& a);

}  // namespace stagecraft::executor::testing::detail
