// bf16 on the CPU executor: every network of the backend suite in bf16 against its f32 run (the
// rounding of an 8-bit mantissa, no more), every schedule against the sequential bf16 run, the
// kernels oneDNN chose being bf16 ones, and a clear refusal on a CPU without native bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/executor.h"
#include "graph/bf16.h"
#include "support/compare.h"
#include "support/messages.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using scheduler::Schedule;
using stagecraft::testing::inputs_of;
using stagecraft::testing::Model;
using stagecraft::testing::network;

constexpr auto& cpu = stagecraft::testing::cpu_backend;  // shared by the program

bool native_bf16() { return cpu().capabilities().computes(graph::DataType::kBF16); }

std::vector<HostTensor> run(const graph::Graph& g, const graph::WeightStore& w, const Schedule& s,
                            const std::vector<HostTensor>& inputs) {
  ExecutionPlan plan(g, s, w, cpu());
  Executor executor(plan);
  return executor.run(inputs);
}

// The error of `got` against `want` relative to the largest magnitude of `want` (NaN: never close).
double scaled_error(const HostTensor& got, const HostTensor& want) {
  double peak = 0;
  for (float x : want.data) peak = std::max(peak, static_cast<double>(std::fabs(x)));
  return stagecraft::testing::max_abs_error(got.data, want.data) / std::max(peak, 1e-30);
}

class Bf16Network : public ::testing::TestWithParam<stagecraft::testing::NetworkCase> {};

