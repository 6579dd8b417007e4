// The CUDA backend against the CPU backend (label `gpu`). Every test skips with the CUDA runtime's
// reason when no GPU is usable.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <utility>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cuda/devices.h"
#include "executor/executor.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "graph/weights.h"
#include "networks/builder.h"
#include "quant/calibration.h"
#include "gpu_harness.h"
#include "support/kernels.h"
#include "support/models.h"
#include "support/compare.h"

namespace stagecraft::executor {
namespace {

using namespace gpu_test;  // NOLINT: the harness of this program
using scheduler::Schedule;
using scheduler::Strategy;
using stagecraft::testing::Model;

constexpr const char* kExitChildVariable = "STAGECRAFT_GPU_TEST_EXIT_CHILD";
constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

// A model, its sequential schedule and the CPU's NCHW outputs for the inputs of seeds 7 and 8:
// what the GPU's two runs (the second a replay with new inputs) are compared with.
struct CpuBaseline {
  Model m;
  Schedule s;
  std::vector<HostTensor> want7, want8;
};
CpuBaseline cpu_baseline(Model m) {
  CpuBaseline b{std::move(m), {}, {}, {}};
  b.s = stagecraft::testing::analytic_schedule(b.m.graph, Strategy::kSequential);
  b.want7 = run_cpu(b.m, b.s, graph::Layout::kNCHW, 7);
  b.want8 = run_cpu(b.m, b.s, graph::Layout::kNCHW, 8);
  return b;
}

TEST(CudaBackend, EveryOpMatchesTheCpuAndAReplayReadsNewInputs) {
  SKIP_WITHOUT_GPU();
  for (int64_t batch : {1, 3}) {
    const graph::Graph raw = stagecraft::testing::every_op_graph(batch);
    const auto [m, s, want7, want8] = cpu_baseline(Model{raw, graph::random_weights(raw, 5)});
    // Graph mode captures (the linear layer's cuBLAS GEMM included: fixed workspace).
    for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNHWC}) {
      expect_graph_and_stream_match(m, s, layout, want7, want8, kF32Tolerance, cat("batch ", batch));
    }
  }
}

// ---- Op kinds of PyTorch-exported models ---------------------------------------------------------

TEST(CudaBackend, NewOpKindsMatchTheCpuInEveryLayoutAndMode) {
  SKIP_WITHOUT_GPU();
  for (int64_t batch : {1, 2}) {
    const graph::Graph raw = stagecraft::testing::se_block_graph(batch);
    const auto [m, s, want7, want8] = cpu_baseline(Model{raw, graph::random_weights(raw, 4)});
    const Model half{graph::with_dtype(m.graph, graph::DataType::kF16), m.weights};
    const Schedule half_s = stagecraft::testing::analytic_schedule(half.graph, Strategy::kSequential);
    for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNHWC}) {
      expect_every_value_matches(m, layout, kF32Tolerance, cat("every value, f32 batch ", batch, " ", graph::to_string(layout)));
      expect_graph_and_stream_match(m, s, layout, want7, want8, kF32Tolerance, cat("f32 batch ", batch));
      expect_graph_and_stream_match(half, half_s, layout, want7, want8, kF16Tolerance, cat("f16 batch ", batch));
    }
  }
}

// `m` under every schedule (sequential, greedy, dp) in both CUDA layouts, in graph and stream
// mode, against the CPU's outputs, which are returned (for the inputs of seed 7, then 8).
std::pair<std::vector<HostTensor>, std::vector<HostTensor>> expect_every_schedule_matches_the_cpu(
    const Model& m) {
  const Schedule seq = stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential);
  const auto want7 = run_cpu(m, seq, graph::Layout::kNCHW, 7), want8 = run_cpu(m, seq, graph::Layout::kNCHW, 8);
  for (Strategy strategy : {Strategy::kSequential, Strategy::kGreedy, Strategy::kDp}) {
    const Schedule s = stagecraft::testing::analytic_schedule(m.graph, strategy);
    for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNHWC}) {
      expect_graph_and_stream_match(m, s, layout, want7, want8, kF32Tolerance,
                                    std::string(scheduler::to_string(strategy)));
    }
  }
  return {want7, want8};
}

