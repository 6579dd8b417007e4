// The harness of the GPU tests (gpu_harness.h): the program's GPU backend, whole-plan runs on it
// and on the CPU, comparisons.
#include "gpu_harness.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/strings.h"
#include "executor/executor.h"
#include "support/compare.h"
#include "support/kernels.h"

namespace stagecraft::executor::gpu_test {

using scheduler::Schedule;
using stagecraft::testing::Model;

namespace {

constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

// The program's GPU backend, destroyed by the test environment's TearDown, before main returns
// (not by a static destructor after the CUDA libraries may have begun their own teardown).
class GpuEnvironment : public ::testing::Environment {
 public:
  static Backend& backend() {
    if (!backend_) {
      BackendConfig config;
      config.cache_dir = (std::filesystem::temp_directory_path() / "stagecraft_gpu_test").string();
      backend_ = make_backend("cuda", config);
    }
    return *backend_;
  }
  void TearDown() override { backend_.reset(); }

 private:
  static inline std::unique_ptr<Backend> backend_;
};
::testing::Environment* const kGpuEnvironment = ::testing::AddGlobalTestEnvironment(new GpuEnvironment);

}  // namespace

Backend& gpu() { return GpuEnvironment::backend(); }

RunResult run_twice(Backend& backend, const Model& m, const Schedule& s, graph::Layout layout,
                    bool graph_mode) {
  PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(layout);
  ExecutionPlan plan(m.graph, s, m.weights, backend, options);
  ExecutorOptions exec;
  exec.replay_cuda_graph = graph_mode;
  Executor executor(plan, nullptr, exec);
  RunResult r;
  r.first = executor.run(stagecraft::testing::inputs_of(m.graph, 7));
  r.second = executor.run(stagecraft::testing::inputs_of(m.graph, 8));
  r.captured = executor.captured();
  return r;
}

std::vector<HostTensor> run_cpu(const Model& m, const Schedule& s, graph::Layout layout, uint64_t seed) {
  PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(layout);
  ExecutionPlan plan(m.graph, s, m.weights, cpu(), options);
  Executor executor(plan);
  return executor.run(stagecraft::testing::inputs_of(m.graph, seed));
}

void expect_close(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want,
                  double tolerance, const std::string& what) {
  ASSERT_FALSE(want.empty()) << what;
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = relative_error(got[i], want[i]);
    worst = stagecraft::testing::worst_of(worst, error);
    EXPECT_LT(error, tolerance) << what << ", output " << i;
  }
  std::printf("max relative error %.3g (tolerance %.0e): %s\n", worst, tolerance, what.c_str());
}

void expect_both_runs_close(const RunResult& r, const std::vector<HostTensor>& want7,
                            const std::vector<HostTensor>& want8, double tolerance, const std::string& what) {
  expect_close(r.first, want7, tolerance, what + " (first inputs)");
  expect_close(r.second, want8, tolerance, what + " (new inputs after capture)");
}

void expect_graph_and_stream_match(const Model& m, const Schedule& s, graph::Layout layout,
                                   const std::vector<HostTensor>& want7,
                                   const std::vector<HostTensor>& want8, double tolerance,
                                   const std::string& what) {
  for (bool graph_mode : {true, false}) {
    const RunResult r = run_twice(gpu(), m, s, layout, graph_mode);
    EXPECT_EQ(r.captured, graph_mode) << what;
    expect_both_runs_close(r, want7, want8, tolerance,
                           cat(what, " ", graph::to_string(layout), graph_mode ? " graph" : " stream"));
  }
}

void expect_every_value_matches(const Model& m, graph::Layout layout, double tolerance, const std::string& what) {
  graph::Graph every = m.graph;
  for (graph::OpId op = 0; op < static_cast<graph::OpId>(every.num_ops()); ++op) {
    for (graph::ValueId v : every.op(op).outputs) {
      const auto& outs = every.outputs();
      if (std::find(outs.begin(), outs.end(), v) == outs.end()) every.add_output(v);
    }
  }
  const Model open{every, m.weights};
  const Schedule s = stagecraft::testing::analytic_schedule(every, scheduler::Strategy::kSequential);
  const std::vector<HostTensor> want = run_cpu(open, s, graph::Layout::kNCHW, 7);
  const RunResult r = run_twice(gpu(), open, s, layout, /*graph_mode=*/false);
  ASSERT_EQ(r.first.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const graph::Value& value = every.value(every.outputs()[i]);
    const std::string writer = value.producer == graph::kNoOp ? "input" : every.op(value.producer).name;
    EXPECT_LT(relative_error(r.first[i], want[i]), tolerance)
        << what << ": value '" << value.name << "' (written by '" << writer << "') differs from the CPU's";
  }
}

std::vector<float> run_gpu_kernel(const KernelSpec& spec, const std::vector<std::vector<float>>& srcs) {
  return stagecraft::testing::run_f32_kernel(gpu(), spec, srcs);
}

}  // namespace stagecraft::executor::gpu_test
