// Transposed convolutions on oneDNN's deconvolution (f32, any rank-4 layout, weights packed in the
// layout oneDNN prefers, the bias fused). ONNX's output_padding (extra rows and columns at the
// bottom and right) is a smaller right padding: oneDNN derives the output size from the paddings.
#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;

memory::dims weight_dims(const graph::ConvTranspose2dAttrs& a) {
  return a.groups > 1 ? memory::dims{a.groups, a.out_channels / a.groups, a.in_channels / a.groups,
                                     a.kernel.h, a.kernel.w}
                      : memory::dims{a.out_channels, a.in_channels, a.kernel.h, a.kernel.w};
}

dnnl::deconvolution_forward::primitive_desc deconv_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  const auto& a = std::get<graph::ConvTranspose2dAttrs>(spec.attrs);
  const memory::desc src = md(spec.srcs[0]);
  const memory::desc dst = md(spec.dsts[0]);
  const memory::desc w_any(weight_dims(a), memory::data_type::f32, memory::format_tag::any);
  const memory::desc b_md({a.out_channels}, memory::data_type::f32, memory::format_tag::x);
  const memory::dims strides{a.stride.h, a.stride.w};
  const memory::dims dilates{a.dilation.h - 1, a.dilation.w - 1};
  const memory::dims pad_l{a.padding.top, a.padding.left};
  const memory::dims pad_r{a.padding.bottom - a.output_padding.h, a.padding.right - a.output_padding.w};
  const auto d = a.bias ? dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                            dnnl::algorithm::deconvolution_direct, src, w_any,
                                                            b_md, dst, strides, dilates, pad_l, pad_r)
                        : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                            dnnl::algorithm::deconvolution_direct, src, w_any,
                                                            dst, strides, dilates, pad_l, pad_r);
  return {d, make_attr(), ctx.engine, /*allow_empty=*/true};
}

using DeconvState = PdState<dnnl::deconvolution_forward::primitive_desc>;

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (spec.srcs[0].dtype != graph::DataType::kF32 || spec.dsts[0].dtype != graph::DataType::kF32) {
    return Support::unsupported(SupportReason::kDataType, "transposed convolutions run in f32");
  }
  auto pd = deconv_pd(spec, ctx);
  const std::string what = cat("a transposed convolution reading ", graph::to_string(spec.srcs[0].layout),
                               " and writing ", graph::to_string(spec.dsts[0].layout));
  if (!pd) return Support::unsupported(SupportReason::kLibrary, cat("oneDNN has no deconvolution for ", what));
  const std::string impl = pd.impl_info_str();
  const size_t workspace = workspace_of(pd);
  return described(impl, what, workspace, std::make_shared<DeconvState>(std::move(pd)));
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext& ctx) {
  const auto& a = std::get<graph::ConvTranspose2dAttrs>(spec.attrs);
  const auto& pd = state_of<DeconvState>(desc, spec).pd;
  const memory::desc w_user(weight_dims(a), memory::data_type::f32,
                            a.groups > 1 ? memory::format_tag::goihw : memory::format_tag::oihw);
  add_weighted_step(k, ctx, spec, dnnl::deconvolution_forward(pd), w_user, pd.weights_desc(), scratch(pd), a.bias,
                    nullptr, nullptr);
  return pd.impl_info_str();
}

}  // namespace

const OpFamily kDeconvolutionFamily{"transposed convolution", {graph::OpKind::kConvTranspose2d}, check, build};

}  // namespace stagecraft::executor::cpu
