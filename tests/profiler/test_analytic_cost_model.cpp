// The analytic cost model reproduces the qualitative behaviour IOS measured: small convolutions
// gain from concurrency or merging, large ones gain nothing and pay the synchronisation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "networks/builder.h"
#include "profiler/analytic_cost_model.h"
#include "profiler/cost_models.h"
#include "scheduler/schedule.h"

namespace stagecraft::profiler {
namespace {

using networks::NetBuilder;
using networks::square_conv;
using scheduler::Stage;

// Two same-input convolutions of `channels` channels on a size×size map.
graph::Graph twin_convs(int64_t channels, int64_t size) {
  NetBuilder b("twins", 1, channels, size, size);
  auto x = b.input();
  auto l = b.conv(x, square_conv(channels, 3, 1, 1), "l");
  auto r = b.conv(x, square_conv(channels, 3, 1, 1), "r");
  return std::move(b).finish({l, r});
}

double sequential_ms(AnalyticCostModel& m, const graph::Graph& g) {
  return m.stage_latency_ms(g, {}, Stage::concurrent({{0}})) +
         m.stage_latency_ms(g, {}, Stage::concurrent({{1}}));
}

TEST(AnalyticCostModel, SmallConvolutionsGainFromConcurrencyAndMerging) {
  AnalyticCostModel m(find_device_spec("v100"));
  const graph::Graph g = twin_convs(64, 8);  // 8x8 map: a few thread blocks on 80 SMs
  const double seq = sequential_ms(m, g);
  const double conc = m.stage_latency_ms(g, {}, Stage::concurrent({{0}, {1}}));
  const double merged = m.stage_latency_ms(g, {}, Stage::merge({0, 1}));
  EXPECT_LT(conc, 0.8 * seq);
  EXPECT_LT(merged, 0.8 * seq);
}

TEST(AnalyticCostModel, LargeConvolutionsGainNothingAndPayTheSync) {
  AnalyticCostModel m(find_device_spec("v100"));
  const graph::Graph g = twin_convs(256, 112);  // fills the GPU for many waves
  const double seq = sequential_ms(m, g);
  const double conc = m.stage_latency_ms(g, {}, Stage::concurrent({{0}, {1}}));
  EXPECT_GE(conc, seq);
  EXPECT_NEAR(conc - seq, m.device().cross_stream_sync_us * 1e-3, 0.05 * seq);
}

TEST(AnalyticCostModel, BiggerWorkTakesLongerAndViewsAreFree) {
  AnalyticCostModel m(find_device_spec("v100"));
  const auto small = m.op_estimate(twin_convs(64, 28), 0);
  const auto large = m.op_estimate(twin_convs(256, 56), 0);
  EXPECT_GT(large.ms, small.ms);
  EXPECT_GT(small.occupancy, 0.0);
  EXPECT_LE(large.occupancy, 1.0);
  NetBuilder b("view", 1, 8, 4, 4);
  auto c = b.concat({b.relu(b.input()), b.input()});
  const graph::Graph g = std::move(b).finish({c});
  EXPECT_FALSE(m.op_estimate(g, 1).launches);
  EXPECT_EQ(m.stage_latency_ms(g, {}, Stage::concurrent({{1}})), 0.0);
  // A faster device predicts less time for the same stage.
  AnalyticCostModel h100(find_device_spec("h100"));
  const graph::Graph big = twin_convs(256, 56);
  EXPECT_LT(h100.stage_latency_ms(big, {}, Stage::concurrent({{0}})),
            m.stage_latency_ms(big, {}, Stage::concurrent({{0}})));
}

TEST(DeviceSpecs, ShippedDevicesLoadAndBadFilesAreClearErrors) {
  EXPECT_EQ(list_device_specs(), (std::vector<std::string>{"a100", "h100", "v100"}));
  EXPECT_EQ(find_device_spec("a100").sm_count, 108);
  try {
    find_device_spec("p100");
    FAIL();
  } catch (const DeviceSpecError& e) {
    EXPECT_NE(std::string(e.what()).find("known: a100, h100, v100"), std::string::npos);
  }
  const auto dir = std::filesystem::temp_directory_path() / "stagecraft_device_test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "bad.yaml").string();
  std::ofstream(path) << "sm_count: -1\n";
  try {
    load_device_spec(path);
    FAIL();
  } catch (const DeviceSpecError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'sm_count' must be >= 1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_cost_model("analytic"), UsageError);
  EXPECT_THROW(make_cost_model("measured:gpu"), UsageError);
  EXPECT_EQ(make_cost_model("analytic:h100")->name(), "analytic:h100");
}

}  // namespace
}  // namespace stagecraft::profiler