// The ONNX-style model of the executor tests (hard sigmoid with ONNX's slope, SE block with
// reshapes and linear layers, constants first and second, leaky ReLU, shuffle, global max pool),
// prepared for inference (activations fused where a pass fuses them), under every schedule.
TEST(CudaBackend, ModernOpsGraphMatchesTheCpuUnderEverySchedule) {
  SKIP_WITHOUT_GPU();
  const Model m = stagecraft::testing::model_of(stagecraft::testing::modern_ops_graph(2, 12), 3);
  const auto [want7, want8] = expect_every_schedule_matches_the_cpu(m);
  const Model half{graph::with_dtype(m.graph, graph::DataType::kF16), m.weights};
  const RunResult r = run_twice(gpu(), half, stagecraft::testing::analytic_schedule(half.graph, Strategy::kDp),
                                graph::Layout::kNHWC);
  EXPECT_TRUE(r.captured);
  expect_both_runs_close(r, want7, want8, kF16Tolerance, "f16 nhwc dp");
}

// Row-major tensor ops (a vision transformer in small: matmul of two activations, transposes,
// narrows, a class token, softmax over the keys, linear layers and layer norms over the last axis,
// a reduction over the tokens) under every schedule: f32 with the convolution in both CUDA
// layouts, f16 in NHWC.
TEST(CudaBackend, TransformerOpsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model m = stagecraft::testing::model_of(stagecraft::testing::vit_graph(2, 16, 2, 2), 7);
  const auto [want7, want8] = expect_every_schedule_matches_the_cpu(m);
  const Model half{graph::with_dtype(m.graph, graph::DataType::kF16), m.weights};
  expect_graph_and_stream_match(half, stagecraft::testing::analytic_schedule(half.graph, Strategy::kDp),
                                graph::Layout::kNHWC, want7, want8, kF16Tolerance, "f16 dp");
}

// Layer normalisation over channels and GELU (both forms, fused and alone) against the CPU.
TEST(CudaBackend, LayerNormAndGeluMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model m = stagecraft::testing::model_of(stagecraft::testing::channel_norms_graph(2, 20), 5);
  const Schedule seq = stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential);
  const auto want7 = run_cpu(m, seq, graph::Layout::kNCHW, 7), want8 = run_cpu(m, seq, graph::Layout::kNCHW, 8);
  for (graph::Layout layout : {graph::Layout::kNCHW, graph::Layout::kNHWC}) {
    expect_graph_and_stream_match(m, seq, layout, want7, want8, kF32Tolerance, "norms");
  }
}


// The CPU broadcasts only the second operand of a binary op; the CUDA kernel broadcasts either.
// Against a direct loop, with the first input in NCHW and the second and the result in NHWC.
TEST(CudaBackend, BinaryBroadcastsTheFirstOperand) {
  SKIP_WITHOUT_GPU();
  graph::BinaryAttrs div;
  div.op = graph::BinaryOp::kDiv;
  div.activation = graph::Activation::kSilu;
  KernelSpec spec;
  spec.kind = graph::OpKind::kBinary;
  spec.attrs = div;
  spec.name = "gate_over_x";
  graph::TensorDesc a = graph::make_desc(graph::Shape{2, 8, 1, 1}), b = graph::make_desc(graph::Shape{2, 8, 5, 5});
  b.layout = graph::Layout::kNHWC;
  spec.srcs = {a, b};
  spec.dsts = {b};
  std::vector<float> xa(16), xb(400);
  for (size_t i = 0; i < xa.size(); ++i) xa[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = 0.5f + static_cast<float>(i % 11) * 0.25f;
  ASSERT_TRUE(gpu().supports(spec).is_native()) << gpu().supports(spec).support.message;
  const std::vector<float> y = run_gpu_kernel(spec, {xa, xb});
  double worst = 0;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 8; ++c)
      for (int64_t p = 0; p < 25; ++p) {  // NHWC: pixel-major, channel innermost
        const size_t at = static_cast<size_t>((n * 25 + p) * 8 + c);
        const double want = graph::apply_activation(graph::Activation::kSilu, xa[static_cast<size_t>(n * 8 + c)] / xb[at]);
        worst = stagecraft::testing::worst_of(worst, std::fabs(y[at] - want));
      }
  EXPECT_LT(worst, 1e-5);
}

