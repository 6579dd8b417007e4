// NASNet-A (Zoph et al., "Learning Transferable Architectures for Scalable Image Recognition",
// CVPR 2018), layer for layer as Cadene's pretrained-models.pytorch builds it (nasnet.py for
// Large 6@4032, nasnet_mobile.py for Mobile 4@1056): a 3x3 stride-2 stem conv, two stem cells,
// three stacks of normal cells (the first of each a FirstCell with a factorized reduction of the
// previous-previous input) separated by two reduction cells, then ReLU, global average pooling and
// a 1000-way linear layer. Ops are named after the reference modules ("cell_7/comb_iter_1_left/
// separable_1/depthwise_conv2d").
//
// Input: batch and input size (validated by the registry; see check_input_size for the sizes the
// pad-and-crop cells need). Output: the raw graph, batch norms and ReLUs as separate ops.
// Complexity: O(number of ops): 955 ops (356 convs) for Mobile, 1,253 ops (488 convs) for Large.
//
// Measured with graph::total_macs / total_params (batch 1, 1000 classes) vs published (Zoph et
// al., Tables 2 and 3):
//   nasnet_a_large  331x331: 23.81 G MACs, 88.75 M params (paper: 23.8 G, 88.9 M)
//   nasnet_a_mobile 224x224: 568.2 M MACs, 5.29 M params (paper: 564 M, 5.3 M)
// The shifted branches' pointwise convs run at the padded size before the crop, as in the
// reference, which accounts for part of Mobile's +0.75%.
#include <string>
#include <vector>

#include "common/strings.h"
#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {

constexpr double kBnEps = 1e-3;        // every batch norm of the reference
constexpr int64_t kStemKernel = 3;     // conv0: 3x3, stride 2, no padding
constexpr int64_t kStemStride = 2;
constexpr int64_t kReductionStride = 2;
// Cell operations: 3x3 pools (padding 1) and 3x3, 5x5, 7x7 separable convs.
constexpr int64_t kPoolKernel = 3;
constexpr int64_t kPoolPadding = 1;
constexpr int64_t kSep3x3 = 3;
constexpr int64_t kSep5x5 = 5;
constexpr int64_t kSep7x7 = 7;
// The factorized reduction's paths: 1x1 average pooling at stride 2 then a 1x1 conv.
constexpr int64_t kPointwise = 1;
// The penultimate layer concatenates 6 branches of the last stack, whose width is 4x the first
// stack's: penultimate_filters / 24 is the first stack's width ("filters" in the reference).
constexpr int64_t kPenultimateDivisor = 24;
// Width grows by this factor at each reduction cell.
constexpr int64_t kStackGrowth = 2;
constexpr int kNumStacks = 3;
// The reference names cells as the 6-cell Large model does: stack s, cell i -> cell_{6s+i}
// (Mobile skips cell_4, cell_5, cell_10, cell_11).
constexpr int kReferenceCellStride = 6;
// ZeroPad2d((1, 0, 1, 0)) before a shifted stride-2 op, and the [1:, 1:] crop after it.
constexpr Pads kShiftPad{1, 1, 0, 0};
constexpr Pads kShiftCrop{-1, -1, 0, 0};
// The second path of a factorized reduction: ZeroPad2d((0, 1, 0, 1)) then the [1:, 1:] crop,
// as one pad op (shifts the input up-left by one pixel).
constexpr Pads kFactorizedShift{-1, -1, 1, 1};

// One NASNet-A variant.
struct NasnetConfig {
  int64_t stem_filters;         // channels of conv0
  int64_t penultimate_filters;  // channels of the last cell's output
  int cells_per_stack;          // normal cells per stack, the FirstCell included
  int64_t filters_multiplier;   // stem cell widths are filters / multiplier^2 and / multiplier
  bool shifted_stem_1;          // CellStem1 uses pad-and-crop ops (Mobile)
  bool shifted_reduction_1;     // ReductionCell1 uses pad-and-crop ops (Mobile)
};

constexpr int kLargeCellsPerStack = 6;
constexpr int kMobileCellsPerStack = 4;
constexpr NasnetConfig kLarge{96, 4032, kLargeCellsPerStack, 2, false, false};
constexpr NasnetConfig kMobile{32, 1056, kMobileCellsPerStack, 2, true, true};
static_assert(kLargeCellsPerStack <= kReferenceCellStride &&
              kMobileCellsPerStack <= kReferenceCellStride);

