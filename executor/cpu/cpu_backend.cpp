// The CPU backend: oneDNN primitives for every op kind, worker-thread streams, user scratchpads.
#include "executor/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "common/strings.h"
#include "executor/cpu/cpu_stream.h"

namespace stagecraft::executor {

namespace {

using cpu::CpuEvent;
using cpu::CpuStream;
using dnnl::memory;
using graph::Activation;
using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::TensorDesc;

constexpr size_t kAlignment = 64;
constexpr int kPrimitiveCacheCapacity = 4096;  // stage profiling creates many primitives
constexpr float kRelu6Max = 6.0f;

// ---- Descriptors ---------------------------------------------------------------------------------

memory::data_type dnnl_type(DataType type) {
  switch (type) {
    case DataType::kF32:
      return memory::data_type::f32;
    case DataType::kF16:
      return memory::data_type::f16;
    case DataType::kI8:
      return memory::data_type::s8;
    case DataType::kU8:
      return memory::data_type::u8;
    case DataType::kI32:
      return memory::data_type::s32;
  }
  return memory::data_type::undef;
}

memory::format_tag dnnl_tag(Layout layout) {
  switch (layout) {
    case Layout::kNCHW:
      return memory::format_tag::nchw;
    case Layout::kNHWC:
      return memory::format_tag::nhwc;
    case Layout::kNChw8c:
      return memory::format_tag::nChw8c;
    case Layout::kNChw16c:
      return memory::format_tag::nChw16c;
    case Layout::kNC:
      return memory::format_tag::nc;
    case Layout::kNCHWVectC:
      return memory::format_tag::undef;
  }
  return memory::format_tag::undef;
}

memory::dims dims_of(const graph::Shape& shape) {
  return memory::dims(shape.dims().begin(), shape.dims().end());
}

memory::desc md(const TensorDesc& d) { return memory::desc(dims_of(d.shape), dnnl_type(d.dtype), dnnl_tag(d.layout)); }

// Logical NCHW dims of a rank-4 or the plain nchw view of a rank-2 tensor (for reorders).
memory::desc plain_md(const graph::Shape& shape, DataType type) {
  if (shape.rank() == 2) return memory::desc(dims_of(shape), dnnl_type(type), memory::format_tag::nc);
  return memory::desc(dims_of(shape), dnnl_type(type), memory::format_tag::nchw);
}

void add_activation(dnnl::post_ops& ops, Activation act) {
  switch (act) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      return;
    case Activation::kRelu6:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, kRelu6Max);
      return;
    case Activation::kSigmoid:
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
      return;
  }
}

dnnl::primitive_attr make_attr(Activation act = Activation::kNone) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (act != Activation::kNone) {
    dnnl::post_ops ops;
    add_activation(ops, act);
    attr.set_post_ops(ops);
  }
  return attr;
}

bool quantised(const TensorDesc& d) { return graph::is_int8(d.dtype); }

// Symmetric per-output-channel s8 weights: channel oc (a contiguous run of weights, oc-major as
// in oihw, goihw and oi) gets scale max |w| / 127.
struct QuantisedWeights {
  std::vector<int8_t> values;
  std::vector<float> scales;  // per output channel
};

QuantisedWeights quantise_weights(const std::vector<float>& w, int64_t out_channels) {
  constexpr float kI8Max = 127.0f;
  QuantisedWeights q;
  q.values.resize(w.size());
  q.scales.resize(static_cast<size_t>(out_channels));
  const size_t per = w.size() / static_cast<size_t>(out_channels);
  for (size_t oc = 0; oc < q.scales.size(); ++oc) {
    float m = 0;
    for (size_t i = 0; i < per; ++i) m = std::max(m, std::fabs(w[oc * per + i]));
    const float scale = m > 0 ? m / kI8Max : 1.0f;
    q.scales[oc] = scale;
    for (size_t i = 0; i < per; ++i) {
      q.values[oc * per + i] =
          static_cast<int8_t>(std::clamp(std::nearbyint(w[oc * per + i] / scale), -kI8Max, kI8Max));
    }
  }
  return q;
}

// The epilogue of a quantised conv or linear layer: dst = oscale[oc] * (acc + bias_q[oc]), with
// oscale = src scale * weight scale / dst scale (1 for an f32 dst) and the f32 bias divided by
// the accumulator's scale; the activation then applies in the destination's units (ReLU6 clips
// at 6 / dst scale).
struct Requantisation {
  std::vector<float> output_scales;
  std::vector<float> bias;
  float relu6_max = kRelu6Max;
};

