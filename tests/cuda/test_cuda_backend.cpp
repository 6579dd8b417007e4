// The CUDA backend against the CPU backend (label `gpu`). Every test skips with the CUDA
// runtime's reason when no GPU is usable.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/devices.h"
#include "executor/executor.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "profiler/calibration.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using scheduler::Schedule;
using scheduler::Strategy;
using stagecraft::testing::Model;

constexpr double kF32Tolerance = 1e-3;
constexpr double kF16Tolerance = 5e-2;

#define SKIP_WITHOUT_GPU()                                               \
  do {                                                                   \
    const DeviceQuery q = query_cuda_devices();                          \
    if (q.devices.empty()) GTEST_SKIP() << "no usable GPU: " << q.reason; \
  } while (0)

constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

Backend& gpu() {
  static std::unique_ptr<Backend> backend = [] {
    BackendConfig config;
    config.cache_dir = (std::filesystem::temp_directory_path() / "stagecraft_gpu_test").string();
    return make_backend("cuda", config);
  }();
  return *backend;
}

std::vector<HostTensor> run_on(Backend& backend, const Model& m, const Schedule& s,
                               graph::Layout layout, bool graph_mode = true,
                               bool* captured = nullptr) {
  PlanOptions options;
  options.layout = layout;
  ExecutionPlan plan(m.graph, s, m.weights, backend, options);
  ExecutorOptions exec;
  exec.graph = graph_mode;
  Executor executor(plan, nullptr, exec);
  auto out = executor.run(stagecraft::testing::inputs_of(m.graph));
  if (captured) *captured = executor.captured();
  return out;
}

void expect_close(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LT(relative_error(got[i], want[i]), tolerance) << what << ", output " << i;
  }
}

TEST(CudaBackend, EveryOpMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (int64_t batch : {1, 3}) {
    const graph::Graph raw = stagecraft::testing::every_op_graph(batch);
    const Model m{raw, graph::random_weights(raw, 5)};
    const Schedule s = stagecraft::testing::analytic_schedule(raw, Strategy::kSequential);
    const auto want = run_on(cpu(), m, s, graph::Layout::kNCHW);
    for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNHWC}) {
      expect_close(run_on(gpu(), m, s, layout), want, kF32Tolerance,
                   cat("batch ", batch, " ", graph::to_string(layout)));
    }
  }
}

class CudaNetworks : public ::testing::TestWithParam<stagecraft::testing::NetworkCase> {};

TEST_P(CudaNetworks, EveryScheduleMatchesTheCpuInGraphAndStreamMode) {
  SKIP_WITHOUT_GPU();
  const auto& c = GetParam();
  const Model m = stagecraft::testing::network(c.name, c.size, c.batch);
  const auto want = run_on(cpu(), m, stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential),
                           graph::Layout::kNCHW);
  for (Strategy strategy : {Strategy::kSequential, Strategy::kGreedy, Strategy::kDp}) {
    const Schedule s = stagecraft::testing::analytic_schedule(m.graph, strategy);
    for (bool graph_mode : {true, false}) {
      bool captured = false;
      expect_close(run_on(gpu(), m, s, graph::Layout::kNCHW, graph_mode, &captured), want,
                   kF32Tolerance, cat(c.name, " ", scheduler::to_string(strategy),
                                      graph_mode ? " graph" : " stream"));
      EXPECT_EQ(captured, graph_mode);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, CudaNetworks,
                         ::testing::ValuesIn(stagecraft::testing::network_cases()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(CudaBackend, HalfPrecisionNhwcIsCloseToTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"squeezenet1_1", "googlenet", "resnet50"}) {
    const Model m = stagecraft::testing::network(name, 64);
    const auto want = run_on(cpu(), m, stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential),
                             graph::Layout::kNCHW);
    const Model half{graph::with_dtype(m.graph, graph::DataType::kF16), m.weights};
    expect_close(run_on(gpu(), half,
                        stagecraft::testing::analytic_schedule(half.graph, Strategy::kDp),
                        graph::Layout::kNHWC),
                 want, kF16Tolerance, name);
  }
}