// How a stack of separable convolutions reaches its output width and handles stride 2.
enum class SeparableKind {
  kRowMajor,    // BranchSeparables: the first separable conv keeps the input width
  kStem,     // BranchSeparablesStem: the first separable conv already maps to the output width
  kShifted,  // BranchSeparablesReduction / name='specific': pad (1,0,1,0), conv, crop [1:, 1:]
};

// Builds one NASNet-A variant op by op.
class NasnetBuilder {
 public:
  NasnetBuilder(NetBuilder& b, const NasnetConfig& config) : b_(b), config_(config) {}

  graph::Graph build();

 private:
  // relu -> 1x1 conv -> bn (the conv_1x1 / conv_prev_1x1 sequences).
  ValueId relu_conv_bn(ValueId x, int64_t out, const std::string& name) {
    auto s = b_.scope(name);
    return b_.bn(b_.conv(b_.relu(x), square_conv(out, kPointwise)), kBnEps);
  }

  // SeparableConv2d: depthwise k x k conv (groups = channels) then a 1x1 pointwise conv.
  ValueId separable_conv(ValueId x, int64_t out, int64_t kernel, int64_t stride,
                         const std::string& name) {
    auto s = b_.scope(name);
    ConvSpec depthwise = square_conv(b_.channels(x), kernel, stride, kernel / 2);
    depthwise.groups = b_.channels(x);
    const ValueId y = b_.conv(x, depthwise, "depthwise_conv2d");
    return b_.conv(y, square_conv(out, kPointwise), "pointwise_conv2d");
  }

  // relu -> separable -> bn -> relu -> separable (stride 1) -> bn.
  ValueId separables(ValueId x, int64_t out, int64_t kernel, int64_t stride, SeparableKind kind,
                     const std::string& name) {
    auto s = b_.scope(name);
    const int64_t mid = kind == SeparableKind::kStem ? out : b_.channels(x);
    ValueId y = b_.relu(x);
    if (kind == SeparableKind::kShifted) y = b_.pad(y, kShiftPad, "padding");
    y = separable_conv(y, mid, kernel, stride, "separable_1");
    if (kind == SeparableKind::kShifted) y = b_.pad(y, kShiftCrop, "crop");
    y = b_.relu(b_.bn(y, kBnEps, "bn_sep_1"), "relu1");
    y = separable_conv(y, out, kernel, 1, "separable_2");
    return b_.bn(y, kBnEps, "bn_sep_2");
  }

  // 3x3 stride-2 max pooling; shifted: MaxPoolPad (zero pad (1,0,1,0), pool, crop [1:, 1:]).
  ValueId max_pool(ValueId x, bool shifted, const std::string& name) {
    auto s = b_.scope(name);
    if (!shifted) return b_.max_pool(x, kPoolKernel, kReductionStride, kPoolPadding, false, "pool");
    const ValueId y = b_.max_pool(b_.pad(x, kShiftPad), kPoolKernel, kReductionStride, kPoolPadding,
                                  false, "pool");
    return b_.pad(y, kShiftCrop, "crop");
  }

  // 3x3 average pooling without counting the padding; shifted: AvgPoolPad.
  ValueId avg_pool(ValueId x, int64_t stride, bool shifted, const std::string& name) {
    auto s = b_.scope(name);
    if (!shifted)
      return b_.avg_pool(x, kPoolKernel, stride, kPoolPadding, /*count_include_pad=*/false, false,
                         "pool");
    const ValueId y =
        b_.avg_pool(b_.pad(x, kShiftPad), kPoolKernel, stride, kPoolPadding, false, false, "pool");
    return b_.pad(y, kShiftCrop, "crop");
  }

  // relu -> two half-width paths at stride 2 (the second shifted by one pixel) -> concat -> bn.
  ValueId factorized_reduction(ValueId x, int64_t out) {
    const ValueId r = b_.relu(x);
    ValueId path_1;
    {
      auto s = b_.scope("path_1");
      path_1 = b_.avg_pool(r, kPointwise, kReductionStride, 0, false, false, "avgpool");
      path_1 = b_.conv(path_1, square_conv(out / 2, kPointwise));
    }
    ValueId path_2;
    {
      auto s = b_.scope("path_2");
      path_2 = b_.pad(r, kFactorizedShift);
      path_2 = b_.avg_pool(path_2, kPointwise, kReductionStride, 0, false, false, "avgpool");
      path_2 = b_.conv(path_2, square_conv(out / 2, kPointwise));
    }
    return b_.bn(b_.concat({path_1, path_2}), kBnEps, "final_path_bn");
  }

