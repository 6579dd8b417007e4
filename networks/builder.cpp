#include "networks/builder.h"

#include <cassert>

#include "common/strings.h"

namespace stagecraft::networks {

using graph::OpKind;

ConvSpec square_conv(int64_t out, int64_t k, int64_t stride, int64_t pad, bool bias) {
  ConvSpec spec;
  spec.out_channels = out;
  spec.kernel = Hw::square(k);
  spec.stride = Hw::square(stride);
  spec.padding = Pads::same(pad);
  spec.bias = bias;
  return spec;
}

NetBuilder::NetBuilder(std::string graph_name, int64_t batch, int64_t channels, int64_t height,
                       int64_t width)
    : graph_(std::move(graph_name)) {
  input_ = graph_.add_input("input", graph::make_desc(graph::Shape{batch, channels, height, width}));
}

NetBuilder::Scope::~Scope() {
  if (builder_ != nullptr) builder_->scopes_.pop_back();
}

NetBuilder::Scope NetBuilder::scope(const std::string& name) {
  scopes_.push_back(name);
  return Scope(this);
}

std::string NetBuilder::unique_name(const std::string& base) {
  std::string prefix = join(scopes_, "/");
  std::string name = prefix.empty() ? base : prefix + "/" + base;
  if (!graph_.find_value(name) && !graph_.find_op(name)) return name;
  for (int suffix = 2;; ++suffix) {
    std::string candidate = cat(name, "_", suffix);
    if (!graph_.find_value(candidate) && !graph_.find_op(candidate)) return candidate;
  }
}

ValueId NetBuilder::op(const std::string& name, OpKind kind, graph::OpAttrs attrs,
                       const std::vector<ValueId>& inputs) {
  const graph::OpId id = graph_.add_op(unique_name(name), kind, std::move(attrs), inputs);
  return graph_.op(id).outputs.at(0);
}

ValueId NetBuilder::conv(ValueId x, const ConvSpec& spec, const std::string& name) {
  graph::Conv2dAttrs a = spec;
  a.in_channels = channels(x);
  return op(name, OpKind::kConv2d, a, {x});
}

ValueId NetBuilder::bn(ValueId x, double eps, const std::string& name) {
  return op(name, OpKind::kBatchNorm, graph::BatchNormAttrs{.eps = eps}, {x});
}

ValueId NetBuilder::relu(ValueId x, const std::string& name) {
  return op(name, OpKind::kRelu, graph::NoAttrs{}, {x});
}

ValueId NetBuilder::relu6(ValueId x, const std::string& name) {
  return op(name, OpKind::kRelu6, graph::NoAttrs{}, {x});
}

ValueId NetBuilder::sigmoid(ValueId x, const std::string& name) {
  return op(name, OpKind::kSigmoid, graph::NoAttrs{}, {x});
}

ValueId NetBuilder::conv_bn_relu(ValueId x, const ConvSpec& spec, double eps) {
  return relu(bn(conv(x, spec), eps));
}

ValueId NetBuilder::conv_bn_relu(ValueId x, int64_t out, int64_t k, int64_t stride, int64_t pad,
                                 double eps) {
  return conv_bn_relu(x, square_conv(out, k, stride, pad), eps);
}

ValueId NetBuilder::max_pool(ValueId x, int64_t k, int64_t stride, int64_t pad, bool ceil_mode,
                             const std::string& name) {
  const graph::MaxPoolAttrs a{.kernel = Hw::square(k),
                              .stride = Hw::square(stride),
                              .padding = Pads::same(pad),
                              .ceil_mode = ceil_mode};
  return op(name, OpKind::kMaxPool, a, {x});
}

ValueId NetBuilder::avg_pool(ValueId x, int64_t k, int64_t stride, int64_t pad,
                             bool count_include_pad, bool ceil_mode, const std::string& name) {
  const graph::AvgPoolAttrs a{.kernel = Hw::square(k),
                              .stride = Hw::square(stride),
                              .padding = Pads::same(pad),
                              .ceil_mode = ceil_mode,
                              .count_include_pad = count_include_pad};
  return op(name, OpKind::kAvgPool, a, {x});
}

ValueId NetBuilder::global_avg_pool(ValueId x, const std::string& name) {
  return op(name, OpKind::kGlobalAvgPool, graph::NoAttrs{}, {x});
}

ValueId NetBuilder::add(const std::vector<ValueId>& xs, const std::string& name) {
  return op(name, OpKind::kAdd, graph::AddAttrs{}, xs);
}

ValueId NetBuilder::concat(const std::vector<ValueId>& xs, const std::string& name) {
  return op(name, OpKind::kConcat, graph::ConcatAttrs{}, xs);
}

std::vector<ValueId> NetBuilder::split(ValueId x, const std::vector<int64_t>& sizes,
                                       const std::string& name) {
  graph::SplitAttrs a;
  a.sizes = sizes;
  const graph::OpId id = graph_.add_op(unique_name(name), OpKind::kSplit, a, {x});
  return graph_.op(id).outputs;
}

ValueId NetBuilder::slice(ValueId x, int64_t begin, int64_t end, const std::string& name) {
  return op(name, OpKind::kSlice, graph::SliceAttrs{.begin = begin, .end = end}, {x});
}

ValueId NetBuilder::pad(ValueId x, const Pads& pads, const std::string& name) {
  return op(name, OpKind::kPad, graph::PadAttrs{.pads = pads}, {x});
}

ValueId NetBuilder::identity(ValueId x, const std::string& name) {
  return op(name, OpKind::kIdentity, graph::NoAttrs{}, {x});
}

ValueId NetBuilder::flatten(ValueId x, const std::string& name) {
  return op(name, OpKind::kFlatten, graph::NoAttrs{}, {x});
}

ValueId NetBuilder::linear(ValueId x, int64_t out_features, bool bias, const std::string& name) {
  const graph::LinearAttrs a{
      .in_features = channels(x), .out_features = out_features, .bias = bias};
  return op(name, OpKind::kLinear, a, {x});
}

ValueId NetBuilder::softmax(ValueId x, const std::string& name) {
  return op(name, OpKind::kSoftmax, graph::SoftmaxAttrs{}, {x});
}

graph::Graph NetBuilder::finish(const std::vector<ValueId>& outputs) && {
  assert(scopes_.empty() && "every scope must be closed before finish()");
  for (ValueId v : outputs) graph_.add_output(v);
  return std::move(graph_);
}

}  // namespace stagecraft::networks
