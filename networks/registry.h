#pragma once
/// The built-in networks, by name. Each builder returns the raw graph (batch norms and activations
/// as separate ops, as the reference implementation has them); run
/// `graph::prepare_for_inference` to fold and fuse before scheduling.
///
/// Example:
///   NetworkOptions options;
///   options.batch = 16;
///   graph::Graph g = build_network("inception_v3", options);

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "graph/graph.h"

namespace stagecraft::networks {

/// Build options shared by every network.
struct NetworkOptions {
  int64_t batch = 1;       ///< batch size (N)
  int64_t input_size = 0;  ///< input height = width; 0 means the network's default
  uint64_t seed = 1;       ///< seed of randomly wired networks (RandWire); others ignore it
};

/// A registry entry.
struct NetworkInfo {
  std::string name;                  ///< registry name ("inception_v3")
  std::string description;           ///< one line: origin and variant
  int64_t default_input_size = 224;  ///< input height = width when none is given
  int64_t min_input_size = 32;       ///< smallest input the architecture accepts
  bool seeded = false;               ///< whether the seed changes the graph
  graph::Graph (*build)(const NetworkOptions&) = nullptr;  ///< the builder
};

/// An unknown network name, or options a network cannot take.
class NetworkError : public Error {
 public:
  using Error::Error;
};

/// Every built-in network, in display order.
const std::vector<NetworkInfo>& network_registry();

/// The entry for `name`; throws NetworkError listing the known names.
const NetworkInfo& find_network(std::string_view name);

/// Builds a network by name with validated options (batch >= 1, input size >= the minimum).
graph::Graph build_network(std::string_view name, const NetworkOptions& options = {});

// Builders (one file each). They take validated options with input_size already resolved.
graph::Graph build_inception_v3(const NetworkOptions& options);
graph::Graph build_googlenet(const NetworkOptions& options);
graph::Graph build_squeezenet1_0(const NetworkOptions& options);
graph::Graph build_squeezenet1_1(const NetworkOptions& options);
graph::Graph build_resnet50(const NetworkOptions& options);
graph::Graph build_nasnet_a_mobile(const NetworkOptions& options);
graph::Graph build_nasnet_a_large(const NetworkOptions& options);
graph::Graph build_randwire(const NetworkOptions& options);
graph::Graph build_randwire_small(const NetworkOptions& options);
graph::Graph build_randwire_regular(const NetworkOptions& options);
graph::Graph build_vit_tiny(const NetworkOptions& options);

}  // namespace stagecraft::networks