TEST(CudaBackend, NewKindsInInt8AreRefusedWithTheContractsReason) {
  SKIP_WITHOUT_GPU();
  graph::TensorDesc q = graph::make_desc(graph::Shape{1, 8, 4, 4}, graph::DataType::kU8);
  q.scale = 0.05f;
  q.layout = graph::Layout::kNHWC;
  graph::ChannelShuffleAttrs shuffle;
  shuffle.groups = 2;
  for (const auto& [kind, attrs] : std::vector<std::pair<graph::OpKind, graph::OpAttrs>>{
           {graph::OpKind::kSilu, graph::NoAttrs{}}, {graph::OpKind::kGlobalMaxPool, graph::NoAttrs{}},
           {graph::OpKind::kChannelShuffle, shuffle}, {graph::OpKind::kLeakyRelu, graph::LeakyReluAttrs{}}}) {
    KernelSpec spec;
    spec.kind = kind;
    spec.attrs = attrs;
    spec.srcs = {q};
    spec.dsts = {q};
    const Support s = gpu().supports(spec).support;
    EXPECT_EQ(s.reason, SupportReason::kQuantisation) << graph::to_string(kind) << ": " << s.message;
  }
}

class CudaNetworks : public ::testing::TestWithParam<stagecraft::testing::NetworkCase> {};

