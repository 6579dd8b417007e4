// Pooling on oneDNN: max, average (with or without the padding counted), global average and max.
#include <algorithm>

#include "common/strings.h"
#include "executor/cpu/ops.h"
#include "executor/op_rules.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;

// Window, stride and padding of a pooling op, and its algorithm.
struct Window {
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  graph::Hw kernel, stride;
  graph::Pads padding;
};

Window window_of(const KernelSpec& spec) {
  switch (spec.kind) {
    case graph::OpKind::kMaxPool: {
      const auto& a = std::get<graph::MaxPoolAttrs>(spec.attrs);
      return {dnnl::algorithm::pooling_max, a.kernel, a.stride, a.padding};
    }
    case graph::OpKind::kAvgPool: {
      const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
      return {a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                  : dnnl::algorithm::pooling_avg_exclude_padding,
              a.kernel, a.stride, a.padding};
    }
    default: {  // global average or max
      const graph::Shape& s = spec.srcs[0].shape;
      return {spec.kind == graph::OpKind::kGlobalMaxPool ? dnnl::algorithm::pooling_max
                                                         : dnnl::algorithm::pooling_avg_exclude_padding,
              graph::Hw{s[2], s[3]}, graph::Hw{1, 1}, graph::Pads{}};
    }
  }
}

// Right/bottom padding oneDNN needs beyond the op's own for this output size (ceil mode).
std::pair<int64_t, int64_t> extra_right_pad(const graph::Shape& in, const graph::Shape& out,
                                            const Window& w) {
  const int64_t need_b = (out[2] - 1) * w.stride.h + w.kernel.h - in[2] - w.padding.top;
  const int64_t need_r = (out[3] - 1) * w.stride.w + w.kernel.w - in[3] - w.padding.left;
  return {std::max<int64_t>(0, need_b - w.padding.bottom),
          std::max<int64_t>(0, need_r - w.padding.right)};
}

dnnl::pooling_v2_forward::primitive_desc pool_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const Window w = window_of(spec);
  const auto [extra_b, extra_r] = extra_right_pad(spec.srcs[0].shape, spec.dsts[0].shape, w);
  dnnl::pooling_v2_forward::desc d(
      dnnl::prop_kind::forward_inference, w.alg, md(spec.srcs[0]), md(spec.dsts[0]),
      {w.stride.h, w.stride.w}, {w.kernel.h, w.kernel.w}, {0, 0}, {w.padding.top, w.padding.left},
      {w.padding.bottom + extra_b, w.padding.right + extra_r});
  return {d, make_attr(), ctx.engine};
}

Support check(const KernelSpec& spec, DnnlContext& ctx) {
  if (Support s = same_layout_support(spec); !s.runnable()) return s;
  if (spec.kind == graph::OpKind::kAvgPool) {
    const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
    if (a.ceil_mode && a.count_include_pad &&
        extra_right_pad(spec.srcs[0].shape, spec.dsts[0].shape, window_of(spec)) !=
            std::pair<int64_t, int64_t>{0, 0}) {
      return Support::unsupported(SupportReason::kAttributes,
                                  "average pooling with ceil_mode and count_include_pad whose last "
                                  "window passes the padding is not supported");
    }
  }
  return implementation_support(pool_pd(spec, ctx).impl_info_str(),
                                cat(graph::to_string(spec.kind), " in ",
                                    graph::to_string(spec.srcs[0].layout)));
}

std::string build(DnnlKernel& k, const KernelSpec& spec, DnnlContext& ctx) {
  const auto pd = pool_pd(spec, ctx);
  k.add({dnnl::pooling_v2_forward(pd),
         {{DNNL_ARG_SRC, 0, md(spec.srcs[0])}, {DNNL_ARG_DST, dst_slot(0), md(spec.dsts[0])}}},
        scratch(pd));
  return pd.impl_info_str();
}

}  // namespace

const OpFamily kPoolingFamily{
    "pooling",
    {graph::OpKind::kMaxPool, graph::OpKind::kAvgPool, graph::OpKind::kGlobalAvgPool,
     graph::OpKind::kGlobalMaxPool},
    check,
    build};

}  // namespace stagecraft::executor::cpu
