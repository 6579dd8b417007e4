#include "executor/cpu/dnnl_kernel.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "common/enum_table.h"
#include "common/strings.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/cpu/host_memory.h"

namespace stagecraft::executor::cpu {

using dnnl::memory;
using graph::Activation;
using graph::DataType;
using graph::Layout;
using graph::TensorDesc;

namespace {

constexpr Mapped<DataType, memory::data_type> kTypes[] = {{DataType::kF32, memory::data_type::f32},
                                                          {DataType::kF16, memory::data_type::f16},
                                                          {DataType::kBF16, memory::data_type::bf16},
                                                          {DataType::kI8, memory::data_type::s8},
                                                          {DataType::kU8, memory::data_type::u8},
                                                          {DataType::kI32, memory::data_type::s32}};

// Layouts oneDNN has no tag for (kNCHWVectC, a cuDNN layout) map to undef.
constexpr Mapped<Layout, memory::format_tag> kTags[] = {
    {Layout::kNCHW, memory::format_tag::nchw},
    {Layout::kNHWC, memory::format_tag::nhwc},
    {Layout::kNChw8c, memory::format_tag::nChw8c},
    {Layout::kNChw16c, memory::format_tag::nChw16c},
    {Layout::kNC, memory::format_tag::nc}};

}  // namespace

memory::data_type dnnl_type(DataType type) {
  return mapped_or(kTypes, type, memory::data_type::undef);
}

memory::format_tag dnnl_tag(Layout layout) {
  return mapped_or(kTags, layout, memory::format_tag::undef);
}

memory::dims dims_of(const graph::Shape& shape) {
  return memory::dims(shape.dims().begin(), shape.dims().end());
}

memory::desc md(const TensorDesc& d) {
  if (d.layout == Layout::kRowMajor) return plain_md(d.shape, d.dtype);
  return memory::desc(dims_of(d.shape), dnnl_type(d.dtype), dnnl_tag(d.layout));
}

memory::desc plain_md(const graph::Shape& shape, DataType type) {
  // oneDNN has no 0-D memory: a scalar is one element of rank 1.
  if (shape.rank() == 0) return memory::desc({1}, dnnl_type(type), memory::dims{1});
  memory::dims strides(shape.rank(), 1);
  for (size_t i = shape.rank(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return memory::desc(dims_of(shape), dnnl_type(type), strides);
}

bool quantised(const TensorDesc& d) { return graph::is_int8(d.dtype); }

memory::data_type weight_type(const TensorDesc& src) {
  if (quantised(src)) return memory::data_type::s8;
  return src.dtype == DataType::kBF16 ? memory::data_type::bf16 : memory::data_type::f32;
}

bool isa_has_avx512(dnnl::cpu_isa isa) {
  const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (static_cast<unsigned>(isa) & core) == core;
}

bool isa_has_vnni(dnnl::cpu_isa isa) {
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
  const auto avx2 = static_cast<unsigned>(dnnl::cpu_isa::avx2_vnni);
  const auto bits = static_cast<unsigned>(isa);
  return (bits & avx512) == avx512 || (bits & avx2) == avx2;
}

float int8_weight_max(const graph::TensorDesc& src) {
  static const bool vnni = isa_has_vnni(dnnl::get_effective_cpu_isa());
  return !vnni && src.dtype == DataType::kU8 ? kInt8WeightMaxWithoutVnni : kInt8WeightMax;
}

bool isa_has_bf16(dnnl::cpu_isa isa) {
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<unsigned>(isa) & bf16) == bf16;
}

std::vector<EltwiseStep> eltwise_steps(Activation act, float relu6_max) {
  // The activations that are one oneDNN algorithm (alpha: swish's slope).
  static constexpr std::pair<Activation, EltwiseStep> kOneStep[] = {
      {Activation::kRelu, {dnnl::algorithm::eltwise_relu, 0.0f, 0.0f}},
      {Activation::kSigmoid, {dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f}},
      {Activation::kHardSwish, {dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f}},
      {Activation::kSilu, {dnnl::algorithm::eltwise_swish, 1.0f, 0.0f}},
      {Activation::kGelu, {dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f}},
      {Activation::kGeluTanh, {dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f}},
      {Activation::kTanh, {dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f}},
      {Activation::kSqrt, {dnnl::algorithm::eltwise_sqrt, 0.0f, 0.0f}},
  };
  switch (act) {
    case Activation::kNone:
      return {};
    case Activation::kRelu6:
      return {{dnnl::algorithm::eltwise_clip, 0.0f, relu6_max}};
    case Activation::kHardSigmoid:  // relu6(x + 3) / 6 = clip(x / 6 + 1 / 2, 0, 1)
      return {{dnnl::algorithm::eltwise_linear, static_cast<float>(graph::kHardSigmoidAlpha),
               static_cast<float>(graph::kHardSigmoidBeta)},
              {dnnl::algorithm::eltwise_clip, 0.0f, 1.0f}};
    case Activation::kRelu:
    case Activation::kSigmoid:
    case Activation::kHardSwish:
    case Activation::kSilu:
    case Activation::kGelu:
    case Activation::kGeluTanh:
    case Activation::kTanh:
    case Activation::kSqrt:
      for (const auto& [a, step] : kOneStep)
        if (a == act) return {step};
  }
  return {};
}

std::vector<EltwiseStep> fold_linear_steps(const std::vector<EltwiseStep>& steps) {
  std::vector<EltwiseStep> folded;
  for (const EltwiseStep& e : steps) {
    if (e.alg == dnnl::algorithm::eltwise_linear && !folded.empty() &&
        folded.back().alg == dnnl::algorithm::eltwise_linear) {
      EltwiseStep& last = folded.back();
      last.beta = e.alpha * last.beta + e.beta;
      last.alpha *= e.alpha;
    } else {
      folded.push_back(e);
    }
  }
  return folded;
}

void append_steps(dnnl::post_ops& ops, const std::vector<EltwiseStep>& steps) {
  for (const EltwiseStep& e : fold_linear_steps(steps)) ops.append_eltwise(1.0f, e.alg, e.alpha, e.beta);
}

void add_activation(dnnl::post_ops& ops, Activation act, float relu6_max) {
  append_steps(ops, eltwise_steps(act, relu6_max));
}

dnnl::primitive_attr make_attr(Activation act) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (act != Activation::kNone) {
    dnnl::post_ops ops;
    add_activation(ops, act);
    attr.set_post_ops(ops);
  }
  return attr;
}

dnnl::primitive_attr make_quantised_attr(Activation act, const Requantisation& r, float sum_scale,
                                         dnnl::memory::data_type sum_type) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(1 << 1, r.output_scales);  // per channel (dimension 1 of dst)
  if (act != Activation::kNone || sum_scale != 0.0f) {
    dnnl::post_ops ops;
    if (sum_scale != 0.0f) ops.append_sum(sum_scale, sum_type);
    if (act != Activation::kNone) add_activation(ops, act, r.relu6_max);
    attr.set_post_ops(ops);
  }
  return attr;
}