Requantisation requantisation(const KernelSpec& spec, const std::vector<float>& weight_scales,
                              const std::vector<float>& bias) {
  const TensorDesc& src = spec.srcs[0];
  const TensorDesc& dst = spec.dsts[0];
  Requantisation r;
  r.output_scales.resize(weight_scales.size());
  for (size_t oc = 0; oc < weight_scales.size(); ++oc) {
    const float dst_scale = !quantised(dst)                    ? 1.0f
                            : spec.dst_channel_scales.empty() ? dst.scale
                                                               : spec.dst_channel_scales[oc];
    r.output_scales[oc] = src.scale * weight_scales[oc] / dst_scale;
    if (!bias.empty()) r.bias.push_back(bias[oc] / (src.scale * weight_scales[oc]));
  }
  if (quantised(dst)) r.relu6_max = kRelu6Max / dst.scale;
  return r;
}

// The quantised weights and the epilogue of a conv or linear layer with `out` output channels.
std::pair<QuantisedWeights, Requantisation> quantised_parameters(const KernelSpec& spec, int64_t out,
                                                                 bool bias) {
  QuantisedWeights qw = quantise_weights(spec.weights->weight, out);
  Requantisation quant = requantisation(spec, qw.scales, bias ? spec.weights->bias : std::vector<float>{});
  return {std::move(qw), std::move(quant)};
}

dnnl::primitive_attr make_quantised_attr(Activation act, const Requantisation& r) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(1 << 1, r.output_scales);  // per channel (dimension 1 of dst)
  if (act != Activation::kNone) {
    dnnl::post_ops ops;
    if (act == Activation::kRelu6) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, r.relu6_max);
    } else {
      add_activation(ops, act);
    }
    attr.set_post_ops(ops);
  }
  return attr;
}

// Reorder attributes converting between element types and scales (real values kept).
dnnl::primitive_attr rescale_attr(const TensorDesc& src, const TensorDesc& dst) {
  dnnl::primitive_attr attr = make_attr();
  const float factor = src.scale / dst.scale;
  if ((quantised(src) || quantised(dst)) && factor != 1.0f) attr.set_output_scales(0, {factor});
  return attr;
}

// Sets the OpenMP thread count of the calling thread for the scope (primitive creation reads it).
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadScope() { omp_set_num_threads(saved_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int saved_;
};

// ---- Memory ----------------------------------------------------------------------------------

class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : bytes_(bytes) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = std::aligned_alloc(kAlignment, rounded);
    if (data_ == nullptr) throw BackendError(cat("cpu: cannot allocate ", byte_size(static_cast<double>(bytes))));
    std::memset(data_, 0, rounded);
  }
  ~HostBuffer() override { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// ---- Kernels ---------------------------------------------------------------------------------

// One primitive execution: the primitive and which memory goes to which argument.
struct Step {
  dnnl::primitive primitive;
  std::unordered_map<int, memory> args;
};

// A kernel made of steps run in order on the stream's worker. Arguments are described by
// (dnnl arg, slot) pairs resolved at bind time: slot >= 0 is src index, -1 - i is dst index i.
class DnnlKernel : public Kernel {
 public:
  struct ArgSpec {
    int arg;
    int slot;             // >= 0: source slot; < 0: destination slot -1 - slot; kTemp: temp
    memory::desc desc;    // how the kernel sees the tensor (may be a sub-memory)
  };
  static constexpr int kTemp = std::numeric_limits<int>::min();  // the kernel's own temporary
  struct StepSpec {
    dnnl::primitive primitive;
    std::vector<ArgSpec> args;
    std::unordered_map<int, memory> constants;  // packed weights, bias, statistics
    bool uses_scratchpad = false;
    size_t zero_dst = SIZE_MAX;  // when set: zero this destination slot before the step
  };

  DnnlKernel(dnnl::engine engine, int threads) : engine_(std::move(engine)), threads_(threads) {}

  void set_implementation(std::string impl) { impl_ = std::move(impl); }

  void add(StepSpec step, size_t scratchpad) {
    scratch_ = std::max(scratch_, (scratchpad + kAlignment - 1) / kAlignment * kAlignment);
    specs_.push_back(std::move(step));
  }

  /// Reserves a temporary tensor inside the workspace (after the scratchpad).
  void reserve_temp(size_t bytes) { temp_ = std::max(temp_, bytes); }

  size_t workspace_bytes() const override { return scratch_ + temp_; }
  std::string implementation() const override { return impl_; }

  void bind(const std::vector<TensorRef>& srcs, const std::vector<TensorRef>& dsts,
            void* workspace) override {
    steps_.clear();
    zero_.clear();
    for (const StepSpec& spec : specs_) {
      Step step{spec.primitive, spec.constants};
      for (const ArgSpec& a : spec.args) {
        void* data = a.slot == kTemp ? static_cast<char*>(workspace) + scratch_
                     : a.slot >= 0   ? srcs.at(a.slot).data
                                     : dsts.at(-1 - a.slot).data;
        step.args.emplace(a.arg, memory(a.desc, engine_, data));
      }
      if (spec.uses_scratchpad && scratch_ > 0) {
        const memory::desc scratch({static_cast<memory::dim>(scratch_)}, memory::data_type::u8,
                                   memory::format_tag::x);
        step.args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch, engine_, workspace));
      }
      if (spec.zero_dst != SIZE_MAX) {
        const TensorRef& d = dsts.at(spec.zero_dst);
        zero_.push_back({steps_.size(), d.data, static_cast<size_t>(d.desc.bytes())});
      }
      steps_.push_back(std::move(step));
    }
  }

  void launch(Stream& stream) override {
    auto& s = static_cast<CpuStream&>(stream);
    s.enqueue([this, &s] {
      s.place(threads_);
      run(s.dnnl_stream());
    });
  }

 private:
  struct Zero {
    size_t before_step;
    void* data;
    size_t bytes;
  };

  void run(dnnl::stream& stream) {
    omp_set_num_threads(threads_);
    for (size_t i = 0; i < steps_.size(); ++i) {
      for (const Zero& z : zero_)
        if (z.before_step == i) std::memset(z.data, 0, z.bytes);
      steps_[i].primitive.execute(stream, steps_[i].args);
    }
    stream.wait();
  }

  dnnl::engine engine_;
  int threads_;
  std::string impl_;
  size_t scratch_ = 0;  // scratchpad bytes (aligned); the temporary follows it
  size_t temp_ = 0;
  std::vector<StepSpec> specs_;
  std::vector<Step> steps_;
  std::vector<Zero> zero_;
};

