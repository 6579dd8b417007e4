#pragma once
/// An analytic stage-latency model driven by a device description (configs/devices/*.yaml), for
/// offline scheduling and tests.
///
/// Kernel model: a convolution or linear layer is an implicit GEMM tiled into thread blocks of
/// gemm_tile × gemm_tile outputs (or half that, at 70% efficiency, when that is faster); with B blocks on S SMs holding k blocks each, it runs in
/// ceil(B / (S·k)) waves and reaches the fraction B / (waves·S·k) of peak, so small convolutions
/// that cannot fill the GPU are slow for their FLOPs. Element-wise, pooling and padding kernels
/// are bandwidth bound. Concatenation, split, slice, flatten and identity are views (no kernel).
///
/// Stage model: a concurrent stage takes the longest of (a) its longest group (sum of isolated
/// kernel times), (b) its total SM demand (Σ time × fraction of the GPU a kernel occupies) and (c)
/// its total memory traffic at full bandwidth, but at least the host time to launch its kernels,
/// plus one cross-stream synchronisation per extra group. So small under-filling convolutions
/// gain from running concurrently (their SM demands add up to less than their times) or merged
/// (the merged kernel fills more SMs), while large convolutions gain nothing and pay the sync. A
/// merge stage costs one convolution with the stacked output channels and the largest kernel.
///
/// Example:
///   AnalyticCostModel model(find_device_spec("v100"));
///   double ms = model.stage_latency_ms(graph, Stage::concurrent({{a}, {b}}));

#include "profiler/device_spec.h"
#include "scheduler/cost_model.h"

namespace stagecraft::profiler {

/// Estimate of one kernel.
struct KernelEstimate {
  bool launches = false;  ///< false for views (no kernel)
  double ms = 0;          ///< isolated duration
  double occupancy = 0;   ///< average fraction of the GPU's block slots it keeps busy
  double bytes = 0;       ///< DRAM traffic
};

/// The analytic cost model for one device.
class AnalyticCostModel : public scheduler::CostModel {
 public:
  /// A model of `device`.
  explicit AnalyticCostModel(DeviceSpec device);

  std::string name() const override;
  std::string device_fingerprint() const override;
  /// The estimate of `stage` (layouts do not enter the analytic model).
  double stage_latency_ms(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
                          const scheduler::Stage& stage) override;

  /// Estimate of one op of the graph run alone.
  KernelEstimate op_estimate(const graph::Graph& graph, graph::OpId id) const;

  /// Estimate of a convolution with these attributes on these descriptors.
  KernelEstimate conv_estimate(const graph::Conv2dAttrs& attrs, const graph::TensorDesc& src,
                               const graph::TensorDesc& dst) const;

  /// The device description.
  const DeviceSpec& device() const { return device_; }

 private:
  KernelEstimate gemm(double m, double n, double k, double groups, double bytes,
                      graph::DataType dtype) const;
  KernelEstimate gemm_like(double flops, double blocks, double bytes, graph::DataType dtype) const;
  KernelEstimate streaming(double elements, double flops, double bytes) const;

  DeviceSpec device_;
};

}  // namespace stagecraft::profiler
