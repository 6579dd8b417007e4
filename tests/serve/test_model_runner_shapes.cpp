// A model with dynamic axes in the model runner: requests choose the symbolic dimensions, a plan
// per input shape made on first use, the most recent max_shapes kept, results equal to a runner
// of that shape alone, a shape the model does not take refused in one line.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "executor/tensor.h"
#include "frontend/onnx/onnx_io.h"
#include "serve/model_runner.h"
#include "session/source.h"
#include "tests/support/compare.h"

namespace stagecraft::serve {
namespace {

// squeezenet1_1 (seeded weights) as an ONNX file whose batch, H and W are symbolic: a file of the
// test's own (ctest runs the tests of this program in parallel).
std::string dynamic_squeezenet() {
  const auto path = std::filesystem::temp_directory_path() /
                    cat("stagecraft_dynamic_squeezenet_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        "_", ::getpid(), ".onnx");
  session::GraphSource source;
  source.spec = "squeezenet1_1";
  source.input_size = 64;
  const session::Model m = session::load_model(source);
  onnx::ModelProto proto;
  EXPECT_TRUE(proto.ParseFromString(graph::export_onnx_bytes(m.graph, m.weights)));
  auto* shape = proto.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->set_dim_param("N");
  shape->mutable_dim(2)->set_dim_param("H");
  shape->mutable_dim(3)->set_dim_param("W");
  std::ofstream(path, std::ios::binary) << proto.SerializeAsString();
  return path.string();
}

// Removes the file at the end of a test.
struct Removed {
  std::string path;
  ~Removed() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

ServeOptions served(const std::string& path, int64_t input_size) {
  ServeOptions o;
  o.source.spec = path;
  o.source.input_size = input_size;  // the configured shape
  o.schedule = session::ScheduleSource::parse("sequential");
  o.max_batch_size = 2;
  o.session.cost_model = "analytic:v100";
  return o;
}

std::vector<float> run_at(ModelRunner& runner, int64_t batch, const SampleShapes& shapes,
                          const std::vector<float>& x) {
  const ModelIo io = runner.io_for(shapes);
  std::vector<float> y(static_cast<size_t>(batch * io.outputs[0].numel()));
  const std::span<const float> srcs[] = {x};
  const std::span<float> dsts[] = {y};
  runner.run(batch, srcs, dsts, shapes);
  return y;
}

TEST(ModelRunnerShapes, RequestsChooseTheSymbolicDimensions) {
  const std::string path = dynamic_squeezenet();
  const Removed removed{path};
  CorePool pool(2);
  ServeOptions options = served(path, 64);
  options.max_shapes = 2;
  ModelRunner runner(options, pool);
  ASSERT_TRUE(runner.dynamic());
  EXPECT_EQ(runner.io().inputs[0].dims, (std::vector<int64_t>{3, -1, -1}));
  EXPECT_EQ(runner.io().outputs[0].dims, (std::vector<int64_t>{-1}));
  EXPECT_EQ(describe_model(options).inputs[0].dims, (std::vector<int64_t>{3, -1, -1}));
  const SampleShapes other = {{3, 96, 80}};
  const ModelIo io = runner.io_for(other);
  EXPECT_EQ(io.inputs[0].dims, (std::vector<int64_t>{3, 96, 80}));
  EXPECT_EQ(io.outputs[0].dims, (std::vector<int64_t>{1000}));
  // Two samples of 96x80 against a runner configured at 96x80 (the model of that shape alone).
  const std::vector<float> x = executor::random_host_tensor(graph::Shape({2 * 3 * 96 * 80}), 3).data;
  const std::vector<float> y = run_at(runner, 2, other, x);
  ServeOptions alone = served(path, 0);
  alone.source.input_shapes = {{1, 3, 96, 80}};
  ModelRunner fixed(alone, pool);
  const std::vector<float> want = run_at(fixed, 2, {}, x);
  EXPECT_LT(stagecraft::testing::max_relative_error(y, want), 1e-5);
  // The configured shape needs no shapes; other shapes beyond max_shapes drop the oldest plans.
  const std::vector<float> x64 = executor::random_host_tensor(graph::Shape({3 * 64 * 64}), 4).data;
  EXPECT_EQ(run_at(runner, 1, {}, x64), run_at(runner, 1, {{3, 64, 64}}, x64));
  run_at(runner, 1, {{3, 72, 72}}, executor::random_host_tensor(graph::Shape({3 * 72 * 72}), 5).data);
  run_at(runner, 1, {{3, 88, 64}}, executor::random_host_tensor(graph::Shape({3 * 88 * 64}), 6).data);
  // Plans: the configured shape's (batch 1), and those of the two most recent other shapes.
  EXPECT_EQ(runner.planned().size(), 3u);
  EXPECT_NE(runner.last_plan_summary().find("input 3x88x64"), std::string::npos) << runner.last_plan_summary();
}

TEST(ModelRunnerShapes, AShapeTheModelDoesNotTakeIsOneLine) {
  const Removed removed{dynamic_squeezenet()};
  CorePool pool(2);
  ModelRunner runner(served(removed.path, 64), pool);
  try {
    runner.io_for({{4, 64, 64}});  // 4 channels: the model fixes 3
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("has dimension 1 = 3 in the model"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_THROW(runner.io_for({{3, 64, 64}, {3, 64, 64}}), UsageError);  // one input, two shapes
}

}  // namespace
}  // namespace stagecraft::serve
