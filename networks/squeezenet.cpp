// SqueezeNet 1.0 and 1.1, layer for layer as torchvision's `squeezenet1_0` / `squeezenet1_1`:
// Fire modules (squeeze 1x1, expand 1x1 and 3x3, concatenated), biased convolutions with ReLU,
// max pools with ceil_mode, and a convolutional classifier (1x1 conv to 1000, ReLU, global pool).
#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {

constexpr int64_t kNumClasses = 1000;

ValueId conv_relu(NetBuilder& b, const std::string& name, ValueId x, int64_t out, int64_t k,
                  int64_t stride = 1, int64_t pad = 0) {
  auto s = b.scope(name);
  return b.relu(b.conv(x, square_conv(out, k, stride, pad, /*bias=*/true)));
}

ValueId fire(NetBuilder& b, const std::string& name, ValueId x, int64_t squeeze, int64_t expand1,
             int64_t expand3) {
  auto s = b.scope(name);
  ValueId sq = conv_relu(b, "squeeze", x, squeeze, 1);
  ValueId e1 = conv_relu(b, "expand1x1", sq, expand1, 1);
  ValueId e3 = conv_relu(b, "expand3x3", sq, expand3, 3, 1, 1);
  return b.concat({e1, e3});
}

ValueId classifier(NetBuilder& b, ValueId x) {
  x = conv_relu(b, "classifier", x, kNumClasses, 1);
  return b.flatten(b.global_avg_pool(x, "avgpool"));
}

}  // namespace

graph::Graph build_squeezenet1_0(const NetworkOptions& options) {
  NetBuilder b("squeezenet1_0", options.batch, 3, options.input_size, options.input_size);
  ValueId x = conv_relu(b, "conv1", b.input(), 96, 7, 2);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool1");
  x = fire(b, "fire2", x, 16, 64, 64);
  x = fire(b, "fire3", x, 16, 64, 64);
  x = fire(b, "fire4", x, 32, 128, 128);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool2");
  x = fire(b, "fire5", x, 32, 128, 128);
  x = fire(b, "fire6", x, 48, 192, 192);
  x = fire(b, "fire7", x, 48, 192, 192);
  x = fire(b, "fire8", x, 64, 256, 256);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool3");
  x = fire(b, "fire9", x, 64, 256, 256);
  return std::move(b).finish({classifier(b, x)});
}

graph::Graph build_squeezenet1_1(const NetworkOptions& options) {
  NetBuilder b("squeezenet1_1", options.batch, 3, options.input_size, options.input_size);
  ValueId x = conv_relu(b, "conv1", b.input(), 64, 3, 2);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool1");
  x = fire(b, "fire2", x, 16, 64, 64);
  x = fire(b, "fire3", x, 16, 64, 64);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool2");
  x = fire(b, "fire4", x, 32, 128, 128);
  x = fire(b, "fire5", x, 32, 128, 128);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool3");
  x = fire(b, "fire6", x, 48, 192, 192);
  x = fire(b, "fire7", x, 48, 192, 192);
  x = fire(b, "fire8", x, 64, 256, 256);
  x = fire(b, "fire9", x, 64, 256, 256);
  return std::move(b).finish({classifier(b, x)});
}

}  // namespace stagecraft::networks