constexpr int dst_slot(int i) { return -1 - i; }

// Copies `data` into a new memory of `desc` (plain user layout), reordered into `packed`.
template <class T>
memory pack(const dnnl::engine& engine, dnnl::stream& stream, const memory::desc& user,
            const memory::desc& packed, const std::vector<T>& data) {
  memory src(user, engine, const_cast<T*>(data.data()));
  memory dst(packed, engine);
  dnnl::reorder(src, dst).execute(stream, src, dst);
  stream.wait();
  return dst;
}

memory copy_vector(const dnnl::engine& engine, const std::vector<float>& data) {
  memory m({{static_cast<memory::dim>(data.size())}, memory::data_type::f32, memory::format_tag::x},
           engine);
  std::memcpy(m.get_data_handle(), data.data(), data.size() * sizeof(float));
  return m;
}

// This machine's CPU advertises AMX, and the AMX int8 kernels of oneDNN 2.6.3 (the inner
// product of a quantised linear layer, for one) die with SIGILL even after Linux granted the tile
// registers (arch_prctl ARCH_REQ_XCOMP_PERM succeeds). Cap oneDNN below AMX unless the user chose
// an ISA with ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA.
void cap_isa_below_amx() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA")) return;
    try {
      dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16);
    } catch (const dnnl::error&) {
      // Too late (a primitive exists already) or not x86: nothing to cap.
    }
  });
}

class CpuBackend : public Backend {
 public:
  CpuBackend() : engine_(dnnl::engine::kind::cpu, 0), setup_stream_(engine_) {
    cap_isa_below_amx();
    dnnl::set_primitive_cache_capacity(kPrimitiveCacheCapacity);
  }

  std::string name() const override { return "cpu"; }

  std::string device_fingerprint() const override {
    const dnnl::version_t* v = dnnl::version();
    return cat("cpu:", cpu_model(), ":", parallelism(), "threads:onednn-", v->major, ".", v->minor,
               ".", v->patch, ":isa", static_cast<int>(dnnl::get_effective_cpu_isa()));
  }

  int parallelism() const override { return omp_get_max_threads(); }

  Layout preferred_layout(DataType compute) const override {
    // oneDNN 2.6 has only its reference int8 convolution for blocked activations (~100x slower).
    if (graph::is_int8(compute)) return Layout::kNHWC;
    return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? Layout::kNChw16c
                                                                        : Layout::kNChw8c;
  }

  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    return std::make_unique<HostBuffer>(bytes);
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  std::unique_ptr<Stream> create_stream() override {
    return std::make_unique<CpuStream>(engine_, streams_created_++);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }

  std::string supports(const KernelSpec& spec) const override {
    bool any_int8 = false;
    for (const auto* list : {&spec.srcs, &spec.dsts}) {
      for (const TensorDesc& d : *list) {
        if (d.dtype != DataType::kF32 && !quantised(d)) {
          return cat("the CPU backend runs f32 and quantised u8/i8 tensors (got ",
                     graph::to_string(d.dtype), "); f16 runs on the CUDA backend");
        }
        any_int8 = any_int8 || quantised(d);
        if (dnnl_tag(d.layout) == memory::format_tag::undef) {
          return cat("layout ", graph::to_string(d.layout), " is not available on the CPU");
        }
      }
    }
    if (any_int8) {
      if (const std::string why = quantised_reason(spec); !why.empty()) return why;
    }
    switch (spec.kind) {
      case OpKind::kAvgPool: {
        const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
        if (spec.srcs[0].layout != spec.dsts[0].layout) {
          return "sources and destination must have the same layout";
        }
        if (a.ceil_mode && a.count_include_pad &&
            extra_right_pad(spec.srcs[0].shape, spec.dsts[0].shape, a.kernel, a.stride,
                            a.padding) != std::pair<int64_t, int64_t>{0, 0}) {
          return "average pooling with ceil_mode and count_include_pad whose last window passes "
                 "the padding is not supported";
        }
        break;
      }
      case OpKind::kConv2d:
        // Mixed layouts run only where oneDNN has an optimised kernel for them (its reference
        // kernel was 100x slower for the first NCHW-in, NHWC-out convolution of squeezenet).
        // Quantised convolutions likewise: oneDNN 2.6 has only the reference int8 kernel for
        // blocked activations.
        if ((spec.srcs[0].layout != spec.dsts[0].layout || quantised(spec.srcs[0])) &&
            weights_reason(spec).empty()) {
          std::string impl;
          try {
            impl = conv_pd(spec).impl_info_str();
          } catch (const dnnl::error& e) {
            return cat("oneDNN has no convolution kernel for these layouts (", e.what(), ")");
          }
          if (impl.rfind("ref", 0) == 0) {
            return cat("oneDNN has only its slow reference kernel (", impl, ") for a ",
                       graph::to_string(spec.srcs[0].dtype), " convolution reading ",
                       graph::to_string(spec.srcs[0].layout), " and writing ",
                       graph::to_string(spec.dsts[0].layout),
                       quantised(spec.srcs[0]) ? "; quantised convolutions run in nhwc"
                                               : "; convert the input first");
          }
        }
        break;
      case OpKind::kPad:
        if (std::get<graph::PadAttrs>(spec.attrs).value != 0) {
          return "padding with a value other than 0 is not supported";
        }
        break;
      case OpKind::kRelu:
      case OpKind::kRelu6:
      case OpKind::kSigmoid:
      case OpKind::kScale:
      case OpKind::kBatchNorm:
      case OpKind::kMaxPool:
      case OpKind::kGlobalAvgPool:
      case OpKind::kSoftmax:
      case OpKind::kAdd:
        for (const auto& src : spec.srcs) {
          if (src.layout != spec.dsts[0].layout) {
            return "sources and destination must have the same layout";
          }
        }
        break;
      default:
        break;
    }
    return weights_reason(spec);
  }

  std::unique_ptr<Kernel> create_kernel(const KernelSpec& spec) override {
    if (const std::string why = supports(spec); !why.empty()) throw unsupported("cpu", spec, why);
    const ThreadScope scope(std::max(1, spec.threads));
    try {
      return build(spec);
    } catch (const dnnl::error& e) {
      throw BackendError(cat("cpu cannot run op '", spec.name, "' (", graph::to_string(spec.kind),
                             "): oneDNN: ", e.what()));
    }
  }

  std::unique_ptr<Kernel> create_copy(const TensorDesc& src, const TensorDesc& dst) override {
    if (src.shape != dst.shape) {
      throw BackendError(cat("cpu: a copy needs equal shapes (", src.describe(), " -> ",
                             dst.describe(), ")"));
    }
    // Created for the one thread it runs on: a primitive sizes its parallel regions when it is
    // created, and a copy created for two threads but run by a worker pinned to one core put a
    // two-thread OpenMP team on that core, spinning at its barriers (a 268k-element quantising
    // copy took 12.8 ms instead of 0.2 ms when the profiler timed it).
    const ThreadScope scope(1);
    auto kernel = std::make_unique<DnnlKernel>(engine_, 1);
    try {
      add_reorder(*kernel, md(src), 0, md(dst), dst_slot(0), SIZE_MAX, rescale_attr(src, dst));
    } catch (const dnnl::error& e) {
      throw BackendError(cat("cpu cannot convert ", src.describe(), " to ", dst.describe(),
                             ": oneDNN: ", e.what()));
    }
    kernel->set_implementation("reorder");
    return kernel;
  }

