// Data movement on oneDNN: concatenation, split and channel slices, identity (a copy that may
// change layout, element type and scale), zero padding and cropping, flatten. The plan makes most
// of these views; these kernels run where it cannot.
#include <algorithm>

#include "common/strings.h"
#include "executor/cpu/channel_gather.h"
#include "executor/cpu/ops.h"
#include "executor/op_rules.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;
using graph::OpKind;

dnnl::concat::primitive_desc concat_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  std::vector<memory::desc> srcs;
  for (const auto& d : spec.srcs) srcs.push_back(md(d));
  return {md(spec.dsts[0]), 1, srcs, ctx.engine, make_attr()};
}

constexpr const char* kReorderImpl = "reorder";
constexpr const char* kViaNchwImpl = "reorder via nchw";

// How a concatenation or a split runs: oneDNN's concat (or reorders from sub-memories), our channel
// gather, or reorders through a plain nchw temporary.
enum class Route { kDirect, kGather, kViaNchw };

// A concatenation's parts as its kernels copy them: those of a part-scale concatenation (int8,
// ConcatAttrs::part_scales) keep their own scales in the output's element type and are copied as
// they are, like parts in the output's scale.
std::vector<graph::TensorDesc> copied_parts(const KernelSpec& spec) {
  std::vector<graph::TensorDesc> parts = spec.srcs;
  if (std::get<graph::ConcatAttrs>(spec.attrs).part_scales)
    for (graph::TensorDesc& d : parts) d.scale = spec.dsts[0].scale;
  return parts;
}

// oneDNN's concat has only its reference kernel when parts do not start on a channel block of a
// blocked destination; a channel gather then copies the parts in one pass (or, for parts of other
// element types or scales, they go into a plain nchw temporary which one reorder turns into the
// destination). `impl`: the name of oneDNN's concat.
Route concat_route(const KernelSpec& spec, const std::string& impl) {
  if (!is_reference(impl) || spec.dsts[0].shape.rank() != 4) return Route::kDirect;
  return channel_gather_applies(copied_parts(spec), spec.dsts[0]) ? Route::kGather : Route::kViaNchw;
}

// The implementation name of `route` (`direct`: the name of the direct way).
std::string route_name(Route route, const std::string& direct) {
  return route == Route::kDirect ? direct : route == Route::kGather ? kChannelGatherImpl : kViaNchwImpl;
}

std::string build_concat(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const auto pd = concat_pd(spec, ctx);
  const std::string impl = pd.impl_info_str();
  const Route route = concat_route(spec, impl);
  if (route == Route::kDirect) {
    DnnlKernel::StepSpec step{dnnl::concat(pd), {{DNNL_ARG_DST, dst_slot(0), md(spec.dsts[0])}}};
    for (size_t i = 0; i < spec.srcs.size(); ++i) {
      step.args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), static_cast<int>(i),
                           md(spec.srcs[i])});
    }
    k.add(std::move(step), scratch(pd));
    return impl;
  }
  const graph::TensorDesc& out = spec.dsts[0];
  if (route == Route::kGather) {
    std::vector<ChannelSource> from;
    for (size_t i = 0; i < spec.srcs.size(); ++i)
      for (int64_t c = 0; c < spec.srcs[i].shape[1]; ++c) from.push_back({static_cast<int>(i), c});
    add_channel_gather(k, copied_parts(spec), out, 0, from);
    return kChannelGatherImpl;
  }
  const memory::desc plain = plain_md(out.shape, out.dtype);
  k.reserve_temp(plain.get_size());
  int64_t c0 = 0;
  for (size_t i = 0; i < spec.srcs.size(); ++i) {
    const memory::desc part = plain.submemory_desc(dims_of(spec.srcs[i].shape), {0, c0, 0, 0});
    k.add_reorder(ctx, md(spec.srcs[i]), static_cast<int>(i), part, DnnlKernel::kTemp);
    c0 += spec.srcs[i].shape[1];
  }
  k.add_reorder(ctx, plain, DnnlKernel::kTemp, md(out), dst_slot(0));
  return kViaNchwImpl;
}

// Split and slice: whether every output starts and ends on a channel block of the source (then
// each is a reorder from a sub-memory; otherwise through a plain copy first).
bool block_aligned(const KernelSpec& spec, int64_t begin) {
  const int64_t block = graph::channel_block(spec.srcs[0].layout);
  bool aligned = true;
  for (int64_t c0 = begin; const auto& d : spec.dsts) {
    aligned = aligned && (block == 0 || (c0 % block == 0 && d.shape[1] % block == 0));
    c0 += d.shape[1];
  }
  return aligned;
}

int64_t slice_begin(const KernelSpec& spec) {
  return spec.kind == OpKind::kSlice ? std::get<graph::SliceAttrs>(spec.attrs).begin : 0;
}

// A split or slice: reorders from sub-memories of the source where every output is block-aligned,
// else our channel gather where it applies to every output, else through a plain copy first.
Route split_route(const KernelSpec& spec) {
  if (block_aligned(spec, slice_begin(spec))) return Route::kDirect;
  const bool gather = std::all_of(spec.dsts.begin(), spec.dsts.end(), [&](const graph::TensorDesc& d) {
    return channel_gather_applies({spec.srcs[0]}, d);
  });
  return gather ? Route::kGather : Route::kViaNchw;
}