TEST_P(CudaNetworks, EveryScheduleMatchesTheCpuInGraphAndStreamMode) {
  SKIP_WITHOUT_GPU();
  const auto& c = GetParam();
  const Model m = stagecraft::testing::network(c.name, c.size, c.batch);
  const Schedule seq = stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential);
  const auto want7 = run_cpu(m, seq, graph::Layout::kNCHW, 7), want8 = run_cpu(m, seq, graph::Layout::kNCHW, 8);
  for (Strategy strategy : {Strategy::kSequential, Strategy::kGreedy, Strategy::kDp}) {
    const Schedule s = stagecraft::testing::analytic_schedule(m.graph, strategy);
    for (bool graph_mode : {true, false}) {
      const RunResult r = run_twice(gpu(), m, s, graph::Layout::kNCHW, graph_mode);
      EXPECT_EQ(r.captured, graph_mode);
      expect_both_runs_close(r, want7, want8, kF32Tolerance,
                             cat(c.name, " ", scheduler::to_string(strategy), graph_mode ? " graph" : " stream"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, CudaNetworks, ::testing::ValuesIn(stagecraft::testing::network_cases()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// f32 runs with FMA math unless TF32 is asked for (the fingerprint says which, so profiles of the
// two never mix); TF32 computes within its own precision (10 mantissa bits) of the CPU, and the
// strict backend within kF32Tolerance, which TF32 would not meet on a deep network.
TEST(CudaBackend, Tf32IsOnlyOnWhenAskedAndCloseWithinItsPrecision) {
  SKIP_WITHOUT_GPU();
  EXPECT_NE(gpu().device().device_fingerprint().find("fp32strict"), std::string::npos)
      << gpu().device().device_fingerprint();
  BackendConfig config;
  config.tf32 = true;
  config.cache_dir = (std::filesystem::temp_directory_path() / "stagecraft_gpu_tf32").string();
  const std::unique_ptr<Backend> tf32 = make_backend("cuda", config);
  EXPECT_NE(tf32->device().device_fingerprint().find("tf32"), std::string::npos) << tf32->device().device_fingerprint();
  EXPECT_NE(tf32->device().device_fingerprint(), gpu().device().device_fingerprint());
  const auto [m, s, want7, want8] = cpu_baseline(stagecraft::testing::network("inception_v3", 139));
  expect_both_runs_close(run_twice(*tf32, m, s, graph::Layout::kNCHW), want7, want8, kTf32Tolerance, "tf32");
  expect_both_runs_close(run_twice(gpu(), m, s, graph::Layout::kNCHW), want7, want8, kF32Tolerance, "f32 strict");
}

TEST(CudaBackend, HalfPrecisionDefaultsToNhwcAndIsCloseToTheCpu) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(gpu().preferred_layout(graph::DataType::kF16), graph::Layout::kNHWC);
  EXPECT_EQ(gpu().preferred_layout(graph::DataType::kF32), graph::Layout::kNCHW);
  for (const char* name : {"squeezenet1_1", "googlenet", "resnet50"}) {
    const Model m = stagecraft::testing::network(name, 64);
    const Schedule seq = stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential);
    const auto want7 = run_cpu(m, seq, graph::Layout::kNCHW, 7), want8 = run_cpu(m, seq, graph::Layout::kNCHW, 8);
    const Model half{graph::with_dtype(m.graph, graph::DataType::kF16), m.weights};
    const RunResult r = run_twice(gpu(), half, stagecraft::testing::analytic_schedule(half.graph, Strategy::kDp),
                                  graph::Layout::kNHWC);
    EXPECT_TRUE(r.captured) << name;
    expect_both_runs_close(r, want7, want8, kF16Tolerance, name);
  }
}

// A convolution with a bias and a ReLU (or none) runs cuDNN's fused call with an algorithm timed on
// that call, or says that cuDNN refused it and runs plain + own epilogue; either way it computes
// what the CPU computes. (cuDNN's documentation allows only IMPLICIT_PRECOMP_GEMM with an
// identity activation; cuDNN 9.19 on an H200 ran and timed IMPLICIT_GEMM too, so the values are
// what is checked, not the algorithm.)
TEST(CudaBackend, FusedConvolutionsAreTimedOnTheFusedCall) {
  SKIP_WITHOUT_GPU();
  for (graph::DataType dtype : {graph::DataType::kF32, graph::DataType::kF16}) {
    for (graph::Activation act : {graph::Activation::kRelu, graph::Activation::kNone}) {
      graph::Conv2dAttrs a;
      a.in_channels = 16;
      a.out_channels = 32;
      a.kernel = graph::Hw::square(3);
      a.padding = graph::Pads{1, 1, 1, 1};
      a.bias = true;
      a.activation = act;
      graph::OpWeights w;
      for (int i = 0; i < 32 * 16 * 9; ++i) w.weight.push_back(static_cast<float>((i * 37) % 17 - 8) / 40.0f);
      for (int i = 0; i < 32; ++i) w.bias.push_back(static_cast<float>(i % 5) - 2.0f);
      KernelSpec spec;
      spec.kind = graph::OpKind::kConv2d;
      spec.attrs = a;
      spec.weights = &w;
      spec.name = "fused";
      graph::TensorDesc x = graph::make_desc(graph::Shape{2, 16, 12, 12}, dtype);
      graph::TensorDesc y = graph::make_desc(graph::Shape{2, 32, 12, 12}, dtype);
      x.layout = y.layout = graph::Layout::kNHWC;
      spec.srcs = {x};
      spec.dsts = {y};
      const std::string impl = gpu().create_kernel(spec)->implementation();
      const bool fused = impl.find("fused conv+bias+act") != std::string::npos;
      EXPECT_TRUE(fused || impl.find("fused call refused") != std::string::npos) << impl;
      if (dtype != graph::DataType::kF32) continue;
      std::vector<float> input(2 * 16 * 12 * 12);
      for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(static_cast<int>(i * 13 % 23) - 11) / 11.0f;
      const std::vector<float> got = run_gpu_kernel(spec, {input});
      const std::vector<float> want = stagecraft::testing::run_f32_kernel(cpu(), spec, {input});
      EXPECT_LT(stagecraft::testing::max_relative_error(got, want), 1e-5)
          << impl << " (activation " << graph::to_string(act) << ")";
    }
  }
  // The values: every_op_graph's first convolution has a bias (and a batch norm after it); the
  // network tests cover fused ReLU convolutions against the CPU.
}

TEST(CudaBackend, ConvolutionAlgorithmsAreCachedPerDevice) {
  SKIP_WITHOUT_GPU();
  const auto dir = std::filesystem::temp_directory_path() / "stagecraft_gpu_algos";
  std::filesystem::remove_all(dir);
  const Model m = stagecraft::testing::network("squeezenet1_1", 64);
  const Schedule s = stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential);
  const auto count = [](const ExecutionPlan& plan, const char* mark) {
    size_t n = 0;
    for (const auto& k : plan.kernels()) n += k.kernel->implementation().find(mark) != std::string::npos;
    return n;
  };
  const size_t convs = graph::count_ops(m.graph, graph::OpKind::kConv2d);
  BackendConfig config;
  config.cache_dir = dir.string();
  {  // A fresh cache: every convolution is timed, or reuses a choice made earlier in this process.
    auto backend = make_backend("cuda", config);
    ExecutionPlan plan(m.graph, s, m.weights, *backend);
    EXPECT_EQ(count(plan, "(cached)"), 0u);
    EXPECT_EQ(count(plan, "(timed") + count(plan, "(chosen earlier)"), convs);
    EXPECT_GT(count(plan, "(timed"), 0u);
  }
  {  // The same device again: every convolution comes from the file.
    auto backend = make_backend("cuda", config);
    ExecutionPlan plan(m.graph, s, m.weights, *backend);
    EXPECT_EQ(count(plan, "(cached)"), convs);
  }
  // Another device fingerprint (TF32 allowed) misses, in memory and on disk.
  config.tf32 = true;
  auto backend = make_backend("cuda", config);
  ExecutionPlan plan(m.graph, s, m.weights, *backend);
  EXPECT_EQ(count(plan, "(cached)"), 0u);
}

TEST(CudaBackend, TransfersAreCompleteWhenTheyReturn) {
  SKIP_WITHOUT_GPU();
  // Larger than the pinned staging buffer (32 MiB): copied in parts.
  const size_t n = (size_t{40} << 20) / sizeof(float);
  std::vector<float> host(n), back(n, -1.0f);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 9973);
  auto buffer = gpu().allocate(n * sizeof(float));
  gpu().upload(buffer->data(), host.data(), n * sizeof(float));
  gpu().download(back.data(), buffer->data(), n * sizeof(float));
  EXPECT_EQ(back, host);
  // A new buffer reads zero on the executor's streams' side too.
  auto fresh = gpu().allocate(1 << 20);
  std::vector<uint8_t> bytes(1 << 20, 0xff);
  gpu().download(bytes.data(), fresh->data(), bytes.size());
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0), static_cast<long>(bytes.size()));
}

