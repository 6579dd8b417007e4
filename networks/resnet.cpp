// ResNet-50 v1.5, layer for layer as torchvision's `resnet50`: bottleneck blocks [3, 4, 6, 3]
// with the stride on the 3x3 convolution, projection shortcuts (1x1 conv + BN) at the first block
// of each stage, batch norm eps 1e-5.
#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {

constexpr int64_t kExpansion = 4;

ValueId conv_bn(NetBuilder& b, const std::string& name, ValueId x, int64_t out, int64_t k,
                int64_t stride, int64_t pad) {
  auto s = b.scope(name);
  return b.bn(b.conv(x, square_conv(out, k, stride, pad)));
}

ValueId bottleneck(NetBuilder& b, ValueId x, int64_t planes, int64_t stride, bool downsample) {
  ValueId y = b.relu(conv_bn(b, "conv1", x, planes, 1, 1, 0), "relu1");
  y = b.relu(conv_bn(b, "conv2", y, planes, 3, stride, 1), "relu2");
  y = conv_bn(b, "conv3", y, planes * kExpansion, 1, 1, 0);
  ValueId shortcut = downsample ? conv_bn(b, "downsample", x, planes * kExpansion, 1, stride, 0) : x;
  return b.relu(b.add({y, shortcut}), "relu3");
}

}  // namespace

graph::Graph build_resnet50(const NetworkOptions& options) {
  NetBuilder b("resnet50", options.batch, kImageChannels, options.input_size, options.input_size);
  ValueId x = b.input();
  {
    auto s = b.scope("stem");
    x = b.relu(conv_bn(b, "conv1", x, 64, 7, 2, 3));
    x = b.max_pool(x, 3, 2, 1, false, "maxpool");
  }
  const int64_t blocks[] = {3, 4, 6, 3};
  int64_t planes = 64;
  for (int layer = 0; layer < 4; ++layer) {
    for (int64_t i = 0; i < blocks[layer]; ++i) {
      auto s = b.scope("layer" + std::to_string(layer + 1) + "_" + std::to_string(i));
      const int64_t stride = (i == 0 && layer > 0) ? 2 : 1;
      x = bottleneck(b, x, planes, stride, i == 0);
    }
    planes *= 2;
  }
  x = b.flatten(b.global_avg_pool(x, "avgpool"));
  x = b.linear(x, kImageNetClasses);
  return std::move(b).finish({x});
}

}  // namespace stagecraft::networks