TEST_P(Bf16Network, AgreesWithF32AndEveryScheduleWithSequential) {
  if (!native_bf16()) {
    GTEST_SKIP() << "this CPU has no native bf16 (" << cpu().device().description()
                 << "): the refusal is checked by Bf16Cpu.RefusedInOneLineWithoutNativeBf16";
  }
  const auto& c = GetParam();
  const Model m = network(c.name, c.size, c.batch);
  graph::Bf16Report report;
  const graph::Graph h = graph::to_bf16(m.graph, &report);
  ASSERT_GT(report.bf16_ops, 0u) << c.name;
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, scheduler::sequential_schedule(m.graph), inputs);
  const Schedule sequential = scheduler::sequential_schedule(h);
  const auto got = run(h, m.weights, sequential, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // bf16 keeps 8 bits of mantissa (relative rounding 2^-9 per value); through a network's
    // layers the outputs stayed within 0.5-1.4% of the largest f32 output (AMD Zen 4).
    EXPECT_LE(scaled_error(got[i], want[i]), 0.03) << c.name << " output " << i;
  }
  // Every schedule computes what the sequential bf16 plan computes: exactly on AMD Zen 4
  // (AVX512_BF16 kernels), within one bf16 rounding (2^-8) of the largest output where the
  // accumulation order of kernels given other thread counts on concurrent streams differs. On
  // AMX (an Intel Xeon, 16 threads) schedules came out 0.5-1.3% of the largest output apart
  // (googlenet, resnet50, NASNet, RandWire, ViT): its kernels' blocking follows the thread count
  // and a merged convolution's channels, and a value rounded to the other side in one layer
  // carries to the outputs, as f32 against bf16 does (0.03 above). A wrong schedule is off by
  // far more than either bound.
  const bool amx = cpu().device().description().find("ISA avx512_core_amx") != std::string::npos;
  const double between_schedules = amx ? 0.02 : 0.004;
  for (scheduler::Strategy strategy : {scheduler::Strategy::kGreedy, scheduler::Strategy::kDp}) {
    Schedule s = stagecraft::testing::analytic_schedule(h, strategy);
    const auto other = run(h, m.weights, s, inputs);
    for (size_t i = 0; i < other.size(); ++i) {
      EXPECT_LE(scaled_error(other[i], got[i]), between_schedules)
          << c.name << " " << scheduler::to_string(strategy) << " output " << i;
      EXPECT_LE(scaled_error(other[i], want[i]), 0.03) << c.name << " " << scheduler::to_string(strategy)
                                                        << " output " << i << " against f32";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, Bf16Network, ::testing::ValuesIn(stagecraft::testing::network_cases()),
                         [](const ::testing::TestParamInfo<stagecraft::testing::NetworkCase>& c) {
                           return std::string(c.param.name);
                         });

// DenseNet's pre-activation blocks: batch norms that do not fold into a convolution, on
// concatenations, run in bf16 (they follow their input) and the result tracks f32.
TEST(Bf16Cpu, StandaloneBatchNormsRunInBf16AndTrackF32) {
  if (!native_bf16()) {
    GTEST_SKIP() << "this CPU has no native bf16 (" << cpu().device().description() << ")";
  }
  const Model m = stagecraft::testing::model_of(stagecraft::testing::dense_block_graph(1, 16, 8, 4));
  const graph::Graph h = graph::to_bf16(m.graph);
  size_t norms = 0;
  for (const graph::Op& op : h.ops()) {
    if (op.kind != graph::OpKind::kBatchNorm) continue;
    ++norms;
    EXPECT_EQ(h.value(op.inputs[0]).desc.dtype, graph::DataType::kBF16) << op.name;
  }
  ASSERT_GT(norms, 0u) << "the dense block has no standalone batch norm left to check";
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, scheduler::sequential_schedule(m.graph), inputs);
  const auto got = run(h, m.weights, scheduler::sequential_schedule(h), inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(scaled_error(got[i], want[i]), 0.03) << i;
}

// The plan's kernels of one op of `kind`, each checked to run a bf16 (or AMX) implementation.
size_t bf16_kernels_of(const ExecutionPlan& plan, const graph::Graph& h, graph::OpKind kind) {
  size_t n = 0;
  for (const PlannedKernel& k : plan.kernels()) {
    if (k.ops.size() != 1 || h.op(k.ops[0]).kind != kind) continue;
    ++n;
    const std::string impl = k.kernel->implementation();
    EXPECT_TRUE(impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos)
        << k.label << ": " << impl;
  }
  return n;
}

TEST(Bf16Cpu, ConvolutionsRunOnBf16Kernels) {
  if (!native_bf16()) {
    GTEST_SKIP() << "this CPU has no native bf16 (" << cpu().device().description() << ")";
  }
  const Model m = network("googlenet", 64, 1);
  const graph::Graph h = graph::to_bf16(m.graph);
  ExecutionPlan plan(h, scheduler::sequential_schedule(h), m.weights, cpu());
  EXPECT_GT(bf16_kernels_of(plan, h, graph::OpKind::kConv2d), 50u);
}

// A vision transformer's attention on bf16 kernels: both matmuls of every head and the linear
// classifier run oneDNN's bf16 kernels (vit_tiny projects with 1x1 convolutions; the head
// shuffles are bf16 reorders), and the result tracks f32.
TEST(Bf16Cpu, AttentionMatmulsRunOnBf16Kernels) {
  if (!native_bf16()) {
    GTEST_SKIP() << "this CPU has no native bf16 (" << cpu().device().description() << ")";
  }
  const Model m = network("vit_tiny", 64, 2);
  const graph::Graph h = graph::to_bf16(m.graph);
  ExecutionPlan plan(h, scheduler::sequential_schedule(h), m.weights, cpu());
  EXPECT_GE(bf16_kernels_of(plan, h, graph::OpKind::kMatMul), 2u);
  EXPECT_GE(bf16_kernels_of(plan, h, graph::OpKind::kLinear), 1u);
  const auto inputs = inputs_of(m.graph);
  const auto want = run(m.graph, m.weights, scheduler::sequential_schedule(m.graph), inputs);
  const auto got = run(h, m.weights, scheduler::sequential_schedule(h), inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(scaled_error(got[i], want[i]), 0.03) << i;
}

TEST(Bf16Cpu, RefusedInOneLineWithoutNativeBf16) {
  if (native_bf16()) {
    GTEST_SKIP() << "this CPU computes bf16 natively (" << cpu().device().description()
                 << "); the executor's capped-ISA shard (DNNL_MAX_CPU_ISA=AVX2) checks the refusal";
  }
  const Model m = network("squeezenet1_1", 64, 1);
  const graph::Graph h = graph::to_bf16(m.graph);
  const std::string what = stagecraft::testing::message_of<BackendError>(
      [&] { ExecutionPlan plan(h, scheduler::sequential_schedule(h), m.weights, cpu()); });
  stagecraft::testing::expect_mentions(what, {"no native bf16", "AVX512_BF16 or AMX"});
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

}  // namespace
}  // namespace stagecraft::executor
