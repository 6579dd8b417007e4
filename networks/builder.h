#pragma once
/// A fluent builder for network graphs: ops are named by a stack of scopes ("Mixed_5b/branch1x1/
/// conv"), channel counts are read from the inputs, and names are made unique automatically.
/// Every builder in networks/ uses it; tests use it for small hand-made graphs.
///
/// Example:
///   NetBuilder b("tiny", /*batch=*/1, /*channels=*/3, /*height=*/32, /*width=*/32);
///   ValueId x = b.input();
///   {
///     auto s = b.scope("stem");
///     x = b.conv_bn_relu(x, 16, 3, 2, 1);
///   }
///   Graph g = std::move(b).finish({b.linear(b.flatten(b.global_avg_pool(x)), 10)});

#include <string>
#include <vector>

#include "graph/graph.h"

namespace stagecraft::networks {

using graph::Hw;
using graph::Pads;
using graph::ValueId;

/// Every built-in network classifies ImageNet: RGB images in, one logit per class out.
inline constexpr int64_t kImageChannels = 3;
inline constexpr int64_t kImageNetClasses = 1000;

/// Convolution parameters for NetBuilder::conv: the op's attributes, with a 1x1 kernel unless set.
/// Their in_channels is not read: NetBuilder::conv takes the input value's channels.
struct ConvSpec : graph::Conv2dAttrs {
  ConvSpec() { kernel = Hw{1, 1}; }
};

/// A square conv: `out` channels, k×k kernel, stride, symmetric padding.
ConvSpec square_conv(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0, bool bias = false);

/// Builds a graph op by op. Methods return the value produced.
class NetBuilder {
 public:
  /// A builder whose graph has one input "input" of shape batch×channels×height×width (f32).
  NetBuilder(std::string graph_name, int64_t batch, int64_t channels, int64_t height, int64_t width);

  /// Pops its scope when destroyed.
  class Scope {
   public:
    explicit Scope(NetBuilder* builder) : builder_(builder) {}
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope(Scope&& other) noexcept : builder_(other.builder_) { other.builder_ = nullptr; }

   private:
    NetBuilder* builder_;
  };

  /// Pushes a name scope until the returned object is destroyed.
  [[nodiscard]] Scope scope(const std::string& name);

  /// The graph input.
  ValueId input() const { return input_; }
  /// Descriptor of a value.
  const graph::TensorDesc& desc(ValueId v) const { return graph_.value(v).desc; }
  /// Channels of a rank-4 value (features of a rank-2 one).
  int64_t channels(ValueId v) const { return desc(v).shape[1]; }
  /// The graph built so far.
  const graph::Graph& graph() const { return graph_; }

  /// Convolution.
  ValueId conv(ValueId x, const ConvSpec& spec, const std::string& name = "conv");
  /// Batch normalisation.
  ValueId bn(ValueId x, double eps = 1e-5, const std::string& name = "bn");
  /// ReLU.
  ValueId relu(ValueId x, const std::string& name = "relu");
  /// ReLU6.
  ValueId relu6(ValueId x, const std::string& name = "relu6");
  /// Sigmoid.
  ValueId sigmoid(ValueId x, const std::string& name = "sigmoid");
  /// torchvision's BasicConv2d: conv (no bias) + batch norm (eps) + ReLU.
  ValueId conv_bn_relu(ValueId x, const ConvSpec& spec, double eps = 1e-3);
  /// Square-kernel shorthand for conv_bn_relu.
  ValueId conv_bn_relu(ValueId x, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0,
                       double eps = 1e-3);
  /// Max pooling with a square window.
  ValueId max_pool(ValueId x, int64_t k, int64_t stride, int64_t pad = 0, bool ceil_mode = false,
                   const std::string& name = "max_pool");
  /// Average pooling with a square window.
  ValueId avg_pool(ValueId x, int64_t k, int64_t stride, int64_t pad = 0,
                   bool count_include_pad = true, bool ceil_mode = false,
                   const std::string& name = "avg_pool");
  /// Global average pooling to N×C×1×1.
  ValueId global_avg_pool(ValueId x, const std::string& name = "global_avg_pool");
  /// Element-wise sum of two or more values.
  ValueId add(const std::vector<ValueId>& xs, const std::string& name = "add");
  /// Concatenation along channels.
  ValueId concat(const std::vector<ValueId>& xs, const std::string& name = "concat");
  /// Split along channels.
  std::vector<ValueId> split(ValueId x, const std::vector<int64_t>& sizes,
                             const std::string& name = "split");
  /// Channel slice [begin, end).
  ValueId slice(ValueId x, int64_t begin, int64_t end, const std::string& name = "slice");
  /// Constant padding (negative crops).
  ValueId pad(ValueId x, const Pads& pads, const std::string& name = "pad");
  /// Identity.
  ValueId identity(ValueId x, const std::string& name = "identity");
  /// Flatten to N×(C·H·W).
  ValueId flatten(ValueId x, const std::string& name = "flatten");
  /// Fully connected layer.
  ValueId linear(ValueId x, int64_t out_features, bool bias = true,
                 const std::string& name = "fc");
  /// Softmax over features.
  ValueId softmax(ValueId x, const std::string& name = "softmax");

  /// Generic op with explicit attributes; returns its first output.
  ValueId op(const std::string& name, graph::OpKind kind, graph::OpAttrs attrs,
             const std::vector<ValueId>& inputs);

  /// Marks the outputs and returns the graph.
  graph::Graph finish(const std::vector<ValueId>& outputs) &&;

 private:
  std::string unique_name(const std::string& base);

  graph::Graph graph_;
  ValueId input_;
  std::vector<std::string> scopes_;
};

}  // namespace stagecraft::networks