dnnl::primitive_attr rescale_attr(const TensorDesc& src, const TensorDesc& dst) {
  dnnl::primitive_attr attr = make_attr();
  const float factor = src.scale / dst.scale;
  if ((quantised(src) || quantised(dst)) && factor != 1.0f) attr.set_output_scales(0, {factor});
  return attr;
}

bool is_reference(const std::string& impl) {
  // oneDNN names its reference implementations "ref:any", "ref_int8:any", "gemm:ref", ...
  return impl.rfind("ref", 0) == 0 || impl.find(":ref") != std::string::npos;
}

Support implementation_support(const std::string& impl, const std::string& what) {
  if (is_reference(impl)) {
    return Support::reference(cat("oneDNN has only its slow reference kernel (", impl, ") for ",
                                  what));
  }
  return Support::native();
}

KernelDesc described(const std::string& impl, const std::string& what, size_t workspace,
                     std::shared_ptr<const KernelDesc::State> state) {
  KernelDesc desc(implementation_support(impl, what));
  desc.implementation = impl;
  desc.workspace_bytes = workspace;
  desc.state = std::move(state);
  return desc;
}

void foreign_desc(const KernelSpec& spec) {
  throw BackendError(cat("cpu: the kernel description given for op '", spec.name, "' (",
                         graph::to_string(spec.kind), ") was not made by the CPU backend's supports() "
                         "for it (create the kernel with the desc supports() answered)"));
}