  // The five combinations of a reduction-type cell (CellStem0/1, ReductionCell0/1). `a` feeds
  // the pools and the 5x5 separables of comb 0; `b` feeds the other separables.
  ValueId reduction_body(ValueId a, ValueId b, int64_t out, SeparableKind a_kind,
                         SeparableKind b_kind, bool shifted) {
    const SeparableKind comb_4_kind = shifted ? SeparableKind::kShifted : SeparableKind::kRowMajor;
    const ValueId c0 =
        b_.add({separables(a, out, kSep5x5, kReductionStride, a_kind, "comb_iter_0_left"),
                separables(b, out, kSep7x7, kReductionStride, b_kind, "comb_iter_0_right")},
               "comb_iter_0");
    const ValueId c1 =
        b_.add({max_pool(a, shifted, "comb_iter_1_left"),
                separables(b, out, kSep7x7, kReductionStride, b_kind, "comb_iter_1_right")},
               "comb_iter_1");
    const ValueId c2 =
        b_.add({avg_pool(a, kReductionStride, shifted, "comb_iter_2_left"),
                separables(b, out, kSep5x5, kReductionStride, b_kind, "comb_iter_2_right")},
               "comb_iter_2");
    const ValueId c3 = b_.add({avg_pool(c0, 1, false, "comb_iter_3_right"), c1}, "comb_iter_3");
    const ValueId c4 = b_.add({separables(c0, out, kSep3x3, 1, comb_4_kind, "comb_iter_4_left"),
                               max_pool(a, shifted, "comb_iter_4_right")},
                              "comb_iter_4");
    return b_.concat({c1, c2, c3, c4}, "cell_output");
  }

  // The five combinations of a normal cell (NormalCell, FirstCell), concatenated after `left`.
  ValueId normal_body(ValueId left, ValueId right, int64_t out) {
    const SeparableKind plain = SeparableKind::kRowMajor;
    const ValueId c0 = b_.add({separables(right, out, kSep5x5, 1, plain, "comb_iter_0_left"),
                               separables(left, out, kSep3x3, 1, plain, "comb_iter_0_right")},
                              "comb_iter_0");
    const ValueId c1 = b_.add({separables(left, out, kSep5x5, 1, plain, "comb_iter_1_left"),
                               separables(left, out, kSep3x3, 1, plain, "comb_iter_1_right")},
                              "comb_iter_1");
    const ValueId c2 = b_.add({avg_pool(right, 1, false, "comb_iter_2_left"), left}, "comb_iter_2");
    const ValueId c3 = b_.add({avg_pool(left, 1, false, "comb_iter_3_left"),
                               avg_pool(left, 1, false, "comb_iter_3_right")},
                              "comb_iter_3");
    const ValueId c4 = b_.add(
        {separables(right, out, kSep3x3, 1, plain, "comb_iter_4_left"), right}, "comb_iter_4");
    return b_.concat({left, c0, c1, c2, c3, c4}, "cell_output");
  }

  ValueId cell_stem_0(ValueId x, int64_t out) {
    auto s = b_.scope("cell_stem_0");
    const ValueId x1 = relu_conv_bn(x, out, "conv_1x1");
    return reduction_body(x1, x, out, SeparableKind::kRowMajor, SeparableKind::kStem, false);
  }

  ValueId cell_stem_1(ValueId x_conv0, ValueId x_stem_0, int64_t out) {
    auto s = b_.scope("cell_stem_1");
    const ValueId left = relu_conv_bn(x_stem_0, out, "conv_1x1");
    const ValueId right = factorized_reduction(x_conv0, out);
    const SeparableKind kind =
        config_.shifted_stem_1 ? SeparableKind::kShifted : SeparableKind::kRowMajor;
    return reduction_body(left, right, out, kind, kind, config_.shifted_stem_1);
  }

  ValueId first_cell(ValueId x, ValueId x_prev, int64_t out, const std::string& name) {
    auto s = b_.scope(name);
    const ValueId left = factorized_reduction(x_prev, out);
    const ValueId right = relu_conv_bn(x, out, "conv_1x1");
    return normal_body(left, right, out);
  }

  ValueId normal_cell(ValueId x, ValueId x_prev, int64_t out, const std::string& name) {
    auto s = b_.scope(name);
    const ValueId left = relu_conv_bn(x_prev, out, "conv_prev_1x1");
    const ValueId right = relu_conv_bn(x, out, "conv_1x1");
    return normal_body(left, right, out);
  }

