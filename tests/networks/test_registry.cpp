// The registry and the torchvision-equivalent networks: convolution counts and MACs against the
// published torchvision figures (within 2%), output shapes, batch and input-size options, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/graph.h"
#include "networks/registry.h"
#include "tests/support/messages.h"

namespace stagecraft::networks {
namespace {

using graph::OpKind;

struct Published {
  const char* name;
  double gmacs;   // torchvision's published GFLOPS column (multiply-accumulates)
  double mparams; // torchvision's published parameter count
};

// torchvision model documentation, batch 1 at the default input size. torchvision's 27.16 M
// parameters of inception_v3 include the auxiliary head (3,326,696 parameters: conv 768->128 1x1,
// conv 128->768 5x5, their batch norms and fc 768->1000), which our graph leaves out.
constexpr Published kTorchvision[] = {
    {"inception_v3", 5.71, 27.161264 - 3.326696}, {"googlenet", 1.50, 6.62},  {"squeezenet1_0", 0.82, 1.25},
    {"squeezenet1_1", 0.35, 1.24}, {"resnet50", 4.09, 25.56},
};

class TorchvisionFigures : public ::testing::TestWithParam<Published> {};

TEST_P(TorchvisionFigures, MacsWithinTwoPercentOfPublished) {
  const Published& p = GetParam();
  graph::Graph g = build_network(p.name);
  const double gmacs = static_cast<double>(graph::total_macs(g)) / 1e9;
  EXPECT_NEAR(gmacs / p.gmacs, 1.0, 0.02) << p.name << ": " << gmacs << " GMACs";
}

TEST_P(TorchvisionFigures, ParamsWithinTwoPercentOfPublished) {
  const Published& p = GetParam();
  graph::Graph g = build_network(p.name);
  const double mparams = static_cast<double>(graph::total_params(g)) / 1e6;
  EXPECT_NEAR(mparams / p.mparams, 1.0, 0.02) << p.name << ": " << mparams << " M params";
}

TEST_P(TorchvisionFigures, OutputIsBatchBy1000) {
  NetworkOptions options;
  options.batch = 3;
  graph::Graph g = build_network(GetParam().name, options);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).desc.shape, (graph::Shape{3, 1000}));
}

TEST_P(TorchvisionFigures, MacsScaleWithBatch) {
  NetworkOptions options;
  options.batch = 4;
  EXPECT_EQ(graph::total_macs(build_network(GetParam().name, options)),
            4 * graph::total_macs(build_network(GetParam().name)));
}

INSTANTIATE_TEST_SUITE_P(Registry, TorchvisionFigures, ::testing::ValuesIn(kTorchvision),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(Networks, InceptionV3HasNinetyFourConvolutions) {
  graph::Graph g = build_network("inception_v3");
  EXPECT_EQ(graph::count_ops(g, OpKind::kConv2d), 94u);
  EXPECT_EQ(graph::count_ops(g, OpKind::kBatchNorm), 94u);
  EXPECT_EQ(g.value(g.inputs()[0]).desc.shape, (graph::Shape{1, 3, 299, 299}));
}

TEST(Networks, KnownConvolutionCounts) {
  EXPECT_EQ(graph::count_ops(build_network("googlenet"), OpKind::kConv2d), 57u);
  EXPECT_EQ(graph::count_ops(build_network("squeezenet1_0"), OpKind::kConv2d), 26u);
  EXPECT_EQ(graph::count_ops(build_network("resnet50"), OpKind::kConv2d), 53u);
}

TEST(Networks, ReducedInputSizeBuilds) {
  NetworkOptions options;
  options.input_size = 96;
  graph::Graph g = build_network("googlenet", options);
  EXPECT_EQ(g.value(g.inputs()[0]).desc.shape, (graph::Shape{1, 3, 96, 96}));
  EXPECT_LT(graph::total_macs(g), graph::total_macs(build_network("googlenet")));
}

TEST(Networks, EveryRegisteredNetworkBuilds) {
  for (const auto& info : network_registry()) {
    NetworkOptions options;
    options.input_size = info.min_input_size > 96 ? info.min_input_size : 96;
    graph::Graph g = build_network(info.name, options);
    EXPECT_GT(g.num_ops(), 10u) << info.name;
    EXPECT_EQ(g.name(), info.name);
  }
}

TEST(Networks, UnknownNameListsKnownOnesAndSuggests) {
  stagecraft::testing::expect_mentions(
      stagecraft::testing::message_of<NetworkError>([] { build_network("inceptoin_v3"); }),
      {"unknown network 'inceptoin_v3'", "did you mean 'inception_v3'", "resnet50"});
}

TEST(Networks, BadOptionsAreClearErrors) {
  NetworkOptions options;
  options.batch = 0;
  EXPECT_THROW(build_network("resnet50", options), NetworkError);
  options.batch = 1;
  options.input_size = 20;
  try {
    build_network("inception_v3", options);
    FAIL() << "expected NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("input size must be >= 75"), std::string::npos);
  }
}

}  // namespace
}  // namespace stagecraft::networks