// A layout the backend has no kernels in (nChw16c is the CPU's) moves each op to one it has, and
// the plan reports each move, naming the layout asked for; the values are the CPU's.
TEST(CudaBackend, UnsupportedLayoutsFallBackAndAreReported) {
  SKIP_WITHOUT_GPU();
  const Model m = stagecraft::testing::network("squeezenet1_1", 64);
  const Schedule s = stagecraft::testing::analytic_schedule(m.graph, Strategy::kSequential);
  PlanOptions options;
  options.layouts = graph::LayoutAssignment::uniform(graph::Layout::kNChw16c);
  ExecutionPlan plan(m.graph, s, m.weights, gpu(), options);
  ASSERT_FALSE(plan.fallbacks().empty());
  for (const LayoutFallback& f : plan.fallbacks()) {
    EXPECT_EQ(f.wanted, graph::Layout::kNChw16c) << f.op;
    ASSERT_TRUE(f.used.has_value()) << f.op << ": ran by a reference kernel: " << f.reason;
    EXPECT_NE(*f.used, graph::Layout::kNChw16c) << f.op;
  }
  Executor executor(plan);
  expect_close(executor.run(stagecraft::testing::inputs_of(m.graph, 7)), run_cpu(m, s, graph::Layout::kNCHW, 7),
               kF32Tolerance, "nChw16c asked of the GPU");
}

