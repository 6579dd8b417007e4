// The backend's entry points driven by a stand-in server (fake_server.h): a batch of good and bad
// requests — bad ones Triton itself would refuse before the backend (unknown input, data type,
// shape, batch), and ones it would not (GPU memory, buffers that do not add up, an unknown output)
// — each bad one answered with its own error line, the good ones run together and equal to
// running each alone; every request answered once and released; statistics reported.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <span>

#include "executor/tensor.h"
#include "fake_server.h"
#include "serve/model_runner.h"
#include "tests/support/compare.h"
#include "tests/support/tail_model.h"

namespace {

namespace fs = std::filesystem;
constexpr int64_t kSize = 64;
constexpr int64_t kSample = 3 * kSize * kSize;

std::string model_config(const std::string& cache, const std::string& extra = "") {
  return R"({"name": "net", "max_batch_size": 4, "parameters": {
      "model": {"string_value": "squeezenet1_1"}, "input_size": {"string_value": "64"},
      "schedule": {"string_value": "sequential"}, "cache_dir": {"string_value": ")" +
         cache + "\"}" + extra + "}}";
}

std::vector<float> sample_data(int64_t samples, uint64_t seed) {
  return stagecraft::executor::random_host_tensor(stagecraft::graph::Shape({samples * kSample}),
                                                  seed)
      .data;
}

TRITONBACKEND_Request request(std::vector<float> data, std::vector<int64_t> shape,
                              std::string name = "input") {
  TRITONBACKEND_Request r;
  TRITONBACKEND_Input in;
  in.name = std::move(name);
  in.shape = std::move(shape);
  in.buffers.push_back(std::move(data));
  r.inputs.push_back(std::move(in));
  return r;
}

using stagecraft::testing::max_relative_error;

TRITONBACKEND_Model make_model(const std::string& folder, std::string config) {
  TRITONBACKEND_Model model;
  model.name = "net";
  model.repository = folder;
  model.config = std::move(config);
  return model;
}

class TritonBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test (ctest runs them in parallel processes; a shared one was removed under
    // a running test).
    cache_ = (fs::temp_directory_path() / ("stagecraft_test_serve_backend_" +
                                           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())))
                 .string();
    fs::create_directories(cache_);
    backend_.config.json = R"({"cmdline": {"cores": "2"}})";
    ASSERT_EQ(fake_server::take(TRITONBACKEND_Initialize(&backend_)), "");
  }
  void TearDown() override {
    fake_server::clear();
    EXPECT_EQ(fake_server::take(TRITONBACKEND_Finalize(&backend_)), "");
    fs::remove_all(cache_);
  }
  TRITONBACKEND_Backend backend_;
  std::string cache_;
};

