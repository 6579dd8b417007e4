// SqueezeNet 1.0 and 1.1, layer for layer as torchvision's `squeezenet1_0` / `squeezenet1_1`:
// Fire modules (squeeze 1x1, expand 1x1 and 3x3, concatenated), biased convolutions with ReLU,
// max pools with ceil_mode, and a convolutional classifier (1x1 conv to 1000, ReLU, global pool).
#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {


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
  x = conv_relu(b, "classifier", x, kImageNetClasses, 1);
  return b.flatten(b.global_avg_pool(x, "avgpool"));
}

// One Fire module (squeeze, expand1x1 = expand3x3 channels) or, with squeeze 0, a max pool.
struct Layer {
  int64_t squeeze;
  int64_t expand;
};
constexpr Layer kPool{0, 0};

// The stem (conv1 + maxpool1), then the layers: Fire modules are numbered from fire2 in order,
// max pools from maxpool2.
graph::Graph build(const char* name, const NetworkOptions& options, int64_t stem_channels,
                   int64_t stem_kernel, std::initializer_list<Layer> layers) {
  NetBuilder b(name, options.batch, kImageChannels, options.input_size, options.input_size);
  ValueId x = conv_relu(b, "conv1", b.input(), stem_channels, stem_kernel, 2);
  x = b.max_pool(x, 3, 2, 0, true, "maxpool1");
  int fires = 2;
  int pools = 2;
  for (const Layer& l : layers) {
    if (l.squeeze == 0) {
      x = b.max_pool(x, 3, 2, 0, true, "maxpool" + std::to_string(pools++));
    } else {
      x = fire(b, "fire" + std::to_string(fires++), x, l.squeeze, l.expand, l.expand);
    }
  }
  return std::move(b).finish({classifier(b, x)});
}

}  // namespace

graph::Graph build_squeezenet1_0(const NetworkOptions& options) {
  return build("squeezenet1_0", options, 96, 7,
               {{16, 64}, {16, 64}, {32, 128}, kPool, {32, 128}, {48, 192}, {48, 192}, {64, 256},
                kPool, {64, 256}});
}

graph::Graph build_squeezenet1_1(const NetworkOptions& options) {
  return build("squeezenet1_1", options, 64, 3,
               {{16, 64}, {16, 64}, kPool, {32, 128}, {32, 128}, kPool, {48, 192}, {48, 192},
                {64, 256}, {64, 256}});
}

}  // namespace stagecraft::networks
