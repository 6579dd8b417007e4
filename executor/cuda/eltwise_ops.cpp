// Element-wise ops by own kernels (element_ops.h): ReLU, ReLU6 (clipped at the bound of
// kernel_math.h in the destination's units), sigmoid, hard sigmoid (the op's slope and offset),
// hard swish, SiLU, leaky ReLU, scale, inference batch norm (a per-channel
// scale and shift, then its fused activation in place), additions (f32/f16: up to kMaxAddInputs inputs per launch, longer sums
// accumulate into the output; 8-bit: every input rescaled into the output's units), layer norm
// (the channels of each pixel; the last axis of a row-major tensor), softmax over any axis of a
// row-major tensor or the channels of a rank-4 one (one block per contiguous row, one thread per
// strided row). Flat kernels also run on row-major tensors of any rank.
// Flat kernels read and write packs of 4 elements when the tensors are aligned.
#include <cmath>

#include "common/strings.h"
#include "executor/cuda/ops.h"
#include "executor/kernel_math.h"

namespace stagecraft::executor::cuda {

namespace {

using graph::OpKind;
using Refs = FnKernel::Refs;

// The axis a softmax normalises (1 when its attributes name none).
int64_t softmax_axis(const KernelSpec& spec) {
  const auto* a = std::get_if<graph::SoftmaxAttrs>(&spec.attrs);
  return a ? a->axis : 1;
}

std::unique_ptr<Kernel> batch_norm(const KernelSpec& spec, BuildContext& ctx) {
  const auto& w = *spec.weights;
  const auto& attrs = std::get<graph::BatchNormAttrs>(spec.attrs);
  const double eps = attrs.eps;
  std::vector<float> scale(w.gamma.size()), shift(w.gamma.size());
  for (size_t c = 0; c < scale.size(); ++c) {
    scale[c] = static_cast<float>(w.gamma[c] / std::sqrt(static_cast<double>(w.var[c]) + eps));
    shift[c] = static_cast<float>(w.beta[c] - w.mean[c] * scale[c]);
  }
  const DeviceFloats sc(*ctx.device, scale), sh(*ctx.device, shift);
  const Elem e = elem_of(spec.srcs[0].dtype);
  const Dims4 d = dims_of(spec.srcs[0]);
  ActParams act;
  act.act = act_of(attrs.activation);
  act.relu6_max = relu6_bound(spec.dsts[0]);
  const int64_t n = spec.dsts[0].shape.numel();
  return std::make_unique<FnKernel>("own batch norm", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
    launch_scale_shift(e, srcs[0].data, dsts[0].data, sc.get(), sh.get(), d, s.get());
    if (act.act != Act::kNone) launch_act(e, dsts[0].data, dsts[0].data, n, act, s.get());
  });
}

std::unique_ptr<Kernel> layer_norm(const KernelSpec& spec, BuildContext& ctx) {
  const DeviceFloats gamma(*ctx.device, spec.weights->gamma), beta(*ctx.device, spec.weights->beta);
  const auto eps = static_cast<float>(std::get<graph::LayerNormAttrs>(spec.attrs).eps);
  const Elem e = elem_of(spec.srcs[0].dtype);
  const Dims4 d = norm_dims(spec.srcs[0]);  // a row-major tensor: its last axis
  return std::make_unique<FnKernel>("own layer norm", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
    launch_layer_norm(e, srcs[0].data, dsts[0].data, gamma.get(), beta.get(), eps, d, s.get());
  });
}

std::unique_ptr<Kernel> add(const KernelSpec& spec) {
  const Act act = act_of(std::get<graph::AddAttrs>(spec.attrs).activation);
  const int64_t n = spec.dsts[0].shape.numel();
  const float relu6_max = relu6_bound(spec.dsts[0]);
  if (graph::is_int8(spec.srcs[0].dtype)) {
    // dst = act(sum (src scale / dst scale) · src), in the destination's units.
    std::vector<Elem> elems;
    std::vector<float> factors;
    for (const auto& d : spec.srcs) {
      elems.push_back(elem_of(d.dtype));
      factors.push_back(real_scale(d) / real_scale(spec.dsts[0]));
    }
    const Elem de = elem_of(spec.dsts[0].dtype);
    return std::make_unique<FnKernel>("own int8 add", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
      std::vector<const void*> ptrs;
      for (const auto& r : srcs) ptrs.push_back(r.data);
      launch_add_scaled(ptrs.data(), elems.data(), factors.data(), static_cast<int>(ptrs.size()), de,
                        dsts[0].data, n, act, relu6_max, s.get());
    });
  }
  const Elem e = elem_of(spec.srcs[0].dtype);
  return std::make_unique<FnKernel>("own add", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
    std::vector<const void*> ptrs;
    for (const auto& r : srcs) ptrs.push_back(r.data);
    size_t done = 0;
    while (done < ptrs.size()) {
      std::vector<const void*> chunk;
      if (done > 0) chunk.push_back(dsts[0].data);  // the partial sum so far
      while (done < ptrs.size() && static_cast<int>(chunk.size()) < kMaxAddInputs) chunk.push_back(ptrs[done++]);
      launch_add(e, chunk.data(), static_cast<int>(chunk.size()), dsts[0].data, n,
                 done == ptrs.size() ? act : Act::kNone, relu6_max, s.get());
    }
  });
}