 private:
  static std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0) {
        const auto colon = line.find(':');
        return colon == std::string::npos ? line : line.substr(colon + 2);
      }
    }
    return "unknown";
  }

  // Right/bottom padding oneDNN needs beyond the op's own for this output size (ceil mode).
  static std::pair<int64_t, int64_t> extra_right_pad(const graph::Shape& in, const graph::Shape& out,
                                                     const graph::Hw& k, const graph::Hw& s,
                                                     const graph::Pads& p) {
    const int64_t need_b = (out[2] - 1) * s.h + k.h - in[2] - p.top;
    const int64_t need_r = (out[3] - 1) * s.w + k.w - in[3] - p.left;
    return {std::max<int64_t>(0, need_b - p.bottom), std::max<int64_t>(0, need_r - p.right)};
  }

  template <class Pd>
  size_t scratch(const Pd& pd) const {
    return pd.scratchpad_desc().get_size();
  }

  void add_reorder(DnnlKernel& k, const memory::desc& src, int src_slot, const memory::desc& dst,
                   int dst_slot_index, size_t zero_dst = SIZE_MAX,
                   const dnnl::primitive_attr& attr = make_attr()) {
    dnnl::reorder::primitive_desc pd(engine_, src, engine_, dst, attr);
    DnnlKernel::StepSpec step{dnnl::reorder(pd),
                              {{DNNL_ARG_SRC, src_slot, src}, {DNNL_ARG_DST, dst_slot_index, dst}},
                              {},
                              true,
                              zero_dst};
    k.add(std::move(step), scratch(pd));
  }

  void add_eltwise(DnnlKernel& k, Activation act, const memory::desc& desc, int src_slot,
                   int dst_slot_index, float relu6_max = kRelu6Max) {
    dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
    float alpha = 0, beta = 0;
    if (act == Activation::kRelu6) {
      alg = dnnl::algorithm::eltwise_clip;
      beta = relu6_max;
    } else if (act == Activation::kSigmoid) {
      alg = dnnl::algorithm::eltwise_logistic;
    }
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, desc, alpha, beta);
    dnnl::eltwise_forward::primitive_desc pd(d, make_attr(), engine_);
    k.add({dnnl::eltwise_forward(pd),
           {{DNNL_ARG_SRC, src_slot, desc}, {DNNL_ARG_DST, dst_slot_index, desc}}, {}, true},
          scratch(pd));
  }

  std::unique_ptr<Kernel> build(const KernelSpec& spec) {
    auto kernel = std::make_unique<DnnlKernel>(engine_, std::max(1, spec.threads));
    std::string impl;
    switch (spec.kind) {
      case OpKind::kConv2d:
        impl = build_conv(*kernel, spec);
        break;
      case OpKind::kLinear:
        impl = build_linear(*kernel, spec);
        break;
      case OpKind::kBatchNorm: {
        const auto& a = std::get<graph::BatchNormAttrs>(spec.attrs);
        const memory::desc desc = md(spec.srcs[0]);
        dnnl::batch_normalization_forward::desc d(
            dnnl::prop_kind::forward_inference, desc, static_cast<float>(a.eps),
            dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                dnnl::normalization_flags::use_shift);
        dnnl::batch_normalization_forward::primitive_desc pd(d, make_attr(), engine_);
        const graph::OpWeights& w = *spec.weights;
        kernel->add({dnnl::batch_normalization_forward(pd),
                     {{DNNL_ARG_SRC, 0, desc}, {DNNL_ARG_DST, dst_slot(0), desc}},
                     {{DNNL_ARG_MEAN, copy_vector(engine_, w.mean)},
                      {DNNL_ARG_VARIANCE, copy_vector(engine_, w.var)},
                      {DNNL_ARG_SCALE, copy_vector(engine_, w.gamma)},
                      {DNNL_ARG_SHIFT, copy_vector(engine_, w.beta)}},
                     true},
                    scratch(pd));
        impl = pd.impl_info_str();
        break;
      }
      case OpKind::kRelu:
      case OpKind::kRelu6:
      case OpKind::kSigmoid:
        add_eltwise(*kernel, graph::activation_of_kind(spec.kind), md(spec.srcs[0]), 0, dst_slot(0));
        impl = "eltwise";
        break;
      case OpKind::kScale: {
        const memory::desc desc = md(spec.srcs[0]);
        const float factor = static_cast<float>(std::get<graph::ScaleAttrs>(spec.attrs).factor);
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::eltwise_linear, desc, factor, 0.0f);
        dnnl::eltwise_forward::primitive_desc pd(d, make_attr(), engine_);
        kernel->add({dnnl::eltwise_forward(pd),
                     {{DNNL_ARG_SRC, 0, desc}, {DNNL_ARG_DST, dst_slot(0), desc}}, {}, true},
                    scratch(pd));
        impl = pd.impl_info_str();
        break;
      }
      case OpKind::kMaxPool: {
        const auto& a = std::get<graph::MaxPoolAttrs>(spec.attrs);
        impl = build_pool(*kernel, spec, dnnl::algorithm::pooling_max, a.kernel, a.stride, a.padding);
        break;
      }
      case OpKind::kAvgPool: {
        const auto& a = std::get<graph::AvgPoolAttrs>(spec.attrs);
        impl = build_pool(*kernel, spec,
                          a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                              : dnnl::algorithm::pooling_avg_exclude_padding,
                          a.kernel, a.stride, a.padding);
        break;
      }
      case OpKind::kGlobalAvgPool: {
        const graph::Shape& s = spec.srcs[0].shape;
        impl = build_pool(*kernel, spec, dnnl::algorithm::pooling_avg_exclude_padding,
                          graph::Hw{s[2], s[3]}, graph::Hw{1, 1}, graph::Pads{});
        break;
      }
      case OpKind::kAdd:
        impl = build_add(*kernel, spec);
        break;
      case OpKind::kConcat: {
        std::vector<memory::desc> srcs;
        for (const auto& d : spec.srcs) srcs.push_back(md(d));
        const memory::desc dst = md(spec.dsts[0]);
        dnnl::concat::primitive_desc pd(dst, 1, srcs, engine_, make_attr());
        DnnlKernel::StepSpec step{dnnl::concat(pd), {{DNNL_ARG_DST, dst_slot(0), dst}}, {}, true};
        for (size_t i = 0; i < srcs.size(); ++i) {
          step.args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), static_cast<int>(i),
                               srcs[i]});
        }
        kernel->add(std::move(step), scratch(pd));
        impl = pd.impl_info_str();
        break;
      }
      case OpKind::kSplit:
      case OpKind::kSlice: {
        // Each output is a reorder from a channel sub-memory of the source. Blocked layouts only
        // allow sub-memories on block boundaries: otherwise go through a plain copy first.
        const graph::TensorDesc& in = spec.srcs[0];
        int64_t begin = spec.kind == OpKind::kSlice ? std::get<graph::SliceAttrs>(spec.attrs).begin : 0;
        const int64_t block = graph::channel_block(in.layout);
        bool aligned = true;
        for (int64_t c0 = begin; const auto& d : spec.dsts) {
          aligned = aligned && (block == 0 || (c0 % block == 0 && d.shape[1] % block == 0));
          c0 += d.shape[1];
        }
        memory::desc src = md(in);
        int src_slot = 0;
        if (!aligned) {
          const memory::desc plain = plain_md(in.shape, in.dtype);
          kernel->reserve_temp(plain.get_size());
          add_reorder(*kernel, src, 0, plain, DnnlKernel::kTemp);
          src = plain;
          src_slot = DnnlKernel::kTemp;
        }
        for (size_t i = 0; i < spec.dsts.size(); ++i) {
          const graph::Shape& s = spec.dsts[i].shape;
          const memory::desc sub = src.submemory_desc(dims_of(s), {0, begin, 0, 0});
          add_reorder(*kernel, sub, src_slot, md(spec.dsts[i]), dst_slot(static_cast<int>(i)));
          begin += s[1];
        }
        impl = aligned ? "reorder" : "reorder via nchw";
        break;
      }
      case OpKind::kIdentity:
        add_reorder(*kernel, md(spec.srcs[0]), 0, md(spec.dsts[0]), dst_slot(0), SIZE_MAX,
                    rescale_attr(spec.srcs[0], spec.dsts[0]));
        impl = "reorder";
        break;
      case OpKind::kPad:
        impl = build_pad(*kernel, spec);
        break;
      case OpKind::kFlatten: {
        // Reorder into the plain nchw order, which is the N×(C·H·W) matrix.
        const graph::Shape& s = spec.srcs[0].shape;
        add_reorder(*kernel, md(spec.srcs[0]), 0, plain_md(s, spec.srcs[0].dtype), dst_slot(0));
        impl = "reorder";
        break;
      }
      case OpKind::kSoftmax: {
        const memory::desc desc = md(spec.srcs[0]);
        dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, desc, 1);
        dnnl::softmax_forward::primitive_desc pd(d, make_attr(), engine_);
        kernel->add({dnnl::softmax_forward(pd),
                     {{DNNL_ARG_SRC, 0, desc}, {DNNL_ARG_DST, dst_slot(0), desc}}, {}, true},
                    scratch(pd));
        impl = pd.impl_info_str();
        break;
      }
    }
    kernel->set_implementation(std::move(impl));
    return kernel;
  }

  // The oneDNN primitive descriptor of a convolution (weights in the layout oneDNN prefers). A
  // quantised one takes its requantisation (only the number of scales matters for `supports`).
  dnnl::convolution_forward::primitive_desc conv_pd(const KernelSpec& spec,
                                                    const Requantisation* quant = nullptr) const {
    const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
    const bool int8 = quantised(spec.srcs[0]);
    const memory::desc src = md(spec.srcs[0]);
    const memory::desc dst = md(spec.dsts[0]);
    const memory::desc w_any(conv_weight_dims(a), int8 ? memory::data_type::s8 : memory::data_type::f32,
                             memory::format_tag::any);
    const memory::desc b_md({a.out_channels}, memory::data_type::f32, memory::format_tag::x);
    const memory::dims strides{a.stride.h, a.stride.w};
    const memory::dims dilates{a.dilation.h - 1, a.dilation.w - 1};
    const memory::dims pad_l{a.padding.top, a.padding.left};
    const memory::dims pad_r{a.padding.bottom, a.padding.right};
    dnnl::convolution_forward::desc d =
        a.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                 dnnl::algorithm::convolution_direct, src, w_any,
                                                 b_md, dst, strides, dilates, pad_l, pad_r)
               : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                 dnnl::algorithm::convolution_direct, src, w_any,
                                                 dst, strides, dilates, pad_l, pad_r);
    if (!int8) return dnnl::convolution_forward::primitive_desc(d, make_attr(a.activation), engine_);
    Requantisation unit;
    if (!quant) unit.output_scales.assign(static_cast<size_t>(a.out_channels), 1.0f);
    return dnnl::convolution_forward::primitive_desc(
        d, make_quantised_attr(a.activation, quant ? *quant : unit), engine_);
  }

  static memory::dims conv_weight_dims(const graph::Conv2dAttrs& a) {
    return a.groups > 1 ? memory::dims{a.groups, a.out_channels / a.groups,
                                       a.in_channels / a.groups, a.kernel.h, a.kernel.w}
                        : memory::dims{a.out_channels, a.in_channels, a.kernel.h, a.kernel.w};
  }

  // Weights (and bias) as the kernel uses them: f32 as given, or quantised per output channel
  // with the bias rescaled into the accumulator's units.
  void add_weighted(DnnlKernel& k, const KernelSpec& spec, dnnl::primitive primitive,
                    const memory::desc& w_user_f32, const memory::desc& w_packed, size_t scratchpad,
                    bool bias, const Requantisation* quant, const QuantisedWeights* qw) {
    const memory::desc src = md(spec.srcs[0]);
    const memory::desc dst = md(spec.dsts[0]);
    DnnlKernel::StepSpec step{std::move(primitive),
                              {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}},
                              {},
                              true};
    if (qw) {
      const memory::desc w_user(w_user_f32.dims(), memory::data_type::s8,
                                w_user_f32.dims().size() == 5 ? memory::format_tag::goihw
                                : w_user_f32.dims().size() == 4 ? memory::format_tag::oihw
                                                                 : memory::format_tag::oi);
      step.constants.emplace(DNNL_ARG_WEIGHTS, pack(engine_, setup_stream_, w_user, w_packed, qw->values));
      if (bias) step.constants.emplace(DNNL_ARG_BIAS, copy_vector(engine_, quant->bias));
    } else {
      step.constants.emplace(DNNL_ARG_WEIGHTS,
                             pack(engine_, setup_stream_, w_user_f32, w_packed, spec.weights->weight));
      if (bias) step.constants.emplace(DNNL_ARG_BIAS, copy_vector(engine_, spec.weights->bias));
    }
    k.add(std::move(step), scratchpad);
  }

  std::string build_conv(DnnlKernel& k, const KernelSpec& spec) {
    const auto& a = std::get<graph::Conv2dAttrs>(spec.attrs);
    const memory::desc w_user(conv_weight_dims(a), memory::data_type::f32,
                              a.groups > 1 ? memory::format_tag::goihw : memory::format_tag::oihw);
    if (!quantised(spec.srcs[0])) {
      const dnnl::convolution_forward::primitive_desc pd = conv_pd(spec);
      add_weighted(k, spec, dnnl::convolution_forward(pd), w_user, pd.weights_desc(), scratch(pd),
                   a.bias, nullptr, nullptr);
      return pd.impl_info_str();
    }
    const auto [qw, quant] = quantised_parameters(spec, a.out_channels, a.bias);
    const dnnl::convolution_forward::primitive_desc pd = conv_pd(spec, &quant);
    add_weighted(k, spec, dnnl::convolution_forward(pd), w_user, pd.weights_desc(), scratch(pd),
                 a.bias, &quant, &qw);
    return pd.impl_info_str();
  }

  std::string build_linear(DnnlKernel& k, const KernelSpec& spec) {
    const auto& a = std::get<graph::LinearAttrs>(spec.attrs);
    const bool int8 = quantised(spec.srcs[0]);
    const memory::desc src = md(spec.srcs[0]);
    const memory::desc dst = md(spec.dsts[0]);
    const memory::dims wdims{a.out_features, a.in_features};
    const memory::desc w_any(wdims, int8 ? memory::data_type::s8 : memory::data_type::f32,
                             memory::format_tag::any);
    const memory::desc w_user(wdims, memory::data_type::f32, memory::format_tag::oi);
    const memory::desc b_md({a.out_features}, memory::data_type::f32, memory::format_tag::x);
    dnnl::inner_product_forward::desc d =
        a.bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src, w_any,
                                                   b_md, dst)
               : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src, w_any,
                                                   dst);
    if (!int8) {
      dnnl::inner_product_forward::primitive_desc pd(d, make_attr(a.activation), engine_);
      add_weighted(k, spec, dnnl::inner_product_forward(pd), w_user, pd.weights_desc(), scratch(pd),
                   a.bias, nullptr, nullptr);
      return pd.impl_info_str();
    }
    const auto [qw, quant] = quantised_parameters(spec, a.out_features, a.bias);
    dnnl::inner_product_forward::primitive_desc pd(d, make_quantised_attr(a.activation, quant),
                                                   engine_);
    add_weighted(k, spec, dnnl::inner_product_forward(pd), w_user, pd.weights_desc(), scratch(pd),
                 a.bias, &quant, &qw);
    return pd.impl_info_str();
  }

  std::string build_pool(DnnlKernel& k, const KernelSpec& spec, dnnl::algorithm alg,
                         const graph::Hw& kernel, const graph::Hw& stride, const graph::Pads& pad) {
    const memory::desc src = md(spec.srcs[0]);
    const memory::desc dst = md(spec.dsts[0]);
    const auto [extra_b, extra_r] =
        extra_right_pad(spec.srcs[0].shape, spec.dsts[0].shape, kernel, stride, pad);
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst,
                                     {stride.h, stride.w}, {kernel.h, kernel.w}, {0, 0},
                                     {pad.top, pad.left},
                                     {pad.bottom + extra_b, pad.right + extra_r});
    dnnl::pooling_v2_forward::primitive_desc pd(d, make_attr(), engine_);
    k.add({dnnl::pooling_v2_forward(pd), {{DNNL_ARG_SRC, 0, src}, {DNNL_ARG_DST, dst_slot(0), dst}},
           {}, true},
          scratch(pd));
    return pd.impl_info_str();
  }

  std::string build_add(DnnlKernel& k, const KernelSpec& spec) {
    const auto& a = std::get<graph::AddAttrs>(spec.attrs);
    const memory::desc dst = md(spec.dsts[0]);
    const bool int8 = quantised(spec.srcs[0]);
    if (spec.srcs.size() == 2 && !int8) {
      const memory::desc s0 = md(spec.srcs[0]);
      const memory::desc s1 = md(spec.srcs[1]);
      dnnl::binary::desc d(dnnl::algorithm::binary_add, s0, s1, dst);
      dnnl::binary::primitive_desc pd(d, make_attr(a.activation), engine_);
      k.add({dnnl::binary(pd),
             {{DNNL_ARG_SRC_0, 0, s0}, {DNNL_ARG_SRC_1, 1, s1}, {DNNL_ARG_DST, dst_slot(0), dst}},
             {},
             true},
            scratch(pd));
      return pd.impl_info_str();
    }
    std::vector<memory::desc> srcs;
    for (const auto& d : spec.srcs) srcs.push_back(md(d));
    // Quantised: dst = sum (src scale / dst scale) * src, saturated to the destination type.
    std::vector<float> scales;
    for (const auto& d : spec.srcs) scales.push_back(int8 ? d.scale / spec.dsts[0].scale : 1.0f);
    dnnl::sum::primitive_desc pd(dst, scales, srcs, engine_, make_attr());
    DnnlKernel::StepSpec step{dnnl::sum(pd), {{DNNL_ARG_DST, dst_slot(0), dst}}, {}, true};
    for (size_t i = 0; i < srcs.size(); ++i) {
      step.args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), static_cast<int>(i), srcs[i]});
    }
    k.add(std::move(step), scratch(pd));
    // A u8 destination saturates at 0, which is the ReLU already.
    const bool relu_by_saturation =
        a.activation == Activation::kRelu && spec.dsts[0].dtype == DataType::kU8;
    if (a.activation != Activation::kNone && !relu_by_saturation) {
      // In place, in the destination's units (a quantised ReLU6 clips at 6 / scale).
      add_eltwise(k, a.activation, dst, dst_slot(0), dst_slot(0),
                  quantised(spec.dsts[0]) ? kRelu6Max / spec.dsts[0].scale : kRelu6Max);
    }
    return pd.impl_info_str();
  }

  std::string build_pad(DnnlKernel& k, const KernelSpec& spec) {
    // Zero the destination, then copy the overlapping window (negative pads crop).
    const auto& p = std::get<graph::PadAttrs>(spec.attrs).pads;
    const graph::Shape& in = spec.srcs[0].shape;
    const int64_t src_top = std::max<int64_t>(0, -p.top), dst_top = std::max<int64_t>(0, p.top);
    const int64_t src_left = std::max<int64_t>(0, -p.left), dst_left = std::max<int64_t>(0, p.left);
    const int64_t rows = std::min(in[2] - src_top, spec.dsts[0].shape[2] - dst_top);
    const int64_t cols = std::min(in[3] - src_left, spec.dsts[0].shape[3] - dst_left);
    const memory::dims window{in[0], in[1], rows, cols};
    const memory::desc src = md(spec.srcs[0]).submemory_desc(window, {0, 0, src_top, src_left});
    const memory::desc dst = md(spec.dsts[0]).submemory_desc(window, {0, 0, dst_top, dst_left});
    add_reorder(k, src, 0, dst, dst_slot(0), /*zero_dst=*/0);
    return "reorder";
  }

  dnnl::engine engine_;
  dnnl::stream setup_stream_;  // for packing weights at creation
  int streams_created_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace stagecraft::executor