size_t step_workspace(size_t scratchpad) {
  return (scratchpad + kAlignment - 1) / kAlignment * kAlignment;
}

ThreadScope::ThreadScope(int threads) : saved_(omp_get_max_threads()) {
  omp_set_num_threads(threads);
}
ThreadScope::~ThreadScope() { omp_set_num_threads(saved_); }

Packed allocate_packed(const DnnlContext& ctx, const memory::desc& desc) {
  std::shared_ptr<void> storage = host_allocate_constant(desc.get_size());
  return {memory(desc, ctx.engine, storage.get()), storage};
}

memory copy_vector(const dnnl::engine& engine, const std::vector<float>& data) {
  memory m({{static_cast<memory::dim>(data.size())}, memory::data_type::f32, memory::format_tag::x},
           engine);
  std::memcpy(m.get_data_handle(), data.data(), data.size() * sizeof(float));
  return m;
}

void add_weighted_step(DnnlKernel& kernel, DnnlContext& ctx, const KernelSpec& spec,
                       dnnl::primitive primitive, const memory::desc& w_user_f32,
                       const memory::desc& w_packed, size_t scratchpad, bool bias,
                       const Requantisation* quant, const QuantisedWeights* qw,
                       std::vector<DnnlKernel::ArgSpec> extra_args) {
  const memory::desc src = md(spec.srcs[0]);
  const memory::desc dst = md(spec.dsts[0]);
  DnnlKernel::StepSpec step{std::move(primitive),
                            {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}}};
  for (auto& a : extra_args) step.args.push_back(std::move(a));
  if (qw) {
    const size_t rank = w_user_f32.dims().size();
    const memory::desc w_user(w_user_f32.dims(), memory::data_type::s8,
                              rank == 5   ? memory::format_tag::goihw
                              : rank == 4 ? memory::format_tag::oihw
                                          : memory::format_tag::oi);
    step.add_constant(DNNL_ARG_WEIGHTS, pack(ctx, w_user, w_packed, qw->values));
    if (bias) step.constants.emplace(DNNL_ARG_BIAS, copy_vector(ctx.engine, quant->bias));
  } else {
    step.add_constant(DNNL_ARG_WEIGHTS, pack(ctx, w_user_f32, w_packed, spec.weights->weight));
    if (bias) step.constants.emplace(DNNL_ARG_BIAS, copy_vector(ctx.engine, spec.weights->bias));
  }
  kernel.add(std::move(step), scratchpad);
}

void DnnlKernel::add(StepSpec step, size_t scratchpad, std::string impl) {
  scratch_ = std::max(scratch_, step_workspace(scratchpad));
  specs_.push_back(std::move(step));
  impls_.push_back(std::move(impl));
}

void DnnlKernel::add_host(HostFunction fn, std::vector<int> slots, std::string impl) {
  StepSpec step(dnnl::primitive(), {}, {}, /*scratchpad=*/false);
  step.host = std::move(fn);
  step.host_slots = std::move(slots);
  add(std::move(step), 0, std::move(impl));
}

std::string DnnlKernel::add_host_f32(std::function<void(const float*, float*)> fn, std::string impl) {
  add_host([fn = std::move(fn)](const std::vector<void*>& data) {
    fn(static_cast<const float*>(data[0]), static_cast<float*>(data[1]));
  }, {0, dst_slot(0)}, impl);
  return impl;
}

void DnnlKernel::add_reorder(DnnlContext& ctx, const memory::desc& src, int src_slot,
                             const memory::desc& dst, int dst_slot_index, size_t zero_dst,
                             const dnnl::primitive_attr& attr) {
  dnnl::reorder::primitive_desc pd(ctx.engine, src, ctx.engine, dst, attr);
  add({dnnl::reorder(pd),
       {{DNNL_ARG_SRC, src_slot, src}, {DNNL_ARG_DST, dst_slot_index, dst}},
       {},
       true,
       zero_dst},
      scratch(pd));
}

void DnnlKernel::add_eltwise(DnnlContext& ctx, Activation act, const memory::desc& desc,
                             int src_slot, int dst_slot_index, float relu6_max) {
  add_eltwise_steps(ctx, eltwise_steps(act, relu6_max), desc, src_slot, dst_slot_index);
}