TEST_F(TritonBackend, AnswersEveryRequestOfAMixedBatch) {
  TRITONBACKEND_Model model = make_model(cache_, model_config(cache_));
  ASSERT_EQ(fake_server::take(TRITONBACKEND_ModelInitialize(&model)), "");
  // Auto-completed: the model's input and output, per sample.
  EXPECT_NE(model.set_config.find(R"("dims":[3,64,64])"), std::string::npos) << model.set_config;
  EXPECT_NE(model.set_config.find(R"("name":"flatten")"), std::string::npos) << model.set_config;
  TRITONBACKEND_ModelInstance instance{"net_0", TRITONSERVER_INSTANCEGROUPKIND_CPU, &model};
  ASSERT_EQ(fake_server::take(TRITONBACKEND_ModelInstanceInitialize(&instance)), "");

  const std::vector<float> x = sample_data(5, 3);
  const auto samples = [&](int64_t first, int64_t n) {
    return std::vector<float>(x.begin() + first * kSample, x.begin() + (first + n) * kSample);
  };
  std::vector<TRITONBACKEND_Request> requests;
  // 0: good, its data in two buffers.
  requests.push_back(request(samples(0, 1), {1, 3, kSize, kSize}));
  auto& split = requests.back().inputs[0].buffers;
  split.emplace_back(split[0].begin() + 1000, split[0].end());
  split[0].resize(1000);
  requests.push_back(request(samples(0, 1), {1, 3, kSize, kSize}, "image"));  // 1: name
  requests.push_back(request(samples(0, 1), {1, 3, kSize, kSize}));           // 2: type
  requests.back().inputs[0].type = TRITONSERVER_TYPE_FP64;
  requests.push_back(request(samples(1, 2), {2, 3, kSize, kSize}));  // 3: good, batch 2
  requests.back().outputs = {"flatten"};
  requests.push_back(request(samples(0, 1), {1, 3, kSize, kSize}));  // 4: GPU memory
  requests.back().inputs[0].memory = TRITONSERVER_MEMORY_GPU;
  requests.push_back(request(std::vector<float>(3 * 32 * 32), {1, 3, 32, 32}));  // 5: shape
  std::vector<float> short_data = samples(0, 1);
  short_data.pop_back();
  requests.push_back(request(short_data, {1, 3, kSize, kSize}));         // 6: bytes
  requests.push_back(request(sample_data(5, 1), {5, 3, kSize, kSize}));  // 7: batch 5
  requests.push_back(request(samples(0, 1), {1, 3, kSize, kSize}));      // 8: output
  requests.back().outputs = {"nope"};
  requests.push_back(request(samples(3, 1), {1, 3, kSize, kSize}));  // 9: good
  std::vector<TRITONBACKEND_Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);

  ASSERT_EQ(fake_server::take(TRITONBACKEND_ModelInstanceExecute(
                &instance, pointers.data(), static_cast<uint32_t>(pointers.size()))),
            "");

  auto& responses = fake_server::responses();
  ASSERT_EQ(responses.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(requests[i].released) << i;
    EXPECT_TRUE(responses[i]->sent) << i;
    EXPECT_EQ(responses[i]->request, &requests[i]);
  }
  const std::vector<std::pair<size_t, std::string>> bad = {
      {1, "unknown input 'image' (the model takes: input)"},
      {2, "input 'input': data type FP64, the model takes FP32"},
      {4, "input 'input' is in GPU memory"},
      {5, "input 'input': shape [1, 3, 32, 32], the model takes [1, 3, 64, 64]"},
      {6, "bytes of data, its shape needs 49152"},
      {7, "the first dimension is the batch, 1 to 4 (max_batch_size)"},
      {8, "unknown output 'nope'"}};
  for (const auto& [i, text] : bad) {
    const std::string& e = responses[i]->error;
    EXPECT_EQ(e.rfind("stagecraft model 'net': ", 0), 0u) << i << ": " << e;
    EXPECT_NE(e.find(text), std::string::npos) << i << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << i << ": " << e;
  }

  // The good ones, run together (4 samples after the first group's), equal each sample alone.
  stagecraft::serve::ServeOptions options;
  options.source.spec = "squeezenet1_1";
  options.source.input_size = kSize;
  options.schedule = stagecraft::session::ScheduleSource::search(stagecraft::scheduler::Strategy::kSequential);
  options.max_batch_size = 1;
  options.session.cost_model = "analytic:v100";
  stagecraft::serve::CorePool pool(1);
  stagecraft::serve::ModelRunner alone(options, pool);
  const auto expect_rows = [&](size_t r, int64_t first, int64_t n) {
    ASSERT_EQ(responses[r]->error, "") << r;
    ASSERT_EQ(responses[r]->outputs.count("flatten"), 1u) << r;
    const TRITONBACKEND_Output& out = responses[r]->outputs.at("flatten");
    EXPECT_EQ(out.shape, (std::vector<int64_t>{n, 1000})) << r;
    for (int64_t s = 0; s < n; ++s) {
      std::vector<float> src = samples(first + s, 1), dst(1000);
      const std::span<const float> srcs[] = {src};
      const std::span<float> dsts[] = {dst};
      alone.run(1, srcs, dsts);
      EXPECT_LT(max_relative_error(std::span(out.data).subspan(s * 1000, 1000), dst), 1e-4)
          << "request " << r << " sample " << s;
    }
  };
  expect_rows(0, 0, 1);
  expect_rows(3, 1, 2);
  expect_rows(9, 3, 1);
  EXPECT_EQ(instance.statistics, 10);
  EXPECT_EQ(instance.successes, 3);
  EXPECT_EQ(instance.batch_samples, 5u);  // 0, 3, 8 and 9 ran (8 failed only at its output)

  EXPECT_EQ(fake_server::take(TRITONBACKEND_ModelInstanceFinalize(&instance)), "");
  EXPECT_EQ(fake_server::take(TRITONBACKEND_ModelFinalize(&model)), "");
}