TEST(CudaBackend, ConvolutionAlgorithmsAreCachedPerDevice) {
  SKIP_WITHOUT_GPU();
  const auto dir = std::filesystem::temp_directory_path() / "stagecraft_gpu_algos";
  std::filesystem::remove_all(dir);
  const Model m = stagecraft::testing::network("squeezenet1_1", 64);
  const Schedule s = stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential);
  BackendConfig config;
  config.cache_dir = dir.string();
  {
    auto backend = make_backend("cuda", config);
    ExecutionPlan plan(m.graph, s, m.weights, *backend);
    for (const auto& k : plan.kernels()) {
      EXPECT_EQ(k.kernel->implementation().find("(cached)"), std::string::npos);
    }
  }
  auto backend = make_backend("cuda", config);
  ExecutionPlan plan(m.graph, s, m.weights, *backend);
  size_t cached = 0;
  for (const auto& k : plan.kernels()) {
    cached += k.kernel->implementation().find("(cached)") != std::string::npos;
  }
  EXPECT_EQ(cached, graph::count_ops(m.graph, graph::OpKind::kConv2d));
}

TEST(CudaBackend, UnsupportedLayoutsAreNamed) {
  SKIP_WITHOUT_GPU();
  const Model m = stagecraft::testing::network("squeezenet1_1", 64);
  PlanOptions options;
  options.layout = graph::Layout::kNChw16c;
  try {
    ExecutionPlan plan(m.graph, stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential),
                       m.weights, gpu(), options);
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("nChw16c"), std::string::npos) << e.what();
  }
}

// int8: the CUDA backend's quantised kernels (cuDNN int8 convolutions, own requantising
// epilogue, conversions, pooling and copies on 8-bit tensors) against the CPU backend's, on the
// same quantised graph. Both round to nearest; the only differences are float rounding in the
// epilogues, so each 8-bit tensor may differ by a step now and then and the logits by little.
class CudaInt8Networks : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaInt8Networks, QuantisedScheduleMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::string name = GetParam();
  const Model f32 = stagecraft::testing::network(name, name == std::string("inception_v3") ? 139 : 64);
  profiler::CalibrationOptions options;
  options.samples = 2;
  const graph::Graph q =
      graph::quantize(f32.graph, profiler::calibrate(f32.graph, f32.weights, cpu(), options));
  const Model m{q, f32.weights};
  for (Strategy strategy : {Strategy::kSequential, Strategy::kDp}) {
    const Schedule s = stagecraft::testing::analytic_schedule(q, strategy);
    const auto want = run_on(cpu(), m, s, graph::Layout::kNHWC);
    for (bool graph_mode : {true, false}) {
      const auto got = run_on(gpu(), m, s, graph::Layout::kNHWC, graph_mode);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_LT(relative_error(got[i], want[i]), 0.05)
            << name << " " << scheduler::to_string(strategy) << (graph_mode ? " graph" : " stream");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, CudaInt8Networks,
                         ::testing::Values("squeezenet1_1", "inception_v3", "resnet50"));

TEST(CudaBackend, Int8NeedsNhwcAndUngroupedConvolutions) {
  SKIP_WITHOUT_GPU();
  KernelSpec spec;
  spec.kind = graph::OpKind::kConv2d;
  graph::Conv2dAttrs a;
  a.in_channels = 8;
  a.out_channels = 8;
  a.kernel = graph::Hw::square(1);
  a.groups = 8;
  spec.attrs = a;
  graph::OpWeights w;
  w.weight.assign(8, 1.0f);
  spec.weights = &w;
  graph::TensorDesc d = graph::make_desc(graph::Shape{1, 8, 4, 4}, graph::DataType::kU8);
  d.scale = 0.1f;
  d.layout = graph::Layout::kNHWC;
  spec.srcs = {d};
  spec.dsts = {d};
  EXPECT_NE(gpu().supports(spec).message.find("grouped"), std::string::npos)
      << gpu().supports(spec).message;
  a.groups = 1;
  w.weight.assign(64, 1.0f);
  spec.attrs = a;
  spec.srcs[0].layout = spec.dsts[0].layout = graph::Layout::kNCHW;
  EXPECT_NE(gpu().supports(spec).message.find("nhwc"), std::string::npos)
      << gpu().supports(spec).message;
  EXPECT_EQ(gpu().preferred_layout(graph::DataType::kU8), graph::Layout::kNHWC);
}

}  // namespace
}  // namespace stagecraft::executor