dnnl::eltwise_forward::primitive_desc eltwise_pd(const DnnlContext& ctx,
                                                 const std::vector<EltwiseStep>& all_steps,
                                                 const memory::desc& given) {
  // oneDNN 2.6's jit eltwise with post-ops on a 1-D tensor writes zeros (hard sigmoid, a linear
  // step and a clip, of 3 elements on AVX2); the same elements described as 1 x n are right.
  const memory::desc desc = given.dims().size() == 1 ? given.reshape({1, given.dims()[0]}) : given;
  // The first step is the primitive, the others its post-ops.
  const std::vector<EltwiseStep> steps = fold_linear_steps(all_steps);
  dnnl::primitive_attr attr = make_attr();
  dnnl::post_ops ops;
  for (size_t i = 1; i < steps.size(); ++i) ops.append_eltwise(1.0f, steps[i].alg, steps[i].alpha, steps[i].beta);
  attr.set_post_ops(ops);
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, steps.at(0).alg, desc,
                                steps[0].alpha, steps[0].beta);
  return {d, attr, ctx.engine};
}

void DnnlKernel::add_eltwise_steps(DnnlContext& ctx, const std::vector<EltwiseStep>& steps,
                                   const memory::desc& desc, int src_slot, int dst_slot_index) {
  if (steps.empty()) return;
  add_eltwise(eltwise_pd(ctx, steps, desc), src_slot, dst_slot_index);
}

void DnnlKernel::add_eltwise(const dnnl::eltwise_forward::primitive_desc& pd, int src_slot,
                             int dst_slot_index) {
  add({dnnl::eltwise_forward(pd),
       {{DNNL_ARG_SRC, src_slot, pd.src_desc()}, {DNNL_ARG_DST, dst_slot_index, pd.dst_desc()}}},
      scratch(pd), pd.impl_info_str());
}

void DnnlKernel::bind(const std::vector<TensorRef>& srcs, const std::vector<TensorRef>& dsts,
                      void* workspace) {
  steps_.clear();
  zero_.clear();
  for (const StepSpec& spec : specs_) {
    Step step{spec.primitive, spec.constants, {}};
    if (spec.host) {
      std::vector<void*> data;
      for (int slot : spec.host_slots) data.push_back(slot_data(slot, srcs, dsts, workspace));
      step.host = [fn = spec.host, data = std::move(data)] { fn(data); };
    }
    for (const ArgSpec& a : spec.args) {
      step.args.emplace(a.arg, memory(a.desc, engine_, slot_data(a.slot, srcs, dsts, workspace)));
    }
    if (spec.uses_scratchpad && scratch_ > 0) {
      const memory::desc scratchpad({static_cast<memory::dim>(scratch_)}, memory::data_type::u8,
                                    memory::format_tag::x);
      step.args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, engine_, workspace));
    }
    if (spec.zero_dst != SIZE_MAX) {
      const TensorRef& d = dsts.at(spec.zero_dst);
      zero_.push_back({steps_.size(), d.data, static_cast<size_t>(d.desc.bytes())});
    }
    steps_.push_back(std::move(step));
  }
}

void* DnnlKernel::slot_data(int slot, const std::vector<TensorRef>& srcs,
                            const std::vector<TensorRef>& dsts, void* workspace) const {
  return slot == kTemp ? static_cast<char*>(workspace) + scratch_
         : slot >= 0   ? srcs.at(static_cast<size_t>(slot)).data
                       : dsts.at(static_cast<size_t>(-1 - slot)).data;
}

void DnnlKernel::launch(Stream& stream) {
  auto& s = static_cast<CpuStream&>(stream);
  s.enqueue([this, &s] {
    s.place(threads_);
    run(s.dnnl_stream());
  });
}

void DnnlKernel::run(dnnl::stream& stream) {
  omp_set_num_threads(threads_);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (const Zero& z : zero_)
      if (z.before_step == i) std::memset(z.data, 0, z.bytes);
    if (steps_[i].host) {
      stream.wait();  // earlier primitives first
      steps_[i].host();
    } else {
      steps_[i].primitive.execute(stream, steps_[i].args);
    }
  }
  stream.wait();
}

}  // namespace stagecraft::executor::cpu
