// Host binary16 conversions and the dtype pass.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/half.h"
#include "graph/passes.h"
#include "networks/registry.h"

namespace stagecraft {
namespace {

TEST(Half, KnownValuesRoundTrip) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);   // largest finite half
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);       // overflow -> infinity
  EXPECT_EQ(float_to_half(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(half_to_float(0x0001), 5.9604645e-8f);
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(float_to_half(1.0f + 0x1.0p-11f), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 0x1.8p-10f), 0x3c02);
  // Every half value converts to float and back unchanged.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = half_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), bits) << bits;
  }
}

TEST(Half, RelativeErrorIsBounded) {
  for (float x = -1000.0f; x < 1000.0f; x += 0.37f) {
    const float back = half_to_float(float_to_half(x));
    EXPECT_LE(std::fabs(back - x), std::fabs(x) * 0x1.0p-11f + 1e-7f) << x;
  }
}

TEST(Passes, WithDtypeCarriesTheTypeThroughEveryOp) {
  networks::NetworkOptions options;
  options.input_size = 64;
  const graph::Graph g = graph::with_dtype(networks::build_network("squeezenet1_1", options),
                                           graph::DataType::kF16);
  for (size_t v = 0; v < g.num_values(); ++v) {
    EXPECT_EQ(g.value(static_cast<graph::ValueId>(v)).desc.dtype, graph::DataType::kF16);
  }
}

}  // namespace
}  // namespace stagecraft
