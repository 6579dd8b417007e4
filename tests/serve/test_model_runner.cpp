// The model runner: a batch gives the same outputs as its samples run one by one, plans are made
// once per batch size and core count, bad calls are one-line errors, and two runners sharing a
// pool run side by side with the same results as alone.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <vector>

#include "common/error.h"
#include "executor/tensor.h"
#include "serve/model_runner.h"
#include "tests/support/compare.h"

namespace stagecraft::serve {
namespace {

constexpr int64_t kInputSize = 64;  // squeezenet1_1 at 64x64: milliseconds per run

ServeOptions squeezenet(int64_t max_batch, const std::string& schedule = "sequential") {
  ServeOptions o;
  o.source.spec = "squeezenet1_1";
  o.source.input_size = kInputSize;
  o.schedule = session::ScheduleSource::parse(schedule);
  o.max_batch_size = max_batch;
  o.session.cost_model = "analytic:v100";  // no measuring: tests never time
  return o;
}

std::vector<float> random_values(int64_t n, uint64_t seed) {
  return executor::random_host_tensor(graph::Shape({n}), seed).data;
}

std::vector<float> run(ModelRunner& runner, int64_t batch, const std::vector<float>& src) {
  std::vector<float> dst(static_cast<size_t>(batch * runner.io().outputs[0].numel()));
  const std::span<const float> srcs[] = {src};
  const std::span<float> dsts[] = {dst};
  runner.run(batch, srcs, dsts);
  return dst;
}

using stagecraft::testing::max_relative_error;

TEST(ModelRunner, DescribesInputsAndOutputsPerSample) {
  const ModelIo io = describe_model(squeezenet(4));
  ASSERT_EQ(io.inputs.size(), 1u);
  ASSERT_EQ(io.outputs.size(), 1u);
  EXPECT_EQ(io.inputs[0].dims, (std::vector<int64_t>{3, kInputSize, kInputSize}));
  EXPECT_EQ(io.outputs[0].dims, (std::vector<int64_t>{1000}));
  // Without batching: the model's own shape, batch included.
  EXPECT_EQ(describe_model(squeezenet(0)).inputs[0].dims,
            (std::vector<int64_t>{1, 3, kInputSize, kInputSize}));
}

TEST(ModelRunner, BatchEqualsItsSamplesOneByOne) {
  CorePool pool(2);
  ModelRunner runner(squeezenet(4), pool);
  const int64_t sample = runner.io().inputs[0].numel();
  const std::vector<float> x = random_values(3 * sample, 7);
  const std::vector<float> batched = run(runner, 3, x);
  const int64_t out = runner.io().outputs[0].numel();
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<float> one(x.begin() + s * sample, x.begin() + (s + 1) * sample);
    std::vector<float> alone = run(runner, 1, one);
    std::vector<float> row(batched.begin() + s * out, batched.begin() + (s + 1) * out);
    EXPECT_LT(max_relative_error(row, alone), 1e-4) << "sample " << s;
  }
  // One plan per batch size, with every core of the pool.
  EXPECT_EQ(runner.planned(), (std::vector<std::pair<int64_t, int>>{{1, 2}, {3, 2}}));
  EXPECT_NE(runner.last_plan_summary().find("batch 1, 2 thread(s)"), std::string::npos)
      << runner.last_plan_summary();
}

TEST(ModelRunner, BatchSizesRunSmallerBatchesPadded) {
  CorePool pool(2);
  ServeOptions options = squeezenet(4);
  options.batch_sizes = {2, 4};
  ModelRunner runner(options, pool);
  EXPECT_EQ(runner.planned_batch(1), 2);
  EXPECT_EQ(runner.planned_batch(3), 4);
  EXPECT_EQ(runner.planned_batch(4), 4);
  const int64_t sample = runner.io().inputs[0].numel();
  const int64_t out = runner.io().outputs[0].numel();
  const std::vector<float> x = random_values(3 * sample, 11);
  const std::vector<float> batched = run(runner, 3, x);  // on the plan of 4, one sample of zeros
  ASSERT_EQ(batched.size(), static_cast<size_t>(3 * out));
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<float> one(x.begin() + s * sample, x.begin() + (s + 1) * sample);
    std::vector<float> alone = run(runner, 1, one);  // on the plan of 2
    std::vector<float> row(batched.begin() + s * out, batched.begin() + (s + 1) * out);
    EXPECT_LT(max_relative_error(row, alone), 1e-4) << "sample " << s;
  }
  EXPECT_EQ(runner.planned(), (std::vector<std::pair<int64_t, int>>{{2, 2}, {4, 2}}));
}

TEST(ModelRunner, BadCallsAreOneLineErrors) {
  CorePool pool(1);
  ModelRunner runner(squeezenet(2), pool);
  const int64_t sample = runner.io().inputs[0].numel();
  const std::vector<float> x = random_values(3 * sample, 1);
  try {
    run(runner, 3, x);
    FAIL() << "ran a batch over max_batch_size";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("batch of 3 samples, the model takes 1 to 2"),
              std::string::npos)
        << e.what();
  }
  const std::vector<float> short_input(static_cast<size_t>(sample - 1));
  EXPECT_THROW(run(runner, 1, short_input), UsageError);
  EXPECT_TRUE(runner.planned().empty());  // nothing planned for calls refused up front
  ServeOptions unknown = squeezenet(2);
  unknown.source.spec = "squeezenet9";
  EXPECT_THROW(ModelRunner(unknown, pool), Error);
}

TEST(ModelRunner, RunsWithTheCoresItIsGranted) {
  CorePool pool(2);
  auto reserved = pool.reserve("model 'fast'", 1);
  ServeOptions fast = squeezenet(2);
  ModelRunner on_reserved(fast, pool, reserved);
  ServeOptions one_core = squeezenet(2);
  one_core.cores = 1;
  ModelRunner on_shared(one_core, pool);
  const std::vector<float> x = random_values(on_shared.io().inputs[0].numel(), 3);
  // Both at once, on different threads: one core each, no waiting on each other's grant.
  auto a = std::async(std::launch::async, [&] { return run(on_reserved, 1, x); });
  auto b = std::async(std::launch::async, [&] { return run(on_shared, 1, x); });
  const std::vector<float> ya = a.get(), yb = b.get();
  EXPECT_LT(max_relative_error(ya, yb), 1e-4);
  EXPECT_EQ(on_reserved.planned(), (std::vector<std::pair<int64_t, int>>{{1, 1}}));
  EXPECT_EQ(on_shared.planned(), (std::vector<std::pair<int64_t, int>>{{1, 1}}));
  EXPECT_EQ(pool.shared_in_use(), 0);
}

}  // namespace
}  // namespace stagecraft::serve