  ValueId reduction_cell(ValueId x, ValueId x_prev, int64_t out, bool shifted,
                         const std::string& name) {
    auto s = b_.scope(name);
    const ValueId left = relu_conv_bn(x_prev, out, "conv_prev_1x1");
    const ValueId right = relu_conv_bn(x, out, "conv_1x1");
    const SeparableKind kind = shifted ? SeparableKind::kShifted : SeparableKind::kRowMajor;
    return reduction_body(right, left, out, kind, kind, shifted);
  }

  NetBuilder& b_;
  const NasnetConfig& config_;
};

graph::Graph NasnetBuilder::build() {
  const int64_t filters = config_.penultimate_filters / kPenultimateDivisor;
  ValueId x_conv0;
  {
    auto s = b_.scope("conv0");
    x_conv0 = b_.bn(
        b_.conv(b_.input(), square_conv(config_.stem_filters, kStemKernel, kStemStride)), kBnEps);
  }
  const int64_t multiplier = config_.filters_multiplier;
  const ValueId x_stem_0 = cell_stem_0(x_conv0, filters / (multiplier * multiplier));
  const ValueId x_stem_1 = cell_stem_1(x_conv0, x_stem_0, filters / multiplier);

  // prev and x are the outputs of the last two cells, as the reference threads them.
  ValueId prev = x_stem_0;
  ValueId x = x_stem_1;
  int64_t width = filters;
  for (int stack = 0; stack < kNumStacks; ++stack) {
    if (stack > 0) {
      const bool shifted = stack == 1 || config_.shifted_reduction_1;
      const ValueId reduced =
          reduction_cell(x, prev, width * kStackGrowth, shifted, cat("reduction_cell_", stack - 1));
      // The FirstCell after a reduction reads the reduction's x_prev (the cell before the last
      // one), so prev stays.
      x = reduced;
      width *= kStackGrowth;
    }
    for (int i = 0; i < config_.cells_per_stack; ++i) {
      const std::string name = cat("cell_", stack * kReferenceCellStride + i);
      const ValueId next =
          i == 0 ? first_cell(x, prev, width, name) : normal_cell(x, prev, width, name);
      prev = x;
      x = next;
    }
  }

  ValueId logits;
  {
    auto s = b_.scope("logits");
    logits = b_.linear(b_.flatten(b_.global_avg_pool(b_.relu(x), "avg_pool")), kImageNetClasses,
                       true, "last_linear");
  }
  return std::move(b_).finish({logits});
}

int64_t ceil_half(int64_t size) { return (size + 1) / 2; }

// A shifted (pad-and-crop) stride-2 cell turns an HxH map into floor(H/2) x floor(H/2), while the
// factorized reduction of the FirstCell after it turns the cell's other input, also HxH, into
// ceil(H/2): the two are added, so H must be even wherever a shifted cell reduces. Throws a
// NetworkError naming the cell otherwise (the reference fails there with a shape mismatch too).
void check_input_size(const std::string& network, const NasnetConfig& config, int64_t input_size) {
  const auto require_even = [&](int64_t size, const char* cell) {
    if (size % 2 == 0) return;
    throw NetworkError(cat("network '", network, "': input size ", input_size,
                           " does not fit the architecture: ", cell, " reduces a ", size, "x", size,
                           " map with a pad-and-crop shift, which needs an even size"));
  };
  int64_t size = (input_size - kStemKernel) / kStemStride + 1;  // conv0
  size = ceil_half(size);                                       // cell_stem_0
  if (config.shifted_stem_1) require_even(size, "cell_stem_1");
  size = ceil_half(size);
  require_even(size, "reduction_cell_0");
  size = ceil_half(size);
  if (config.shifted_reduction_1) require_even(size, "reduction_cell_1");
}

graph::Graph build_nasnet(const std::string& name, const NasnetConfig& config,
                          const NetworkOptions& options) {
  check_input_size(name, config, options.input_size);
  NetBuilder b(name, options.batch, kImageChannels, options.input_size, options.input_size);
  return NasnetBuilder(b, config).build();
}

}  // namespace

graph::Graph build_nasnet_a_mobile(const NetworkOptions& options) {
  return build_nasnet("nasnet_a_mobile", kMobile, options);
}

graph::Graph build_nasnet_a_large(const NetworkOptions& options) {
  return build_nasnet("nasnet_a_large", kLarge, options);
}

}  // namespace stagecraft::networks