std::string build_split(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const graph::TensorDesc& in = spec.srcs[0];
  int64_t begin = slice_begin(spec);
  const Route route = split_route(spec);
  if (route == Route::kGather) {
    for (size_t i = 0; i < spec.dsts.size(); ++i) {
      std::vector<ChannelSource> from;
      for (int64_t c = 0; c < spec.dsts[i].shape[1]; ++c) from.push_back({0, begin + c});
      add_channel_gather(k, {in}, spec.dsts[i], static_cast<int>(i), from);
      begin += spec.dsts[i].shape[1];
    }
    return kChannelGatherImpl;
  }
  memory::desc src = md(in);
  int src_slot = 0;
  if (route == Route::kViaNchw) {
    const memory::desc plain = plain_md(in.shape, in.dtype);
    k.reserve_temp(plain.get_size());
    k.add_reorder(ctx, src, 0, plain, DnnlKernel::kTemp);
    src = plain;
    src_slot = DnnlKernel::kTemp;
  }
  for (size_t i = 0; i < spec.dsts.size(); ++i) {
    const graph::Shape& s = spec.dsts[i].shape;
    const memory::desc sub = src.submemory_desc(dims_of(s), {0, begin, 0, 0});
    k.add_reorder(ctx, sub, src_slot, md(spec.dsts[i]), dst_slot(static_cast<int>(i)));
    begin += s[1];
  }
  return route_name(route, kReorderImpl);
}

std::string build_pad(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  // Fill the destination (zero it, or copy a constant tensor of the fill value made at creation:
  // a reorder keeps the padding lanes of blocked layouts zero), then copy the overlapping window
  // (negative pads crop).
  const auto& a = std::get<graph::PadAttrs>(spec.attrs);
  const auto& p = a.pads;
  if (a.value != 0) {
    const memory::desc full = md(spec.dsts[0]);
    const std::vector<float> fill(static_cast<size_t>(spec.dsts[0].shape.numel()),
                                  static_cast<float>(a.value));
    dnnl::reorder::primitive_desc pd(ctx.engine, full, ctx.engine, full, make_attr());
    DnnlKernel::StepSpec step{dnnl::reorder(pd), {{DNNL_ARG_DST, dst_slot(0), full}}};
    step.add_constant(DNNL_ARG_SRC, pack(ctx, plain_md(spec.dsts[0].shape, spec.dsts[0].dtype), full, fill));
    k.add(std::move(step), scratch(pd));
  }
  const graph::Shape& in = spec.srcs[0].shape;
  const int64_t src_top = std::max<int64_t>(0, -p.top), dst_top = std::max<int64_t>(0, p.top);
  const int64_t src_left = std::max<int64_t>(0, -p.left), dst_left = std::max<int64_t>(0, p.left);
  const int64_t rows = std::min(in[2] - src_top, spec.dsts[0].shape[2] - dst_top);
  const int64_t cols = std::min(in[3] - src_left, spec.dsts[0].shape[3] - dst_left);
  const memory::dims window{in[0], in[1], rows, cols};
  const memory::desc src = md(spec.srcs[0]).submemory_desc(window, {0, 0, src_top, src_left});
  const memory::desc dst = md(spec.dsts[0]).submemory_desc(window, {0, 0, dst_top, dst_left});
  k.add_reorder(ctx, src, 0, dst, dst_slot(0), /*zero_dst=*/a.value != 0 ? SIZE_MAX : 0);
  return kReorderImpl;
}

// Reshape keeping the batch: the elements in plain order do not move, so it is a reorder into
// plain order (when the source is blocked), the bytes read as the new shape, and a reorder into
// the destination's layout (when that is blocked); the plan makes it a view when both are plain.
std::string build_reshape(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const graph::TensorDesc& in = spec.srcs[0];
  const graph::TensorDesc& out = spec.dsts[0];
  const memory::desc in_plain = plain_md(in.shape, in.dtype);
  const memory::desc out_plain = plain_md(out.shape, out.dtype);
  const bool in_is_plain = md(in) == in_plain, out_is_plain = md(out) == out_plain;
  if (in_is_plain) {
    k.add_reorder(ctx, out_plain, 0, md(out), dst_slot(0));  // the source read as the new shape
  } else if (out_is_plain) {
    k.add_reorder(ctx, md(in), 0, in_plain, dst_slot(0));  // written in plain order
  } else {
    k.reserve_temp(in_plain.get_size());
    k.add_reorder(ctx, md(in), 0, in_plain, DnnlKernel::kTemp);
    k.add_reorder(ctx, out_plain, DnnlKernel::kTemp, md(out), dst_slot(0));
  }
  return kReorderImpl;
}

