// NASNet-A Mobile and Large: op counts derived from the cell structure of the reference
// (Cadene's pretrained-models.pytorch), MACs and parameters within 1% of the published figures,
// feature-map shapes, reduced input sizes with batch > 1, and the input sizes the pad-and-crop
// cells cannot take.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "graph/graph.h"
#include "networks/registry.h"

namespace stagecraft::networks {
namespace {

using graph::Conv2dAttrs;
using graph::OpKind;

// Convs per cell, counted from the reference modules. A BranchSeparables is two separable convs,
// each a depthwise and a pointwise conv.
constexpr size_t kConvsPerBranch = 4;
constexpr size_t kDepthwisePerBranch = 2;
constexpr size_t kBranchesPerCell = 5;
constexpr size_t kNormalCellConvs = 2 + kBranchesPerCell * kConvsPerBranch;     // two 1x1 + 5
constexpr size_t kFirstCellConvs = 1 + 2 + kBranchesPerCell * kConvsPerBranch;  // 1x1 + paths
constexpr size_t kStem0Convs = 1 + kBranchesPerCell * kConvsPerBranch;
constexpr size_t kStem1Convs = 1 + 2 + kBranchesPerCell * kConvsPerBranch;
constexpr size_t kReductionCellConvs = 2 + kBranchesPerCell * kConvsPerBranch;
// Pad ops of a pad-and-crop reduction: pad + crop around 5 separables, 2 MaxPoolPad, 1 AvgPoolPad.
constexpr size_t kShiftedCellPads = 2 * (kBranchesPerCell + 2 + 1);

struct Variant {
  const char* name;
  int cells_per_stack;
  int shifted_reduction_cells;  // pad-and-crop cells (ReductionCell0 always; Mobile also 2 more)
  double published_gmacs;
  double published_mparams;
  int64_t default_size;
  int64_t final_map;       // spatial size of the last cell's output at the default size
  int64_t final_channels;  // penultimate_filters
};

// Published: Zoph et al. 2018, Table 2 and 3 (NASNet-A 6@4032: 23.8 G mult-adds, 88.9 M params;
// NASNet-A 4@1056: 564 M mult-adds, 5.3 M params).
constexpr Variant kVariants[] = {
    {"nasnet_a_large", 6, 1, 23.8, 88.9, 331, 11, 4032},
    {"nasnet_a_mobile", 4, 3, 0.564, 5.3, 224, 7, 1056},
};

constexpr double kFigureTolerance = 0.01;  // measured/published within 1%
constexpr int kNumStacks = 3;
constexpr int kNumReductionCells = 2;

size_t expected_convs(const Variant& v) {
  const size_t normal_cells = kNumStacks * (v.cells_per_stack - 1);
  return 1 + kStem0Convs + kStem1Convs + kNumStacks * kFirstCellConvs +
         normal_cells * kNormalCellConvs + kNumReductionCells * kReductionCellConvs;
}

size_t expected_cells(const Variant& v) {
  return 2 + kNumStacks * v.cells_per_stack + kNumReductionCells;  // stems, stacks, reductions
}

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class Nasnet : public ::testing::TestWithParam<Variant> {};

TEST_P(Nasnet, ConvCountsFollowTheCellStructure) {
  const Variant& v = GetParam();
  const graph::Graph g = build_network(v.name);
  EXPECT_EQ(graph::count_ops(g, OpKind::kConv2d), expected_convs(v));
  size_t depthwise = 0;
  for (const graph::Op& op : g.ops()) {
    if (op.kind != OpKind::kConv2d) continue;
    const auto& a = op.attrs_as<Conv2dAttrs>();
    EXPECT_FALSE(a.bias) << op.name;
    if (a.groups == 1) continue;
    ++depthwise;
    EXPECT_EQ(a.groups, a.in_channels) << op.name;
    EXPECT_EQ(a.out_channels, a.in_channels) << op.name;
    EXPECT_EQ(a.padding.left, a.kernel.w / 2) << op.name;
  }
  EXPECT_EQ(depthwise, expected_cells(v) * kBranchesPerCell * kDepthwisePerBranch);
}

TEST_P(Nasnet, CellCountsFollowTheCellStructure) {
  const Variant& v = GetParam();
  const graph::Graph g = build_network(v.name);
  constexpr size_t kFactorizedReductions = 1 + kNumStacks;  // CellStem1 and every FirstCell
  EXPECT_EQ(graph::count_ops(g, OpKind::kAdd), expected_cells(v) * kBranchesPerCell);
  EXPECT_EQ(graph::count_ops(g, OpKind::kConcat), expected_cells(v) + kFactorizedReductions);
  EXPECT_EQ(graph::count_ops(g, OpKind::kPad),
            kFactorizedReductions + v.shifted_reduction_cells * kShiftedCellPads);
  EXPECT_EQ(graph::count_ops(g, OpKind::kMaxPool), 2u * (2 + kNumReductionCells));
  EXPECT_EQ(graph::count_ops(g, OpKind::kLinear), 1u);
  for (const graph::Op& op : g.ops()) {
    if (op.kind == OpKind::kBatchNorm) {
      EXPECT_DOUBLE_EQ(op.attrs_as<graph::BatchNormAttrs>().eps, 1e-3) << op.name;
    }
    if (op.kind == OpKind::kAvgPool) {
      EXPECT_FALSE(op.attrs_as<graph::AvgPoolAttrs>().count_include_pad) << op.name;
    }
  }
  // The cells the reference names, Mobile skipping cell_4, cell_5, cell_10 and cell_11.
  for (int stack = 0; stack < kNumStacks; ++stack) {
    for (int i = 0; i < v.cells_per_stack; ++i) {
      const std::string cell = "cell_" + std::to_string(stack * 6 + i);
      EXPECT_TRUE(g.find_op(cell + "/cell_output").has_value()) << cell;
    }
  }
  EXPECT_TRUE(g.find_op("reduction_cell_1/cell_output").has_value());
}

TEST_P(Nasnet, MacsWithinOnePercentOfPublished) {
  const Variant& v = GetParam();
  const double gmacs = static_cast<double>(graph::total_macs(build_network(v.name))) / 1e9;
  EXPECT_NEAR(gmacs / v.published_gmacs, 1.0, kFigureTolerance) << v.name << ": " << gmacs;
}

TEST_P(Nasnet, ParamsWithinOnePercentOfPublished) {
  const Variant& v = GetParam();
  const double mparams = static_cast<double>(graph::total_params(build_network(v.name))) / 1e6;
  EXPECT_NEAR(mparams / v.published_mparams, 1.0, kFigureTolerance) << v.name << ": " << mparams;
}

TEST_P(Nasnet, FeatureMapsAndOutputAtDefaultSize) {
  const Variant& v = GetParam();
  const graph::Graph g = build_network(v.name);
  const graph::Op& relu = g.op(*g.find_op("logits/relu"));
  EXPECT_EQ(g.value(relu.inputs[0]).desc.shape,
            (graph::Shape{1, v.final_channels, v.final_map, v.final_map}));
  EXPECT_EQ(g.value(g.inputs()[0]).desc.shape,
            (graph::Shape{1, 3, v.default_size, v.default_size}));
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).desc.shape, (graph::Shape{1, 1000}));
}

