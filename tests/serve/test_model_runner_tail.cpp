// A model with a data-dependent tail (an ONNX model ending in NonZero, tests/support/tail_model.h)
// in the model runner: described by the outputs the model declares, run one sample at a time with
// output shapes that follow the data, a request's samples joined when their shapes agree and
// refused in one line when they do not; run() with fixed-size outputs refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <span>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "serve/model_runner.h"
#include "tests/support/messages.h"
#include "tests/support/tail_model.h"

namespace stagecraft::serve {
namespace {

class ModelRunnerTail : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             cat("stagecraft_tail_", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                 ::getpid(), ".onnx"))
                .string();
    stagecraft::testing::write_tail_model(path_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ServeOptions options(int64_t max_batch) const {
    ServeOptions o;
    o.source.spec = path_;
    o.schedule = session::ScheduleSource::parse("sequential");
    o.max_batch_size = max_batch;
    o.session.cost_model = "analytic:v100";
    return o;
  }
  std::string path_;
};

// Sample s of `x` [n, 4, 6]: values in [-1, 1) from a fixed pattern, `above` of them above 0.5.
std::vector<float> samples(const std::vector<int>& above) {
  std::vector<float> x;
  for (int k : above) {
    for (int i = 0; i < 24; ++i) x.push_back(i < k ? 0.6f + 0.01f * static_cast<float>(i) : -0.5f + 0.04f * static_cast<float>(i % 20));
  }
  return x;
}

TEST_F(ModelRunnerTail, DescribesTheDeclaredOutputs) {
  const ModelIo io = describe_model(options(4));
  ASSERT_EQ(io.outputs.size(), 2u);
  EXPECT_EQ(io.outputs[0].name, "y");
  EXPECT_EQ(io.outputs[0].dims, (std::vector<int64_t>{2, -1}));  // per sample; the count is the data's
  EXPECT_EQ(io.outputs[1].name, "z");
  EXPECT_EQ(io.outputs[1].dims, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(io.inputs[0].dims, (std::vector<int64_t>{4, 6}));
}

TEST_F(ModelRunnerTail, OutputShapesFollowTheData) {
  CorePool pool(2);
  ModelRunner runner(options(4), pool);
  ASSERT_TRUE(runner.has_tail());
  for (int above : {0, 3, 7}) {
    const std::vector<float> x = samples({above});
    const std::span<const float> srcs[] = {x};
    const std::vector<graph::ModelOutput> outs = runner.run_shaped(1, srcs);
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(outs[0].dims, (std::vector<int64_t>{1, 2, above}));
    EXPECT_EQ(outs[0].data, stagecraft::testing::tail_coordinates(x.data()));
    ASSERT_EQ(outs[1].dims, (std::vector<int64_t>{1, 4, 6}));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(outs[1].data[i], std::max(0.0f, x[i])) << i;
  }
  // One plan, at batch 1, whatever the batches asked.
  EXPECT_EQ(runner.planned().size(), 1u);
  EXPECT_EQ(runner.planned()[0].first, 1);
}

TEST_F(ModelRunnerTail, ARequestsSamplesJoinWhenTheirShapesAgree) {
  CorePool pool(2);
  ModelRunner runner(options(4), pool);
  std::vector<float> x = samples({4, 4});
  x[24 + 20] = 0.9f;  // the second sample's fourth element above 0.5 is elsewhere; same count
  x[24 + 3] = -0.2f;
  const std::span<const float> srcs[] = {x};
  const std::vector<graph::ModelOutput> outs = runner.run_shaped(2, srcs);
  ASSERT_EQ(outs[0].dims, (std::vector<int64_t>{2, 2, 4}));
  std::vector<float> expected = stagecraft::testing::tail_coordinates(x.data());
  const std::vector<float> second = stagecraft::testing::tail_coordinates(x.data() + 24);
  EXPECT_NE(expected, second);
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_EQ(outs[0].data, expected);
  EXPECT_EQ(outs[1].dims, (std::vector<int64_t>{2, 4, 6}));

  const std::vector<float> apart = samples({2, 5});
  const std::span<const float> apart_srcs[] = {apart};
  stagecraft::testing::expect_mentions(
      stagecraft::testing::message_of<UsageError>([&] { runner.run_shaped(2, apart_srcs); }),
      {"output 'y' has shape [1, 2, 2] for one sample and [1, 2, 5] for another", "separate requests"});
}

TEST_F(ModelRunnerTail, FixedSizeRunsAndNonBatchOutputsAreRefused) {
  CorePool pool(2);
  ModelRunner runner(options(4), pool);
  const std::vector<float> x = samples({1});
  std::vector<float> y(48), z(24);
  const std::span<const float> srcs[] = {x};
  const std::span<float> dsts[] = {y, z};
  stagecraft::testing::expect_mentions(
      stagecraft::testing::message_of<UsageError>([&] { runner.run(1, srcs, dsts); }),
      {"output shapes depend on the data", "NonZero", "run_shaped"});

  // NonZero's own [2, count] as the output: its first dimension is not the batch.
  stagecraft::testing::write_tail_model(path_, /*batch_first=*/false);
  stagecraft::testing::expect_mentions(
      stagecraft::testing::message_of<UsageError>([&] { describe_model(options(4)); }),
      {"output 'y' is declared [2, -1]", "serve it with max_batch_size 0"});
  // Without batching it serves, at its own shape.
  ModelRunner whole(options(0), pool);
  const std::vector<graph::ModelOutput> outs = whole.run_shaped(1, srcs);
  EXPECT_EQ(outs[0].dims, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(outs[0].data, stagecraft::testing::tail_coordinates(x.data()));
}

}  // namespace
}  // namespace stagecraft::serve
