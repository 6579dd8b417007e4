// Quantised residual additions fused into 8-bit convolutions (graph::fuse_residual_adds with
// `quantised`; the CPU's sum post-op): the fused block computes what the unfused 8-bit block does
// (one rounding fewer) and tracks f32, its kernels name the post-op, and a residual the kernel
// cannot take is refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/strings.h"
#include "executor/backend.h"
#include "executor/executor.h"
#include "graph/passes.h"
#include "graph/quantize.h"
#include "graph/weights.h"
#include "networks/builder.h"
#include "quant/calibration.h"
#include "support/compare.h"
#include "support/kernels.h"
#include "support/models.h"

namespace stagecraft::executor {
namespace {

using stagecraft::testing::Model;

constexpr auto& cpu = stagecraft::testing::cpu_backend;

std::vector<HostTensor> run_sequential(const graph::Graph& g, const graph::WeightStore& w,
                                       const std::vector<HostTensor>& inputs, std::vector<std::string>* impls = nullptr) {
  ExecutionPlan plan(g, scheduler::sequential_schedule(g), w, cpu());
  if (impls) {
    for (const auto& k : plan.kernels()) impls->push_back(k.kernel->implementation());
  }
  Executor executor(plan);
  return executor.run(inputs);
}

// Two ResNet blocks (the first with a 1x1 projection shortcut, signed; the second with the
// block's input, unsigned), then a head: f32, unfused int8 and fused int8.
struct Block {
  Model f32;
  graph::Graph unfused, fused;
  graph::WeightStore weights;  // of the quantised graphs
};

Block resnet_blocks() {
  networks::NetBuilder b("blocks", 1, 16, 12, 12);
  const graph::ValueId x = b.relu(b.input(), "x");
  const auto body = [&](graph::ValueId in, const std::string& n) {
    const graph::ValueId h = b.relu(b.conv(in, networks::square_conv(16, 3, 1, 1, true), n + "a"), n + "ra");
    return b.conv(h, networks::square_conv(16, 3, 1, 1, true), n + "b");
  };
  const graph::ValueId shortcut = b.conv(x, networks::square_conv(16, 1, 1, 0, false), "proj");
  const graph::ValueId y1 = b.relu(b.add({body(x, "one"), shortcut}, "sum1"), "out1");
  const graph::ValueId y2 = b.relu(b.add({body(y1, "two"), y1}, "sum2"), "out2");
  const graph::ValueId head = b.conv(y2, networks::square_conv(8, 1, 1, 0, true), "head");
  Block blk{stagecraft::testing::model_of(std::move(b).finish({head}), 3, {.fuse_residual_adds = false}), {}, {}, {}};
  quant::CalibrationOptions options;
  options.samples = 4;
  graph::QuantizeReport report;
  blk.unfused = graph::quantize(blk.f32.graph, quant::calibrate(blk.f32.graph, blk.f32.weights, cpu(), options), &report);
  blk.weights = graph::quantised_weights(blk.f32.graph, blk.f32.weights, report);
  blk.fused = graph::fuse_residual_adds(blk.unfused, nullptr, /*quantised=*/true);
  return blk;
}

TEST(QuantisedResiduals, FusedBlocksComputeWhatTheAdditionsDid) {
  const Block blk = resnet_blocks();
  size_t adds = 0, residual_convs = 0;
  for (const graph::Op& op : blk.fused.ops()) {
    adds += op.kind == graph::OpKind::kAdd;
    residual_convs += op.kind == graph::OpKind::kConv2d && op.attrs_as<graph::Conv2dAttrs>().residual;
  }
  EXPECT_EQ(adds, 0u);
  EXPECT_EQ(residual_convs, 2u);
  const auto inputs = stagecraft::testing::inputs_of(blk.f32.graph);
  const auto want = run_sequential(blk.f32.graph, blk.f32.weights, inputs);
  const auto unfused = run_sequential(blk.unfused, blk.weights, inputs);
  std::vector<std::string> impls;
  const auto fused = run_sequential(blk.fused, blk.weights, inputs, &impls);
  size_t sums = 0;
  for (const auto& i : impls) sums += i.find("residual sum post-op") != std::string::npos;
  EXPECT_EQ(sums, 2u) << "the fused convolutions run on oneDNN's sum post-op";
  // The head's output step: its 8-bit input's scale times its weights is below what a block
  // output of 8 bits can resolve; compare with f32 relative to the largest output.
  double peak = 0;
  for (float v : want[0].data) peak = std::max(peak, static_cast<double>(std::fabs(v)));
  const double err_unfused = stagecraft::testing::max_abs_error(unfused[0].data, want[0].data) / peak;
  const double err_fused = stagecraft::testing::max_abs_error(fused[0].data, want[0].data) / peak;
  const double apart = stagecraft::testing::max_abs_error(fused[0].data, unfused[0].data) / peak;
  std::printf("against f32: unfused %.4f, fused %.4f; fused against unfused %.4f (of the largest output)\n",
              err_unfused, err_fused, apart);
  EXPECT_LT(err_fused, 0.05);
  EXPECT_LT(err_fused, err_unfused * 1.25 + 0.005) << "one rounding fewer should not track f32 worse";
  EXPECT_LT(apart, 0.05);
}

TEST(QuantisedResiduals, AResidualOfAnotherShapeOrTypeIsRefusedWithTheReason) {
  const Block blk = resnet_blocks();
  const graph::Op& conv = *std::find_if(blk.fused.ops().begin(), blk.fused.ops().end(), [](const graph::Op& op) {
    return op.kind == graph::OpKind::kConv2d && op.attrs_as<graph::Conv2dAttrs>().residual;
  });
  std::vector<graph::TensorDesc> srcs, dsts;
  for (graph::ValueId v : conv.inputs) srcs.push_back(blk.fused.value(v).desc);
  for (graph::ValueId v : conv.outputs) dsts.push_back(blk.fused.value(v).desc);
  for (auto& d : srcs) d.layout = graph::Layout::kNHWC;
  for (auto& d : dsts) d.layout = graph::Layout::kNHWC;
  KernelSpec spec = stagecraft::testing::kernel_spec(graph::OpKind::kConv2d, conv.attrs, srcs, dsts,
                                                     blk.weights.find(conv.name));
  ASSERT_TRUE(cpu().supports(spec).is_native()) << cpu().supports(spec).support.message;
  KernelSpec f32_residual = spec;  // the int8 contract's check answers first
  f32_residual.srcs[1].dtype = graph::DataType::kF32;
  const Support f32 = cpu().supports(f32_residual).support;
  EXPECT_EQ(f32.reason, SupportReason::kQuantisation);
  EXPECT_NE(f32.message.find("8-bit inputs only"), std::string::npos) << f32.message;
  KernelSpec nchw_residual = spec;  // copied into the destination: its layout must match
  nchw_residual.srcs[1].layout = graph::Layout::kNCHW;
  const Support nchw = cpu().supports(nchw_residual).support;
  EXPECT_FALSE(nchw.is_native());
  EXPECT_NE(nchw.message.find("takes its residual as a sum post-op"), std::string::npos) << nchw.message;
  EXPECT_NE(nchw.message.find("differs from its output"), std::string::npos) << nchw.message;
}

}  // namespace
}  // namespace stagecraft::executor
