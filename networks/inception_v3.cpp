// Inception V3, layer for layer as torchvision's `inception_v3` (no auxiliary head, no input
// transform): 94 convolutions, each followed by batch norm (eps 0.001) and ReLU. The nested
// concatenations of InceptionE are written as one concatenation of six parts (same memory order).
#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {

constexpr double kBnEps = 1e-3;

// conv_bn_relu with a rectangular kernel and the padding that keeps H×W.
ValueId conv_rect(NetBuilder& b, ValueId x, int64_t out, int64_t kh, int64_t kw) {
  ConvSpec spec;
  spec.out_channels = out;
  spec.kernel = {kh, kw};
  spec.padding = Pads::symmetric(kh / 2, kw / 2);
  return b.conv_bn_relu(x, spec, kBnEps);
}

ValueId basic(NetBuilder& b, const std::string& name, ValueId x, int64_t out, int64_t k,
              int64_t stride = 1, int64_t pad = 0) {
  auto s = b.scope(name);
  return b.conv_bn_relu(x, out, k, stride, pad, kBnEps);
}

ValueId basic_rect(NetBuilder& b, const std::string& name, ValueId x, int64_t out, int64_t kh,
                   int64_t kw) {
  auto s = b.scope(name);
  return conv_rect(b, x, out, kh, kw);
}

ValueId pool_branch(NetBuilder& b, ValueId x, int64_t out) {
  ValueId pooled = b.avg_pool(x, 3, 1, 1, /*count_include_pad=*/true);
  return basic(b, "branch_pool", pooled, out, 1);
}

ValueId inception_a(NetBuilder& b, ValueId x, int64_t pool_features) {
  ValueId b1 = basic(b, "branch1x1", x, 64, 1);
  ValueId b5 = basic(b, "branch5x5_1", x, 48, 1);
  b5 = basic(b, "branch5x5_2", b5, 64, 5, 1, 2);
  ValueId b3 = basic(b, "branch3x3dbl_1", x, 64, 1);
  b3 = basic(b, "branch3x3dbl_2", b3, 96, 3, 1, 1);
  b3 = basic(b, "branch3x3dbl_3", b3, 96, 3, 1, 1);
  ValueId bp = pool_branch(b, x, pool_features);
  return b.concat({b1, b5, b3, bp});
}

ValueId inception_b(NetBuilder& b, ValueId x) {
  ValueId b3 = basic(b, "branch3x3", x, 384, 3, 2);
  ValueId bd = basic(b, "branch3x3dbl_1", x, 64, 1);
  bd = basic(b, "branch3x3dbl_2", bd, 96, 3, 1, 1);
  bd = basic(b, "branch3x3dbl_3", bd, 96, 3, 2);
  ValueId bp = b.max_pool(x, 3, 2);
  return b.concat({b3, bd, bp});
}

ValueId inception_c(NetBuilder& b, ValueId x, int64_t c7) {
  ValueId b1 = basic(b, "branch1x1", x, 192, 1);
  ValueId b7 = basic(b, "branch7x7_1", x, c7, 1);
  b7 = basic_rect(b, "branch7x7_2", b7, c7, 1, 7);
  b7 = basic_rect(b, "branch7x7_3", b7, 192, 7, 1);
  ValueId bd = basic(b, "branch7x7dbl_1", x, c7, 1);
  bd = basic_rect(b, "branch7x7dbl_2", bd, c7, 7, 1);
  bd = basic_rect(b, "branch7x7dbl_3", bd, c7, 1, 7);
  bd = basic_rect(b, "branch7x7dbl_4", bd, c7, 7, 1);
  bd = basic_rect(b, "branch7x7dbl_5", bd, 192, 1, 7);
  ValueId bp = pool_branch(b, x, 192);
  return b.concat({b1, b7, bd, bp});
}

ValueId inception_d(NetBuilder& b, ValueId x) {
  ValueId b3 = basic(b, "branch3x3_1", x, 192, 1);
  b3 = basic(b, "branch3x3_2", b3, 320, 3, 2);
  ValueId b7 = basic(b, "branch7x7x3_1", x, 192, 1);
  b7 = basic_rect(b, "branch7x7x3_2", b7, 192, 1, 7);
  b7 = basic_rect(b, "branch7x7x3_3", b7, 192, 7, 1);
  b7 = basic(b, "branch7x7x3_4", b7, 192, 3, 2);
  ValueId bp = b.max_pool(x, 3, 2);
  return b.concat({b3, b7, bp});
}

ValueId inception_e(NetBuilder& b, ValueId x) {
  ValueId b1 = basic(b, "branch1x1", x, 320, 1);
  ValueId b3 = basic(b, "branch3x3_1", x, 384, 1);
  ValueId b3a = basic_rect(b, "branch3x3_2a", b3, 384, 1, 3);
  ValueId b3b = basic_rect(b, "branch3x3_2b", b3, 384, 3, 1);
  ValueId bd = basic(b, "branch3x3dbl_1", x, 448, 1);
  bd = basic(b, "branch3x3dbl_2", bd, 384, 3, 1, 1);
  ValueId bda = basic_rect(b, "branch3x3dbl_3a", bd, 384, 1, 3);
  ValueId bdb = basic_rect(b, "branch3x3dbl_3b", bd, 384, 3, 1);
  ValueId bp = pool_branch(b, x, 192);
  return b.concat({b1, b3a, b3b, bda, bdb, bp});
}

}  // namespace

graph::Graph build_inception_v3(const NetworkOptions& options) {
  NetBuilder b("inception_v3", options.batch, kImageChannels, options.input_size,
               options.input_size);
  ValueId x = b.input();
  x = basic(b, "Conv2d_1a_3x3", x, 32, 3, 2);
  x = basic(b, "Conv2d_2a_3x3", x, 32, 3);
  x = basic(b, "Conv2d_2b_3x3", x, 64, 3, 1, 1);
  x = b.max_pool(x, 3, 2, 0, false, "maxpool1");
  x = basic(b, "Conv2d_3b_1x1", x, 80, 1);
  x = basic(b, "Conv2d_4a_3x3", x, 192, 3);
  x = b.max_pool(x, 3, 2, 0, false, "maxpool2");
  const std::pair<const char*, int64_t> mixed_a[] = {{"Mixed_5b", 32}, {"Mixed_5c", 64},
                                                     {"Mixed_5d", 64}};
  for (const auto& [name, pool_features] : mixed_a) {
    auto s = b.scope(name);
    x = inception_a(b, x, pool_features);
  }
  {
    auto s = b.scope("Mixed_6a");
    x = inception_b(b, x);
  }
  const std::pair<const char*, int64_t> mixed_c[] = {
      {"Mixed_6b", 128}, {"Mixed_6c", 160}, {"Mixed_6d", 160}, {"Mixed_6e", 192}};
  for (const auto& [name, c7] : mixed_c) {
    auto s = b.scope(name);
    x = inception_c(b, x, c7);
  }
  {
    auto s = b.scope("Mixed_7a");
    x = inception_d(b, x);
  }
  for (const char* name : {"Mixed_7b", "Mixed_7c"}) {
    auto s = b.scope(name);
    x = inception_e(b, x);
  }
  x = b.global_avg_pool(x, "avgpool");
  x = b.flatten(x);
  x = b.linear(x, kImageNetClasses);
  return std::move(b).finish({x});
}

}  // namespace stagecraft::networks