TEST_F(TritonBackend, ServesAModelWhoseOutputShapesFollowTheData) {
  // An ONNX model ending in NonZero (tests/support/tail_model.h): y [1, 2, count] per sample.
  const std::string onnx = (fs::path(cache_) / "tail.onnx").string();
  stagecraft::testing::write_tail_model(onnx);
  TRITONBACKEND_Model model = make_model(cache_, R"({"name": "net", "max_batch_size": 2, "parameters": {
      "model": {"string_value": ")" + onnx + R"("}, "schedule": {"string_value": "sequential"},
      "cache_dir": {"string_value": ")" + cache_ + "\"}}}");
  ASSERT_EQ(fake_server::take(TRITONBACKEND_ModelInitialize(&model)), "");
  EXPECT_NE(model.set_config.find(R"("dims":[2,-1],"name":"y")"), std::string::npos) << model.set_config;
  TRITONBACKEND_ModelInstance instance{"net_0", TRITONSERVER_INSTANCEGROUPKIND_CPU, &model};
  ASSERT_EQ(fake_server::take(TRITONBACKEND_ModelInstanceInitialize(&instance)), "");

  // Sample k: its first k elements above 0.5, the rest below.
  const auto sample = [](int k) {
    std::vector<float> x(24, 0.1f);
    for (int i = 0; i < k; ++i) x[static_cast<size_t>(i * 5 % 24)] = 0.7f;
    return x;
  };
  std::vector<TRITONBACKEND_Request> requests;
  requests.push_back(request(sample(3), {1, 4, 6}, "x"));  // 0: 3 found
  requests.back().outputs = {"y"};
  requests.push_back(request(sample(0), {1, 4, 6}, "x"));  // 1: none
  std::vector<float> two = sample(2), other = sample(4);
  two.insert(two.end(), other.begin(), other.end());
  requests.push_back(request(two, {2, 4, 6}, "x"));  // 2: two samples of different counts
  std::vector<float> same = sample(2);
  same.insert(same.end(), same.begin(), same.end());
  requests.push_back(request(same, {2, 4, 6}, "x"));  // 3: two samples of one count
  std::vector<TRITONBACKEND_Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);
  ASSERT_EQ(fake_server::take(TRITONBACKEND_ModelInstanceExecute(&instance, pointers.data(),
                                                                 static_cast<uint32_t>(pointers.size()))),
            "");
  auto& responses = fake_server::responses();
  ASSERT_EQ(responses.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_TRUE(requests[i].released && responses[i]->sent) << i;
  ASSERT_EQ(responses[0]->error, "");
  EXPECT_EQ(responses[0]->outputs.count("z"), 0u);  // only what was asked for
  EXPECT_EQ(responses[0]->outputs.at("y").shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(responses[0]->outputs.at("y").data, stagecraft::testing::tail_coordinates(sample(3).data()));
  ASSERT_EQ(responses[1]->error, "");
  EXPECT_EQ(responses[1]->outputs.at("y").shape, (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(responses[1]->outputs.at("z").shape, (std::vector<int64_t>{1, 4, 6}));
  EXPECT_NE(responses[2]->error.find("for one sample and [1, 2, 4] for another"), std::string::npos)
      << responses[2]->error;
  EXPECT_EQ(responses[2]->error.find('\n'), std::string::npos);
  ASSERT_EQ(responses[3]->error, "");
  EXPECT_EQ(responses[3]->outputs.at("y").shape, (std::vector<int64_t>{2, 2, 2}));
  std::vector<float> twice = stagecraft::testing::tail_coordinates(same.data());
  twice.insert(twice.end(), twice.begin(), twice.end());
  EXPECT_EQ(responses[3]->outputs.at("y").data, twice);
  EXPECT_EQ(instance.successes, 3);
  EXPECT_EQ(fake_server::take(TRITONBACKEND_ModelInstanceFinalize(&instance)), "");
  EXPECT_EQ(fake_server::take(TRITONBACKEND_ModelFinalize(&model)), "");
}

TEST_F(TritonBackend, RefusesBadConfigurationsWithOneLine) {
  TRITONBACKEND_Model bad =
      make_model(cache_, model_config(cache_, R"(, "cores": {"string_value": "x"})"));
  const std::string e = fake_server::take(TRITONBACKEND_ModelInitialize(&bad));
  EXPECT_NE(e.find("model 'net': config.pbtxt parameter 'cores': 'x' is not a number >= 0"),
            std::string::npos)
      << e;
  EXPECT_EQ(bad.state, nullptr);

  TRITONBACKEND_Model declared = make_model(cache_, model_config(cache_));
  declared.config.insert(
      declared.config.size() - 1,
      R"(, "input": [{"name": "input", "data_type": "TYPE_FP32", "dims": [3, 32, 32]}])");
  const std::string d = fake_server::take(TRITONBACKEND_ModelInitialize(&declared));
  EXPECT_NE(d.find("dims [3, 32, 32], the model's are [3, 64, 64]"), std::string::npos) << d;

  TRITONBACKEND_Model model = make_model(cache_, model_config(cache_));
  ASSERT_EQ(fake_server::take(TRITONBACKEND_ModelInitialize(&model)), "");
  TRITONBACKEND_ModelInstance gpu{"net_0", TRITONSERVER_INSTANCEGROUPKIND_GPU, &model};
  const std::string g = fake_server::take(TRITONBACKEND_ModelInstanceInitialize(&gpu));
  EXPECT_NE(g.find("use kind: KIND_CPU"), std::string::npos) << g;
  EXPECT_EQ(fake_server::take(TRITONBACKEND_ModelFinalize(&model)), "");
}

TEST_F(TritonBackend, PrefersCpuInstances) {
  TRITONBACKEND_BackendAttribute attributes;
  EXPECT_EQ(fake_server::take(TRITONBACKEND_GetBackendAttribute(&backend_, &attributes)), "");
  EXPECT_EQ(attributes.preferred,
            (std::vector<TRITONSERVER_InstanceGroupKind>{TRITONSERVER_INSTANCEGROUPKIND_CPU}));
}

TEST(TritonBackendInit, RefusesABadCoreCount) {
  TRITONBACKEND_Backend backend;
  backend.config.json = R"({"cmdline": {"cores": "0"}})";
  const std::string e = fake_server::take(TRITONBACKEND_Initialize(&backend));
  EXPECT_NE(e.find("--backend-config=stagecraft,cores=0: a number of cores >= 1"),
            std::string::npos)
      << e;
}

}  // namespace