TEST_P(Nasnet, BuildsAtReducedSizesWithBatch) {
  const Variant& v = GetParam();
  for (int64_t size : {32, 64, 96}) {
    NetworkOptions options;
    options.batch = 3;
    options.input_size = size;
    const graph::Graph g = build_network(v.name, options);
    ASSERT_EQ(g.outputs().size(), 1u);
    EXPECT_EQ(g.value(g.outputs()[0]).desc.shape, (graph::Shape{3, 1000})) << size;
    EXPECT_EQ(graph::count_ops(g, OpKind::kConv2d), expected_convs(v)) << size;
    // MACs scale with the batch; the smaller input costs less than the default.
    EXPECT_LT(graph::total_macs(g), 3 * graph::total_macs(build_network(v.name)));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, Nasnet, ::testing::ValuesIn(kVariants),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(NasnetInputSize, RejectsSizesThePadAndCropCellsCannotTake) {
  // Mobile: 100 -> conv0 49 -> 25 -> cell_stem_1 would halve 25 by pad-and-crop (12) while
  // cell_0's factorized reduction of the same 25x25 map gives 13.
  NetworkOptions options;
  options.input_size = 100;
  EXPECT_THROW(build_network("nasnet_a_mobile", options), NetworkError);
  // Large: 40 -> conv0 19 -> 10 -> 5 at reduction_cell_0.
  options.input_size = 40;
  EXPECT_THROW(build_network("nasnet_a_large", options), NetworkError);
  options.input_size = 224;
  EXPECT_NO_THROW(build_network("nasnet_a_large", options));
}

TEST(NasnetInputSize, ShiftedBranchesPadThenCrop) {
  const graph::Graph g = build_network("nasnet_a_mobile");
  // reduction_cell_0/comb_iter_0_left: relu -> pad (1,0,1,0) -> 5x5/2 depthwise -> pointwise ->
  // crop [1:, 1:]; 28x28 in, 14x14 out.
  const graph::Op& pad = g.op(*g.find_op("reduction_cell_0/comb_iter_0_left/padding"));
  EXPECT_EQ(pad.attrs_as<graph::PadAttrs>().pads, (graph::Pads{1, 1, 0, 0}));
  EXPECT_EQ(g.value(pad.outputs[0]).desc.shape[2], 29);
  const graph::Op& crop = g.op(*g.find_op("reduction_cell_0/comb_iter_0_left/crop"));
  EXPECT_EQ(crop.attrs_as<graph::PadAttrs>().pads, (graph::Pads{-1, -1, 0, 0}));
  EXPECT_EQ(g.value(crop.outputs[0]).desc.shape[2], 14);
  // The factorized reduction's second path shifts by one pixel without changing the size.
  const graph::Op& shift = g.op(*g.find_op("cell_0/path_2/pad"));
  EXPECT_EQ(shift.attrs_as<graph::PadAttrs>().pads, (graph::Pads{-1, -1, 1, 1}));
}

}  // namespace
}  // namespace stagecraft::networks
