// The patterns PyTorch's exporters write for real CNNs, as tiny committed models
// (tests/onnx/patterns/, made by scripts/make_onnx_patterns.py with both exporters): each loads,
// and in every layout gives PyTorch's output on the committed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "executor/executor.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/tensor_files.h"
#include "graph/passes.h"
#include "support/models.h"

namespace stagecraft::graph {
namespace {

constexpr double kTolerance = 1e-4;

std::vector<std::string> pattern_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(STAGECRAFT_ONNX_PATTERNS_DIR)) {
    if (entry.path().extension() == ".onnx") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class OnnxPattern : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxPattern, LoadsAndGivesPyTorchsOutputInEveryLayout) {
  const std::filesystem::path dir(STAGECRAFT_ONNX_PATTERNS_DIR);
  const std::string file = GetParam();
  const std::string name = file.substr(0, file.rfind('_'));  // "squeeze_excite_ts" -> pattern
  const OnnxModel model = import_onnx((dir / file).string(), {});
  PassLog log;
  const Graph g = prepare_for_inference(model.graph, &log);
  const WeightStore weights = fold_weights(model.graph, model.weights, log);
  const TensorFile x = read_tensor_file((dir / (name + ".input.npy")).string());
  const TensorFile want = read_tensor_file((dir / (name + ".expected.npy")).string());
  const auto schedule = stagecraft::testing::analytic_schedule(g, scheduler::Strategy::kSequential);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNChw8c, Layout::kNChw16c}) {
    executor::PlanOptions options;
    options.layouts = graph::LayoutAssignment::uniform(layout);
    executor::ExecutionPlan plan(g, schedule, weights, stagecraft::testing::cpu_backend(), options);
    executor::Executor run(plan);
    const auto got = run.run({executor::HostTensor{x.shape, x.data}});
    ASSERT_EQ(got.size(), 1u);
    // PyTorch's shape, not ours: a wrong output shape fails (relative_error compares shapes).
    ASSERT_EQ(got[0].shape, want.shape) << got[0].shape.to_string() << " vs PyTorch's " << want.shape.to_string();
    const executor::HostTensor expected{want.shape, want.data};
    EXPECT_LT(executor::relative_error(got[0], expected), kTolerance) << file << " in " << to_string(layout);
  }
}

INSTANTIATE_TEST_SUITE_P(Exported, OnnxPattern, ::testing::ValuesIn(pattern_files()),
                         [](const auto& param) {
                           std::string n = param.param.substr(0, param.param.size() - 5);
                           return n;
                         });

TEST(OnnxPatterns, EveryPatternHasBothExporters) {
  const auto files = pattern_files();
  EXPECT_GE(files.size(), 20u);
  for (const std::string& f : files) {
    if (f.size() < 8 || f.compare(f.size() - 8, 8, "_ts.onnx") != 0) continue;
    const std::string dynamo = f.substr(0, f.size() - 8) + "_dynamo.onnx";
    EXPECT_NE(std::find(files.begin(), files.end(), dynamo), files.end()) << dynamo;
  }
}

}  // namespace
}  // namespace stagecraft::graph