// int8: the CUDA backend's quantised kernels (cuDNN INT8_EXT_CONFIG convolutions, own requantising
// epilogue, conversions, pooling and copies on 8-bit tensors) against the CPU backend's, on the
// same quantised graph, with new inputs after a capture.
class CudaInt8Networks : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaInt8Networks, QuantisedScheduleMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::string name = GetParam();
  // Prepared as the int8 sources are (session/source.cpp): residual additions stay ops, since
  // int8 convolutions take no fused residual.
  const Model f32 = stagecraft::testing::network(name, name == std::string("inception_v3") ? 139 : 64, 1,
                                                 {.fuse_residual_adds = false});
  quant::CalibrationOptions options;
  options.samples = 2;
  graph::QuantizeReport report;
  const graph::Graph q =
      graph::quantize(f32.graph, quant::calibrate(f32.graph, f32.weights, cpu(), options), &report);
  const Model m{q, graph::quantised_weights(f32.graph, f32.weights, report)};
  for (Strategy strategy : {Strategy::kSequential, Strategy::kDp}) {
    const Schedule s = stagecraft::testing::analytic_schedule(q, strategy);
    const auto want7 = run_cpu(m, s, graph::Layout::kNHWC, 7), want8 = run_cpu(m, s, graph::Layout::kNHWC, 8);
    for (bool graph_mode : {true, false}) {
      const RunResult r = run_twice(gpu(), m, s, graph::Layout::kNHWC, graph_mode);
      expect_both_runs_close(r, want7, want8, kInt8Tolerance,
                             cat(name, " ", scheduler::to_string(strategy), graph_mode ? " graph" : " stream"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, CudaInt8Networks, ::testing::Values("squeezenet1_1", "inception_v3", "resnet50"));

// One int8 convolution per case against the CPU: channel counts that are not multiples of 4
// (padded for cuDNN), u8 (halved) and i8 inputs, 8-bit and f32 outputs, bias and ReLU6.
TEST(CudaBackend, Int8ConvolutionsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t cin, cout;
    graph::DataType src, dst;
  };
  for (const Case& c : {Case{3, 6, graph::DataType::kU8, graph::DataType::kU8},
                        Case{5, 8, graph::DataType::kI8, graph::DataType::kU8},
                        Case{8, 10, graph::DataType::kU8, graph::DataType::kF32}}) {
    const graph::Conv2dAttrs a = stagecraft::testing::int8_test_conv(c.cin, c.cout);
    graph::OpWeights w;
    for (int64_t i = 0; i < c.cout * c.cin * 9; ++i) w.weight.push_back(static_cast<float>((i * 29) % 23 - 11) / 60.0f);
    for (int64_t i = 0; i < c.cout; ++i) w.bias.push_back(static_cast<float>(i % 3) * 0.1f);
    KernelSpec spec;
    spec.kind = graph::OpKind::kConv2d;
    spec.attrs = a;
    spec.weights = &w;
    spec.name = "int8 conv";
    graph::TensorDesc x = graph::make_desc(graph::Shape{2, c.cin, 9, 9}, c.src);
    graph::TensorDesc y = graph::make_desc(graph::Shape{2, c.cout, 5, 5}, c.dst);
    x.layout = y.layout = graph::Layout::kNHWC;
    x.scale = 0.02f;
    if (graph::is_int8(c.dst)) y.scale = 0.03f;
    spec.srcs = {x};
    spec.dsts = {y};
    const auto run = [&](Backend& b) {
      auto kernel = b.create_kernel(spec);
      auto xb = b.allocate(static_cast<size_t>(x.bytes())), yb = b.allocate(static_cast<size_t>(y.bytes()));
      auto ws = b.allocate(std::max<size_t>(1, kernel->workspace_bytes()));
      std::vector<uint8_t> input(static_cast<size_t>(x.bytes()));
      // Below 128: oneDNN's u8 × s8 kernels on CPUs without VNNI sum pairs into saturating 16 bits.
      for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>((i * 53) % 127);
      b.upload(xb->data(), input.data(), input.size());
      kernel->bind({{xb->data(), x}}, {{yb->data(), y}}, ws->data());
      auto stream = b.create_stream();
      kernel->launch(*stream);
      stream->synchronize();
      std::vector<uint8_t> out(static_cast<size_t>(y.bytes()));
      b.download(out.data(), yb->data(), out.size());
      return std::make_pair(out, kernel->implementation());
    };
    const auto [got, impl] = run(gpu());
    const auto [want, cpu_impl] = run(cpu());
    EXPECT_NE(impl.find("INT8_EXT_CONFIG"), std::string::npos) << impl;
    const int64_t n = y.shape.numel();
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      float g = 0, e = 0;
      if (c.dst == graph::DataType::kF32) {
        g = reinterpret_cast<const float*>(got.data())[i];
        e = reinterpret_cast<const float*>(want.data())[i];
      } else {
        g = got[static_cast<size_t>(i)];
        e = want[static_cast<size_t>(i)];
      }
      worst = stagecraft::testing::worst_of(worst, static_cast<double>(std::fabs(g - e)) / (graph::is_int8(c.dst) ? 1.0 : 0.03));
    }
    // In output steps: u8 inputs are halved for cuDNN (one bit less), i8 inputs are exact.
    EXPECT_LE(worst, c.src == graph::DataType::kU8 ? 4.0 : 1.0) << c.cin << "->" << c.cout << " " << impl;
  }
}

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
  const std::string grouped_message = gpu().supports(spec).support.message;
  EXPECT_NE(grouped_message.find("grouped"), std::string::npos) << grouped_message;
  a.groups = 1;
  w.weight.assign(64, 1.0f);
  spec.attrs = a;
  spec.srcs[0].layout = spec.dsts[0].layout = graph::Layout::kNCHW;
  const std::string nhwc_message = gpu().supports(spec).support.message;
  EXPECT_NE(nhwc_message.find("nhwc"), std::string::npos) << nhwc_message;
  EXPECT_EQ(gpu().preferred_layout(graph::DataType::kU8), graph::Layout::kNHWC);
}

