// Data movement by own kernels (element_ops.h): concatenation, split, slice, identity (a copy, or
// a conversion of element type or scale), pad, flatten, reshape (the plan makes it a view when
// source and result are plain; otherwise the plain element order is kept across layouts, a flat
// 16-byte copy where both memory orders are plain), channel shuffle (whole planes in NCHW, one
// element per thread otherwise), resize (one destination element per thread), and the backend's
// layout copies. A
// channel-window copy between tensors of one layout moves strided rows of bytes in the widest
// aligned unit (16 bytes per thread where possible); copies between layouts write the destination
// in its memory order. Row-major tensors of any rank are N × C × (the rest) in plain order
// (op_params.h: dims_of): concatenations, slices and splits along dimension 1, copies and reshapes
// of any rank (a full reshape between an NHWC tensor and a row-major one keeps the plain order);
// reductions of row-major tensors on their dimensions folded to 4 (op_params.h: reduce_dims).
#include <algorithm>

#include "common/strings.h"
#include "executor/cuda/ops.h"

namespace stagecraft::executor::cuda {

using graph::OpKind;
using graph::TensorDesc;
using Refs = FnKernel::Refs;

std::unique_ptr<Kernel> make_copy(const TensorDesc& src, const TensorDesc& dst) {
  const Dims4 sd = dims_of(src), dd = dims_of(dst);
  if (src.dtype != dst.dtype || real_scale(src) != real_scale(dst)) {
    // A conversion (quantise, dequantise, requantise), maybe between layouts too.
    const Elem se = elem_of(src.dtype), de = elem_of(dst.dtype);
    const float factor = real_scale(src) / real_scale(dst);
    return std::make_unique<FnKernel>("own convert", [=](CudaStream& s, Refs in, Refs out, void*) {
      launch_convert(se, in[0].data, sd, de, out[0].data, dd, factor, s.get());
    });
  }
  const Elem e = elem_of(src.dtype);
  return std::make_unique<FnKernel>("own copy", [=](CudaStream& s, Refs in, Refs out, void*) {
    launch_copy_channels(e, in[0].data, sd, 0, out[0].data, dd, 0, sd.c, s.get());
  });
}

namespace {

Support check(const KernelSpec& spec) {
  const bool reduce = spec.kind == OpKind::kReduceMean || spec.kind == OpKind::kReduceMax ||
                      spec.kind == OpKind::kReduceSum;
  if ((reduce || spec.kind == OpKind::kSpaceToDepth ||
       (spec.kind == OpKind::kPad && std::get<graph::PadAttrs>(spec.attrs).reflect)) &&
      (graph::is_int8(spec.srcs[0].dtype) || spec.srcs[0].dtype != spec.dsts[0].dtype)) {
    return Support::unsupported(SupportReason::kDataType,
                                cat(graph::to_string(spec.kind), " runs in f32 or f16 and keeps the element type"));
  }
  if (Dims4 in, out; reduce && !reduce_dims(spec.srcs[0], spec.dsts[0], &in, &out)) {
    return Support::unsupported(SupportReason::kAttributes,
                                cat(graph::to_string(spec.kind), " of ", spec.srcs[0].shape.to_string(), " to ",
                                    spec.dsts[0].shape.to_string(),
                                    " needs more than 4 merged dimensions or reduces the first (the own kernel "
                                    "indexes 4 and keeps the first)"));
  }
  if (spec.kind == OpKind::kReshape) {
    if (spec.srcs[0].dtype != spec.dsts[0].dtype) {
      return Support::unsupported(SupportReason::kDataType, "a reshape keeps the element type");
    }
  }
  if (spec.kind == OpKind::kResize && std::get<graph::ResizeAttrs>(spec.attrs).align_corners) {
    return Support::unsupported(SupportReason::kAttributes,
                                "align_corners resizing has no CUDA kernel yet (the CPU backend runs it)");
  }
  if (spec.kind == OpKind::kResize && std::get<graph::ResizeAttrs>(spec.attrs).cubic) {
    return Support::unsupported(SupportReason::kAttributes,
                                "bicubic resizing has no CUDA kernel yet (the CPU backend runs it)");
  }
  if (spec.kind == OpKind::kResize &&
      (graph::is_int8(spec.srcs[0].dtype) || spec.srcs[0].dtype != spec.dsts[0].dtype)) {
    return Support::unsupported(SupportReason::kDataType, "a resize runs in f32 or f16 and keeps the element type");
  }
  if (spec.kind == OpKind::kChannelShuffle &&
      std::any_of(spec.srcs.begin(), spec.srcs.end(), [&](const graph::TensorDesc& d) {
        return d.dtype != spec.dsts[0].dtype || d.scale != spec.dsts[0].scale;
      })) {
    return Support::unsupported(SupportReason::kDataType, "a channel shuffle keeps the element type and scale");
  }
  if (spec.kind == OpKind::kPad && graph::is_int8(spec.srcs[0].dtype) &&
      std::get<graph::PadAttrs>(spec.attrs).value != 0) {
    return Support::unsupported(SupportReason::kQuantisation,
                                "quantised padding with a value other than 0 is not supported");
  }
  return Support::native();  // every kernel here reads and writes each tensor in its own layout
}

std::unique_ptr<Kernel> build(const KernelSpec& spec, BuildContext&) {
  const Elem e = elem_of(spec.srcs[0].dtype);
  const Dims4 in = dims_of(spec.srcs[0]);
  const Dims4 out = dims_of(spec.dsts[0]);
  switch (spec.kind) {
    case OpKind::kConcat: {
      std::vector<Dims4> parts;
      for (const auto& d : spec.srcs) parts.push_back(dims_of(d));
      return std::make_unique<FnKernel>("own concat", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        int64_t c0 = 0;
        for (size_t i = 0; i < parts.size(); ++i) {
          launch_copy_channels(e, srcs[i].data, parts[i], 0, dsts[0].data, out, c0, parts[i].c, s.get());
          c0 += parts[i].c;
        }
      });
    }
    case OpKind::kIdentity:
      return make_copy(spec.srcs[0], spec.dsts[0]);
    case OpKind::kSplit:
    case OpKind::kSlice: {
      std::vector<Dims4> parts;
      for (const auto& d : spec.dsts) parts.push_back(dims_of(d));
      const int64_t begin = spec.kind == OpKind::kSlice ? std::get<graph::SliceAttrs>(spec.attrs).begin : 0;
      return std::make_unique<FnKernel>("own split", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        int64_t c0 = begin;
        for (size_t i = 0; i < parts.size(); ++i) {
          launch_copy_channels(e, srcs[0].data, in, c0, dsts[i].data, parts[i], 0, parts[i].c, s.get());
          c0 += parts[i].c;
        }
      });
    }
    case OpKind::kSpaceToDepth: {
      const int64_t block = std::get<graph::SpaceToDepthAttrs>(spec.attrs).block;
      return std::make_unique<FnKernel>("own space to depth", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_space_to_depth(e, srcs[0].data, in, dsts[0].data, out, block, s.get());
      });
    }
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceSum: {
      const ReduceMode mode = spec.kind == OpKind::kReduceMax   ? ReduceMode::kMax
                              : spec.kind == OpKind::kReduceSum ? ReduceMode::kSum
                                                                : ReduceMode::kMean;
      Dims4 from, to;
      reduce_dims(spec.srcs[0], spec.dsts[0], &from, &to);
      return std::make_unique<FnKernel>("own reduction", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_reduce(e, srcs[0].data, from, dsts[0].data, to, mode, s.get());
      });
    }
    case OpKind::kPad: {
      const auto& a = std::get<graph::PadAttrs>(spec.attrs);
      if (a.reflect) {
        const int64_t top = a.pads.top, left = a.pads.left;
        return std::make_unique<FnKernel>("own reflect pad", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
          launch_reflect_pad(e, srcs[0].data, in, dsts[0].data, out, top, left, s.get());
        });
      }
      const int top = static_cast<int>(a.pads.top), left = static_cast<int>(a.pads.left);
      const float value = static_cast<float>(a.value);
      return std::make_unique<FnKernel>("own pad", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_pad(e, srcs[0].data, in, dsts[0].data, out, top, left, value, s.get());
      });
    }
    case OpKind::kFlatten: {
      Dims4 plain = in;
      plain.nhwc = false;  // the N×(C·H·W) matrix is the nchw order
      return std::make_unique<FnKernel>("own flatten", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_copy_channels(e, srcs[0].data, in, 0, dsts[0].data, plain, 0, in.c, s.get());
      });
    }
    case OpKind::kReshape:
      return std::make_unique<FnKernel>("own reshape", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_reshape(e, srcs[0].data, in, dsts[0].data, out, s.get());
      });
    case OpKind::kChannelShuffle: {
      const int64_t groups = std::get<graph::ChannelShuffleAttrs>(spec.attrs).groups;
      if (spec.srcs.size() > 1) {  // of the concatenation: the parts go into the workspace first
        std::vector<Dims4> parts;
        for (const auto& d : spec.srcs) parts.push_back(dims_of(d));
        return std::make_unique<FnKernel>("own concat + channel shuffle",
                                          [=](CudaStream& s, Refs srcs, Refs dsts, void* workspace) {
          int64_t c0 = 0;
          for (size_t i = 0; i < parts.size(); ++i) {
            launch_copy_channels(e, srcs[i].data, parts[i], 0, workspace, out, c0, parts[i].c, s.get());
            c0 += parts[i].c;
          }
          launch_channel_shuffle(e, workspace, out, dsts[0].data, out, groups, s.get());
        }, static_cast<size_t>(spec.dsts[0].bytes()));
      }
      if (groups == 1 || groups == in.c) return make_copy(spec.srcs[0], spec.dsts[0]);  // no channel moves
      return std::make_unique<FnKernel>("own channel shuffle", [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_channel_shuffle(e, srcs[0].data, in, dsts[0].data, out, groups, s.get());
      });
    }
    case OpKind::kResize: {
      const auto a = std::get<graph::ResizeAttrs>(spec.attrs);
      return std::make_unique<FnKernel>(a.linear ? "own resize bilinear" : "own resize nearest",
                                        [=](CudaStream& s, Refs srcs, Refs dsts, void*) {
        launch_resize(e, srcs[0].data, in, dsts[0].data, out, a.scale_h, a.scale_w, a.linear, s.get());
      });
    }
    default:
      throw BackendError(cat("cuda: the data movement family does not build ", graph::to_string(spec.kind)));
  }
}

}  // namespace

const OpFamily kDataMovementFamily{"data movement",
                                   {OpKind::kConcat, OpKind::kSplit, OpKind::kSlice, OpKind::kIdentity,
                                    OpKind::kPad, OpKind::kFlatten, OpKind::kReshape, OpKind::kChannelShuffle,
                                    OpKind::kSpaceToDepth, OpKind::kReduceMean, OpKind::kReduceMax, OpKind::kReduceSum,
                                    OpKind::kResize},
                                   check,
                                   build};

}  // namespace stagecraft::executor::cuda