Support check(const KernelSpec& spec) {
  if (Support s = one_layout(spec); !s.runnable()) return s;
  if (spec.kind == OpKind::kLayerNorm && graph::is_int8(spec.srcs[0].dtype)) {
    return Support::unsupported(SupportReason::kDataType, "layer_norm runs in f32 or f16: dequantise its input first");
  }
  if (spec.kind == OpKind::kLayerNorm) {
    const int64_t c = norm_dims(spec.srcs[0]).c;
    if (static_cast<int64_t>(spec.weights->gamma.size()) != c || static_cast<int64_t>(spec.weights->beta.size()) != c) {
      return Support::unsupported(SupportReason::kWeights,
                                  cat("layer_norm of ", spec.srcs[0].shape.to_string(), " needs ", c,
                                      " gamma and beta values (got ", spec.weights->gamma.size(), " and ",
                                      spec.weights->beta.size(), ")"));
    }
  }
  if (spec.kind == OpKind::kSoftmax) {
    if (std::get<graph::SoftmaxAttrs>(spec.attrs).hard) {
      return Support::unsupported(SupportReason::kAttributes, "the CUDA backend has no hardmax (ONNX Hardmax) yet");
    }
    if (std::get<graph::SoftmaxAttrs>(spec.attrs).log) {
      return Support::unsupported(SupportReason::kAttributes, "the CUDA softmax has no log form (LogSoftmax) yet");
    }
    if (graph::is_int8(spec.srcs[0].dtype) || spec.srcs[0].dtype != spec.dsts[0].dtype) {
      return Support::unsupported(SupportReason::kDataType, "softmax runs in f32 or f16 and keeps the element type");
    }
    const int64_t axis = softmax_axis(spec);
    if (graph::takes_layouts(spec.srcs[0]) && axis != 1) {
      return Support::unsupported(SupportReason::kAttributes,
                                  cat("softmax over axis ", axis, " of a rank-4 tensor in ",
                                      graph::to_string(spec.srcs[0].layout),
                                      ": the CUDA kernel normalises its channels (axis 1) only"));
    }
    if (axis < 0 || axis >= static_cast<int64_t>(spec.srcs[0].shape.rank())) {
      return Support::unsupported(SupportReason::kAttributes,
                                  cat("softmax axis ", axis, " is not a dimension of ", spec.srcs[0].shape.to_string()));
    }
  }
  if (spec.kind == OpKind::kAdd && graph::is_int8(spec.srcs[0].dtype) &&
      spec.srcs.size() > static_cast<size_t>(kMaxAddInputs)) {
    return Support::unsupported(SupportReason::kQuantisation,
                                cat("a quantised add of more than ", kMaxAddInputs, " inputs is not supported"));
  }
  return Support::native();
}

std::unique_ptr<Kernel> build(const KernelSpec& spec, BuildContext& ctx) {
  const Elem e = elem_of(spec.srcs[0].dtype);
  const int64_t n = spec.srcs[0].shape.numel();
  if (graph::is_activation_kind(spec.kind)) {
    const ActParams act = act_params(spec);
    return std::make_unique<FnKernel>("own activation", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
      launch_act(e, srcs[0].data, dsts[0].data, n, act, s.get());
    });
  }
  switch (spec.kind) {
    case OpKind::kScale: {
      const float factor = static_cast<float>(std::get<graph::ScaleAttrs>(spec.attrs).factor);
      return std::make_unique<FnKernel>("own scale", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_scale(e, srcs[0].data, dsts[0].data, n, factor, s.get());
      });
    }
    case OpKind::kBatchNorm:
      return batch_norm(spec, ctx);
    case OpKind::kLayerNorm:
      return layer_norm(spec, ctx);
    case OpKind::kAdd:
      return add(spec);
    case OpKind::kSoftmax: {
      const SoftmaxGeometry g = softmax_geometry(spec.srcs[0], softmax_axis(spec));
      return std::make_unique<FnKernel>("own softmax", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_softmax_axis(e, srcs[0].data, dsts[0].data, g, s.get());
      });
    }
    default:
      throw BackendError(cat("cuda: the element-wise family does not build ", graph::to_string(spec.kind)));
  }
}

}  // namespace

const OpFamily kElementwiseFamily{"element-wise",
                                  {OpKind::kRelu, OpKind::kRelu6, OpKind::kSigmoid, OpKind::kHardSigmoid,
                                   OpKind::kHardSwish, OpKind::kSilu, OpKind::kGelu, OpKind::kGeluTanh, OpKind::kTanh, OpKind::kSqrt,
                                   OpKind::kLeakyRelu, OpKind::kClip, OpKind::kScale,
                                   OpKind::kBatchNorm, OpKind::kLayerNorm, OpKind::kAdd, OpKind::kSoftmax},
                                  check,
                                  build};

}  // namespace stagecraft::executor::cuda