// A process that exits with a backend, a plan and a captured executor still alive in static
// storage exits cleanly: the backend's exit hook releases graphs, handles and streams before the
// CUDA libraries tear themselves down. The test runs this program again as the child.
TEST(CudaBackend, ExitWithALiveBackendIsClean) {
  if (std::getenv(kExitChildVariable)) {  // the child
    static std::unique_ptr<Backend> backend = [] {
      BackendConfig config;
      config.cache_dir = (std::filesystem::temp_directory_path() / "stagecraft_gpu_exit").string();
      return make_backend("cuda", config);
    }();
    static const Model m = stagecraft::testing::network("squeezenet1_1", 64);
    static ExecutionPlan plan(m.graph, stagecraft::testing::analytic_schedule(m.graph, Strategy::kGreedy), m.weights,
                              *backend);
    static Executor executor(plan);
    executor.run(stagecraft::testing::inputs_of(m.graph));
    ASSERT_TRUE(executor.captured());
    std::printf("child: captured run done\n");
    return;  // exit with everything alive
  }
  SKIP_WITHOUT_GPU();
  // The child runs this one test whatever shard of the suite the parent is (GoogleTest's shard
  // variables would give it none).
  const std::string command = cat("env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX ", kExitChildVariable, "=1 /proc/",
                                  getpid(), "/exe --gtest_filter=CudaBackend.ExitWithALiveBackendIsClean 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe)) output += line;
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << ":\n" << output;
  EXPECT_NE(output.find("child: captured run done"), std::string::npos) << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
}

}  // namespace
}  // namespace stagecraft::executor
