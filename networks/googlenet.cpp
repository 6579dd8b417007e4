// GoogLeNet, layer for layer as torchvision's `googlenet` (no auxiliary heads, no input
// transform). As in torchvision, the "5x5" branch uses a 3x3 convolution, and every convolution is
// followed by batch norm (eps 0.001) and ReLU; max pools use ceil_mode.
#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {

constexpr double kBnEps = 1e-3;

struct InceptionSpec {
  const char* name;
  int64_t ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj;
};

ValueId basic(NetBuilder& b, const std::string& name, ValueId x, int64_t out, int64_t k,
              int64_t stride = 1, int64_t pad = 0) {
  auto s = b.scope(name);
  return b.conv_bn_relu(x, out, k, stride, pad, kBnEps);
}

ValueId inception(NetBuilder& b, ValueId x, const InceptionSpec& spec) {
  auto s = b.scope(spec.name);
  ValueId b1 = basic(b, "branch1", x, spec.ch1x1, 1);
  ValueId b2 = basic(b, "branch2_0", x, spec.ch3x3red, 1);
  b2 = basic(b, "branch2_1", b2, spec.ch3x3, 3, 1, 1);
  ValueId b3 = basic(b, "branch3_0", x, spec.ch5x5red, 1);
  b3 = basic(b, "branch3_1", b3, spec.ch5x5, 3, 1, 1);
  ValueId b4 = b.max_pool(x, 3, 1, 1, /*ceil_mode=*/true, "branch4_pool");
  b4 = basic(b, "branch4_1", b4, spec.pool_proj, 1);
  return b.concat({b1, b2, b3, b4});
}

}  // namespace

graph::Graph build_googlenet(const NetworkOptions& options) {
  NetBuilder b("googlenet", options.batch, kImageChannels, options.input_size, options.input_size);
  ValueId x = b.input();
  x = basic(b, "conv1", x, 64, 7, 2, 3);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool1");
  x = basic(b, "conv2", x, 64, 1);
  x = basic(b, "conv3", x, 192, 3, 1, 1);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool2");
  x = inception(b, x, {"inception3a", 64, 96, 128, 16, 32, 32});
  x = inception(b, x, {"inception3b", 128, 128, 192, 32, 96, 64});
  x = b.max_pool(x, 3, 2, 0, true, "maxpool3");
  x = inception(b, x, {"inception4a", 192, 96, 208, 16, 48, 64});
  x = inception(b, x, {"inception4b", 160, 112, 224, 24, 64, 64});
  x = inception(b, x, {"inception4c", 128, 128, 256, 24, 64, 64});
  x = inception(b, x, {"inception4d", 112, 144, 288, 32, 64, 64});
  x = inception(b, x, {"inception4e", 256, 160, 320, 32, 128, 128});
  x = b.max_pool(x, 2, 2, 0, true, "maxpool4");
  x = inception(b, x, {"inception5a", 256, 160, 320, 32, 128, 128});
  x = inception(b, x, {"inception5b", 384, 192, 384, 48, 128, 128});
  x = b.global_avg_pool(x, "avgpool");
  x = b.flatten(x);
  x = b.linear(x, kImageNetClasses);
  return std::move(b).finish({x});
}

}  // namespace stagecraft::networks