// A channel shuffle of g groups: destination channel j is channel (j % g) * (C / g) + j / g of the
// concatenation of the sources.
std::vector<ChannelSource> shuffle_sources(const KernelSpec& spec) {
  const int64_t groups = std::get<graph::ChannelShuffleAttrs>(spec.attrs).groups;
  std::vector<ChannelSource> concatenated;
  for (size_t i = 0; i < spec.srcs.size(); ++i)
    for (int64_t c = 0; c < spec.srcs[i].shape[1]; ++c) concatenated.push_back({static_cast<int>(i), c});
  const int64_t channels = static_cast<int64_t>(concatenated.size()), per_group = channels / groups;
  std::vector<ChannelSource> from;
  for (int64_t j = 0; j < channels; ++j) from.push_back(concatenated[static_cast<size_t>(j % groups * per_group + j / groups)]);
  return from;
}

dnnl::shuffle_forward::primitive_desc shuffle_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  // oneDNN's group size is the number of channels in a group of its view, C / groups of ours.
  const int64_t groups = std::get<graph::ChannelShuffleAttrs>(spec.attrs).groups;
  dnnl::shuffle_forward::desc d(dnnl::prop_kind::forward_inference, md(spec.srcs[0]), 1,
                                spec.srcs[0].shape[1] / groups);
  return {d, ctx.engine, make_attr()};
}

// Descriptions without a state: the builder decides again with the same functions (the routes).
KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  switch (spec.kind) {
    case OpKind::kPad:
      if (std::get<graph::PadAttrs>(spec.attrs).reflect) return check_reflect_pad(spec, ctx);
      if (std::get<graph::PadAttrs>(spec.attrs).value != 0 && spec.dsts[0].dtype != graph::DataType::kF32) {
        return Support::unsupported(SupportReason::kAttributes,
                                    "quantised padding with a value other than 0 is not supported");
      }
      return described(kReorderImpl, "");
    case OpKind::kChannelShuffle:
      if (Support s = same_layout_support(spec); !s.runnable()) return s;
      if (channel_gather_applies(spec.srcs, spec.dsts[0])) return described(kChannelGatherImpl, "");
      if (spec.srcs.size() > 1) {
        return Support::unsupported(SupportReason::kDataType,
                                    "a channel shuffle of several inputs needs one element type and scale");
      }
      return described(shuffle_pd(spec, ctx).impl_info_str(),
                       cat("channel shuffle in ", graph::to_string(spec.dsts[0].layout)));
    case OpKind::kConcat: {
      // The reference kernel is replaced by a channel gather or reorders through nchw in rank 4.
      const std::string impl = concat_pd(spec, ctx).impl_info_str();
      const Route route = concat_route(spec, impl);
      const std::string what = cat("concat in ", graph::to_string(spec.dsts[0].layout));
      KernelDesc desc = route == Route::kDirect ? described(impl, what) : KernelDesc(Support::native());
      desc.implementation = route_name(route, impl);
      return desc;
    }
    case OpKind::kSplit:
    case OpKind::kSlice:
      return described(route_name(split_route(spec), kReorderImpl), "");
    default:
      return described(kReorderImpl, "");  // reorders: oneDNN has optimised ones for every layout pair here
  }
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext& ctx) {
  switch (spec.kind) {
    case OpKind::kConcat:
      return build_concat(k, spec, ctx);
    case OpKind::kSplit:
    case OpKind::kSlice:
      return build_split(k, spec, ctx);
    case OpKind::kPad:
      if (std::get<graph::PadAttrs>(spec.attrs).reflect) return add_reflect_pad(k, spec);
      return build_pad(k, spec, ctx);
    case OpKind::kReshape:
      return build_reshape(k, spec, ctx);
    case OpKind::kChannelShuffle: {
      if (channel_gather_applies(spec.srcs, spec.dsts[0])) {
        add_channel_gather(k, spec.srcs, spec.dsts[0], 0, shuffle_sources(spec));
        return kChannelGatherImpl;
      }
      const auto pd = shuffle_pd(spec, ctx);
      k.add({dnnl::shuffle_forward(pd),
             {{DNNL_ARG_SRC, 0, md(spec.srcs[0])}, {DNNL_ARG_DST, dst_slot(0), md(spec.dsts[0])}}},
            scratch(pd));
      return pd.impl_info_str();
    }
    case OpKind::kFlatten:
      // Reorder into the plain nchw order, which is the N×(C·H·W) matrix.
      k.add_reorder(ctx, md(spec.srcs[0]), 0, plain_md(spec.srcs[0].shape, spec.srcs[0].dtype),
                    dst_slot(0));
      return kReorderImpl;
    default:  // identity
      k.add_reorder(ctx, md(spec.srcs[0]), 0, md(spec.dsts[0]), dst_slot(0), SIZE_MAX,
                    rescale_attr(spec.srcs[0], spec.dsts[0]));
      return kReorderImpl;
  }
}

}  // namespace

const OpFamily kDataMovementFamily{"data movement",
                                   {OpKind::kConcat, OpKind::kSplit, OpKind::kSlice,
                                    OpKind::kIdentity, OpKind::kPad, OpKind::kFlatten,
                                    OpKind::kReshape, OpKind::kChannelShuffle},
                                   check,
                                   build};

}  // namespace stagecraft::executor::cpu
