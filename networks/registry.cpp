#include "networks/registry.h"

#include "common/strings.h"

namespace stagecraft::networks {

const std::vector<NetworkInfo>& network_registry() {
  static const std::vector<NetworkInfo> registry = {
      {"inception_v3", "Inception V3 (torchvision, no aux head), 299x299", 299, 75, false,
       &build_inception_v3},
      {"googlenet", "GoogLeNet (torchvision, no aux heads), 224x224", 224, 32, false,
       &build_googlenet},
      {"squeezenet1_0", "SqueezeNet 1.0 (torchvision), 224x224", 224, 32, false,
       &build_squeezenet1_0},
      {"squeezenet1_1", "SqueezeNet 1.1 (torchvision), 224x224", 224, 32, false,
       &build_squeezenet1_1},
      {"resnet50", "ResNet-50 v1.5 (torchvision), 224x224", 224, 32, false, &build_resnet50},
      {"nasnet_a_mobile", "NASNet-A Mobile 4@1056, 224x224", 224, 32, false,
       &build_nasnet_a_mobile},
      {"nasnet_a_large", "NASNet-A Large 6@4032, 331x331", 331, 32, false, &build_nasnet_a_large},
      {"randwire", "RandWire as in IOS (regular regime, C=154, WS k=4 p=0.75), 224x224", 224, 32,
       true, &build_randwire},
      {"randwire_small", "RandWire small regime (C=78, N=32, WS k=4 p=0.75), 224x224", 224, 32,
       true, &build_randwire_small},
      {"randwire_regular", "RandWire regular regime (C=109, N=32, WS k=4 p=0.75), 224x224", 224,
       32, true, &build_randwire_regular},
      {"vit_tiny", "ViT-Ti/16 with average pooling (timm), tokens as a 14x14 map: q/k/v 1x1 convolutions, heads as branches, 224x224",
       224, 32, false, &build_vit_tiny},
  };
  return registry;
}

const NetworkInfo& find_network(std::string_view name) {
  std::vector<std::string> names;
  for (const auto& info : network_registry()) {
    if (info.name == name) return info;
    names.push_back(info.name);
  }
  const std::string suggestion = closest_match(name, names);
  throw NetworkError(cat("unknown network '", name, "'",
                         suggestion.empty() ? "" : cat(" (did you mean '", suggestion, "'?)"),
                         "; known networks: ", join(names, ", ")));
}

graph::Graph build_network(std::string_view name, const NetworkOptions& options) {
  const NetworkInfo& info = find_network(name);
  NetworkOptions resolved = options;
  if (resolved.batch < 1) {
    throw NetworkError(cat("network '", name, "': batch size must be >= 1, got ", options.batch));
  }
  if (resolved.input_size == 0) resolved.input_size = info.default_input_size;
  if (resolved.input_size < info.min_input_size) {
    throw NetworkError(cat("network '", name, "': input size must be >= ", info.min_input_size,
                           ", got ", options.input_size));
  }
  return info.build(resolved);
}

}  // namespace stagecraft::networks
