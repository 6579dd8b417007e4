#include "profiler/analytic_cost_model.h"

#include <algorithm>
#include <cmath>

#include "common/strings.h"

namespace stagecraft::profiler {

namespace {

using graph::OpKind;

constexpr double kElementsPerStreamingBlock = 1024;  // 256 threads × 4 elements
constexpr double kBandwidthSaturatingFraction = 0.5;  // of the SMs needed to saturate DRAM
constexpr double kMsPerUs = 1e-3;
constexpr double kSmallTileEfficiency = 0.7;  // relative efficiency of half-size tiles

double ceil_div(double a, double b) { return std::ceil(a / b); }

double desc_bytes(const graph::TensorDesc& d) { return static_cast<double>(d.bytes()); }

}  // namespace

AnalyticCostModel::AnalyticCostModel(DeviceSpec device) : device_(std::move(device)) {}

std::string AnalyticCostModel::name() const { return "analytic:" + device_.id; }

std::string AnalyticCostModel::device_fingerprint() const {
  return cat("analytic:", device_.id, ":", device_.name);
}

KernelEstimate AnalyticCostModel::gemm_like(double flops, double blocks, double bytes,
                                            graph::DataType dtype) const {
  const double slots = static_cast<double>(device_.sm_count) * device_.blocks_per_sm;
  const double waves = ceil_div(blocks, slots);
  const double utilisation = blocks / (waves * slots);
  double peak_tflops = device_.fp32_tflops;
  if (dtype == graph::DataType::kF16) peak_tflops = device_.fp16_tflops;
  if (dtype == graph::DataType::kI8 || dtype == graph::DataType::kU8) peak_tflops = device_.int8_tops;
  const double compute_ms =
      flops / (peak_tflops * 1e12 * device_.compute_efficiency * utilisation) * 1e3;
  const double active_sms = std::min<double>(device_.sm_count, blocks);
  const double bandwidth_share =
      std::min(1.0, active_sms / (device_.sm_count * kBandwidthSaturatingFraction));
  const double memory_ms =
      bytes / (device_.memory_gbps * 1e9 * device_.memory_efficiency * bandwidth_share) * 1e3;
  KernelEstimate e;
  e.launches = true;
  e.ms = std::max({compute_ms, memory_ms, device_.min_kernel_us * kMsPerUs});
  // A kernel of several waves holds the whole GPU until its last wave; only single-wave kernels
  // leave SMs for concurrent kernels.
  e.occupancy = waves > 1 ? 1.0 : utilisation;
  e.bytes = bytes;
  return e;
}

KernelEstimate AnalyticCostModel::streaming(double elements, double flops, double bytes) const {
  const double blocks = std::max(1.0, ceil_div(elements, kElementsPerStreamingBlock));
  // Element-wise kernels are bandwidth bound; treat their arithmetic as fp32 at peak.
  return gemm_like(std::max(flops, elements), blocks, bytes, graph::DataType::kF32);
}

KernelEstimate AnalyticCostModel::gemm(double m, double n, double k, double groups, double bytes,
                                       graph::DataType dtype) const {
  // Libraries pick the tile per shape: full tiles run at full efficiency, half tiles make four
  // times as many blocks (to fill the GPU on small problems) at kSmallTileEfficiency.
  const double flops = 2.0 * m * n * k * groups;
  const double tile = device_.gemm_tile;
  const double half = std::max(1.0, tile / 2);
  KernelEstimate big = gemm_like(flops, groups * ceil_div(m, tile) * ceil_div(n, tile), bytes, dtype);
  KernelEstimate small = gemm_like(flops / kSmallTileEfficiency,
                                   groups * ceil_div(m, half) * ceil_div(n, half), bytes, dtype);
  return small.ms < big.ms ? small : big;
}

KernelEstimate AnalyticCostModel::conv_estimate(const graph::Conv2dAttrs& a,
                                                const graph::TensorDesc& src,
                                                const graph::TensorDesc& dst) const {
  const double m = static_cast<double>(dst.shape[0] * dst.shape[2] * dst.shape[3]);
  const double n_per_group = static_cast<double>(a.out_channels / a.groups);
  const double k = static_cast<double>(a.in_channels / a.groups * a.kernel.h * a.kernel.w);
  const double weight_bytes = static_cast<double>(a.out_channels) * k *
                              static_cast<double>(graph::size_of(src.dtype));
  return gemm(m, n_per_group, k, static_cast<double>(a.groups),
              desc_bytes(src) + desc_bytes(dst) + weight_bytes, src.dtype);
}

KernelEstimate AnalyticCostModel::op_estimate(const graph::Graph& graph, graph::OpId id) const {
  const graph::Op& op = graph.op(id);
  const auto in = graph.input_descs(id);
  const auto out = graph.output_descs(id);
  double in_bytes = 0;
  for (const auto& d : in) in_bytes += desc_bytes(d);
  double out_bytes = 0;
  for (const auto& d : out) out_bytes += desc_bytes(d);
  const double out_elements = static_cast<double>(out[0].shape.numel());
  switch (op.kind) {
    case OpKind::kConv2d:
      return conv_estimate(op.attrs_as<graph::Conv2dAttrs>(), in[0], out[0]);
    case OpKind::kLinear: {
      const auto& a = op.attrs_as<graph::LinearAttrs>();
      const double weight_bytes = static_cast<double>(a.in_features * a.out_features *
                                                      graph::size_of(in[0].dtype));
      return gemm(static_cast<double>(in[0].shape.numel() / a.in_features), static_cast<double>(a.out_features),
                  static_cast<double>(a.in_features), 1, in_bytes + out_bytes + weight_bytes,
                  in[0].dtype);
    }
    case OpKind::kConvTranspose2d: {  // each input pixel times its group's outputs and taps
      const auto& a = op.attrs_as<graph::ConvTranspose2dAttrs>();
      const double pixels = static_cast<double>(in[0].shape.numel() / a.in_channels);
      return gemm(pixels, static_cast<double>(a.out_channels / a.groups * a.kernel.h * a.kernel.w),
                  static_cast<double>(a.in_channels / a.groups), static_cast<double>(a.groups), in_bytes + out_bytes,
                  in[0].dtype);
    }
    case OpKind::kMatMul: {  // batches of [M, K] x [K, N]
      const size_t r = out[0].shape.rank();
      const double m = static_cast<double>(out[0].shape[r - 2]), n = static_cast<double>(out[0].shape[r - 1]);
      const double k = static_cast<double>(in[0].shape[r - 1]);
      return gemm(m, n, k, out_elements / (m * n), in_bytes + out_bytes, in[0].dtype);
    }
    case OpKind::kMaxPool: {
      const auto& a = op.attrs_as<graph::MaxPoolAttrs>();
      return streaming(out_elements, out_elements * a.kernel.h * a.kernel.w, in_bytes + out_bytes);
    }
    case OpKind::kAvgPool: {
      const auto& a = op.attrs_as<graph::AvgPoolAttrs>();
      return streaming(out_elements, out_elements * a.kernel.h * a.kernel.w, in_bytes + out_bytes);
    }
    case OpKind::kGlobalAvgPool:
    case OpKind::kGlobalMaxPool:
      return streaming(static_cast<double>(in[0].shape.numel()), 0, in_bytes + out_bytes);
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kSlice:
    case OpKind::kFlatten:
    case OpKind::kReshape:
    case OpKind::kIdentity:
      return KernelEstimate{};  // views: producers write into, and readers read from, slices
    default:  // batch norm, activations, add, binary, shuffle, pad, softmax: element-wise
      return streaming(out_elements, out_elements * static_cast<double>(in.size()),
                       in_bytes + out_bytes);
  }
}

double AnalyticCostModel::stage_latency_ms(const graph::Graph& graph,
                                           const graph::LayoutAssignment& /*layouts*/,
                                           const scheduler::Stage& stage) {
  std::vector<KernelEstimate> kernels;
  std::vector<double> group_ms;
  if (stage.kind == scheduler::StageKind::kMerge) {
    const auto convs = stage.ops();
    const graph::Op& first = graph.op(convs[0]);
    const graph::Conv2dAttrs merged = scheduler::merged_conv_attrs(graph, convs);
    graph::TensorDesc dst = graph.value(first.outputs[0]).desc;
    dst.shape[1] = merged.out_channels;
    kernels.push_back(conv_estimate(merged, graph.value(first.inputs[0]).desc, dst));
    group_ms.push_back(kernels.back().ms);
  } else {
    for (const auto& group : stage.groups) {
      double total = 0;
      for (graph::OpId id : group) {
        KernelEstimate e = op_estimate(graph, id);
        if (!e.launches) continue;
        total += e.ms;
        kernels.push_back(e);
      }
      if (total > 0) group_ms.push_back(total);
    }
  }
  if (kernels.empty()) return 0;
  double demand = 0;
  double bytes = 0;
  for (const auto& k : kernels) {
    demand += k.ms * k.occupancy;
    bytes += k.bytes;
  }
  const double memory_ms = bytes / (device_.memory_gbps * 1e9 * device_.memory_efficiency) * 1e3;
  const double gpu_ms = std::max({*std::max_element(group_ms.begin(), group_ms.end()), demand,
                                  memory_ms});
  const double host_ms = static_cast<double>(kernels.size()) * device_.kernel_launch_us * kMsPerUs;
  const double sync_ms =
      static_cast<double>(group_ms.size() - 1) * device_.cross_stream_sync_us * kMsPerUs;
  return std::max(gpu_ms, host_ms) + sync_ms;
}

}  // namespace stagecraft::profiler
