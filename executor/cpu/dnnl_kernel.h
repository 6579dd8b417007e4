#pragma once
// Internal to the CPU backend: oneDNN descriptors and attributes of our tensors, and DnnlKernel,
// a kernel made of oneDNN primitives ("steps") run in order on a stream's worker thread, with
// arguments bound late (sources, destinations, a temporary inside the workspace, constants).
// Only this folder sees oneDNN types.

#include <dnnl.hpp>

#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "executor/backend.h"
#include "executor/cpu/host_memory.h"
#include "executor/kernel_math.h"

namespace stagecraft::executor::cpu {

/// What kernel builders need: the engine, and a stream for packing weights at creation.
struct DnnlContext {
  dnnl::engine engine;
  /// Packs weights (blocking) while kernels are created, on the calling thread with one OpenMP
  /// thread: GNU OpenMP keeps a pool of workers per thread that ever opened a parallel region,
  /// and once the process holds more of them than there are cores, every pool's workers stop
  /// spinning between regions and sleep — 8-30 us more per kernel (a third of mobilenet_v3_small's
  /// run). Kernels run on the streams' workers; the host thread must not hold a pool too.
  dnnl::stream setup;
  /// Whether eligible 3x3 convolutions may run as Winograd (BackendConfig::winograd).
  bool winograd = false;
  /// Whether they may use the larger, less accurate tiles (BackendConfig::fast_winograd).
  bool fast_winograd = false;
  /// Winograd or direct, measured per convolution signature on this machine (null: decide by the
  /// FMA-width rule alone, as when host_fma512_gain is forced).
  class KernelChoices* choices = nullptr;
};

// ---- Descriptors ---------------------------------------------------------------------------

dnnl::memory::data_type dnnl_type(graph::DataType type);
/// The oneDNN tag of a layout; undef for layouts the CPU does not have.
dnnl::memory::format_tag dnnl_tag(graph::Layout layout);
dnnl::memory::dims dims_of(const graph::Shape& shape);
/// The oneDNN memory descriptor of a tensor.
dnnl::memory::desc md(const graph::TensorDesc& d);
/// Row-major descriptor of a shape (NCHW for rank 4, NC for rank 2; for reorders).
dnnl::memory::desc plain_md(const graph::Shape& shape, graph::DataType type);
bool quantised(const graph::TensorDesc& d);
/// The element type a convolution's or linear layer's packed weights take for input `src`: s8
/// for quantised inputs, bf16 for bf16 inputs (oneDNN's bf16 kernels read bf16 weights and
/// accumulate in f32), else f32.
dnnl::memory::data_type weight_type(const graph::TensorDesc& src);

/// Whether `isa` (oneDNN's effective ISA: the CPU's, capped by DNNL_MAX_CPU_ISA) includes
/// avx512_core. The ISA values are bit sets, not an order: avx2_vnni (0x407, Intel's AVX2-only
/// cores with AVX-VNNI) is numerically above avx512_core (0x27) and has no AVX-512.
bool isa_has_avx512(dnnl::cpu_isa isa);
/// Whether `isa` multiplies int8 with VNNI (avx512_core_vnni and above, avx2_vnni).
bool isa_has_vnni(dnnl::cpu_isa isa);
/// The largest int8 weight magnitude a kernel reading `src` takes on this process's effective
/// ISA: 63 for a u8 source without VNNI (kInt8WeightMaxWithoutVnni), else 127.
float int8_weight_max(const graph::TensorDesc& src);
/// Whether `isa` includes native bf16 arithmetic (avx512_core_bf16: AVX512_BF16; AMX-BF16 is
/// above it).
bool isa_has_bf16(dnnl::cpu_isa isa);

// ---- Attributes ----------------------------------------------------------------------------

/// One oneDNN eltwise operation.
struct EltwiseStep {
  dnnl::algorithm alg;
  float alpha, beta;
};
/// The eltwise operations computing `act` (hard sigmoid takes two); ReLU6 clips at `relu6_max`.
std::vector<EltwiseStep> eltwise_steps(graph::Activation act, float relu6_max = kRelu6Max);

/// `steps` with every run of consecutive eltwise_linear steps folded into one (a2 (a1 x + b1) + b2
/// = a1 a2 x + a2 b1 + b2): oneDNN 2.6.3's jit binary kernel ("jit:uni") computes two linear
/// post-ops in a row wrongly (c - x with a fused hard sigmoid was 0 where it should be 0.5).
std::vector<EltwiseStep> fold_linear_steps(const std::vector<EltwiseStep>& steps);
/// Appends `steps` as eltwise post-ops (linear runs folded: fold_linear_steps).
void append_steps(dnnl::post_ops& ops, const std::vector<EltwiseStep>& steps);
/// Appends `act` as eltwise post-ops; ReLU6 clips at `relu6_max` (the bound in the
/// destination's units).
void add_activation(dnnl::post_ops& ops, graph::Activation act, float relu6_max = kRelu6Max);
/// Attributes with a user scratchpad and `act` as a post-op.
dnnl::primitive_attr make_attr(graph::Activation act = graph::Activation::kNone);
/// Attributes of an int8 conv or linear layer: per-channel output scales and the activation.
/// `sum_scale` not 0: a sum post-op before the activation, dst = act(epilogue + sum_scale * dst),
/// the destination holding an 8-bit residual of type `sum_type` (a quantised residual: its scale
/// over the destination's).
dnnl::primitive_attr make_quantised_attr(graph::Activation act, const Requantisation& r, float sum_scale = 0.0f,
                                         dnnl::memory::data_type sum_type = dnnl::memory::data_type::undef);
/// Reorder attributes converting between element types and scales (real values kept).
dnnl::primitive_attr rescale_attr(const graph::TensorDesc& src, const graph::TensorDesc& dst);

/// Whether `impl` (oneDNN's implementation name: "ref:any", "gemm:ref", "jit:avx2", ...) names one
/// of oneDNN's slow reference implementations. The one place that reads the names for this.
bool is_reference(const std::string& impl);

/// Advances `pd` past the implementations whose name contains `marker` ("amx": oneDNN's next
/// candidate that runs without AMX). False when only such or reference ones are left. Only while
/// the operation descriptor `pd` was made from lives (oneDNN 2.x's iterator keeps a pointer to it)
/// and on a fresh `pd` (copies share the iterator).
template <class Pd>
bool skip_implementations(Pd& pd, const std::string& marker) {
  while (std::string(pd.impl_info_str()).find(marker) != std::string::npos) {
    if (!pd.next_impl()) return false;
  }
  return !is_reference(pd.impl_info_str());
}

/// Native, or reference-only when `impl` (oneDNN's implementation name) is a reference one.
/// `what` describes the op for the message ("a f32 convolution reading nChw16c").
Support implementation_support(const std::string& impl, const std::string& what);

// ---- Descriptions ---------------------------------------------------------------------------

/// A family's description of a kernel whose implementation is `impl` (native or reference-only by
/// implementation_support; `what` as there), with `workspace` bytes (or unknown) and the `state`
/// its builder reads.
KernelDesc described(const std::string& impl, const std::string& what,
                     size_t workspace = KernelDesc::kUnknownWorkspace,
                     std::shared_ptr<const KernelDesc::State> state = nullptr);

/// A description's state that is one primitive descriptor: what the builder creates its
/// primitive from.
template <class Pd>
struct PdState : KernelDesc::State {
  explicit PdState(Pd p) : pd(std::move(p)) {}
  Pd pd;  ///< the primitive descriptor (never empty)
};

/// Throws BackendError: `desc` holds no state a builder of `spec` can read (it was not made by
/// the CPU backend's supports() for a spec of this kind).
[[noreturn]] void foreign_desc(const KernelSpec& spec);

/// The state of type T that `desc` holds; throws BackendError (foreign_desc) when it holds none.
template <class T>
const T& state_of(const KernelDesc& desc, const KernelSpec& spec) {
  const T* state = desc.state_as<T>();
  if (state == nullptr) foreign_desc(spec);
  return *state;
}

/// Sets the OpenMP thread count of the calling thread for the scope (primitive creation reads it).
class ThreadScope {
 public:
  explicit ThreadScope(int threads);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int saved_;
};

// ---- Constants ------------------------------------------------------------------------------

/// A constant tensor: a oneDNN memory over host memory it keeps alive (host_memory.h: large
/// blocks on huge pages, which oneDNN's own allocations are not).
struct Packed {
  dnnl::memory memory;
  std::shared_ptr<void> storage;
};

/// A new memory of layout `desc` on host_allocate's memory (zeroed).
Packed allocate_packed(const DnnlContext& ctx, const dnnl::memory::desc& desc);

/// Copies `data` (in the plain layout `user`) into a new memory of layout `packed`.
template <class T>
Packed pack(DnnlContext& ctx, const dnnl::memory::desc& user, const dnnl::memory::desc& packed,
            const std::vector<T>& data) {
  dnnl::memory src(user, ctx.engine, const_cast<T*>(data.data()));
  Packed dst = allocate_packed(ctx, packed);
  const ThreadScope one_thread(1);  // see DnnlContext::setup
  dnnl::reorder(src, dst.memory).execute(ctx.setup, src, dst.memory);
  ctx.setup.wait();
  return dst;
}

/// A new 1-D f32 memory holding `data`.
dnnl::memory copy_vector(const dnnl::engine& engine, const std::vector<float>& data);

// ---- Kernels --------------------------------------------------------------------------------

/// The destination slot `i` in an ArgSpec (sources are slots 0, 1, ...).
constexpr int dst_slot(int i) { return -1 - i; }

/// A kernel made of oneDNN primitives run in order on the stream's worker. Arguments are
/// described by (oneDNN argument, slot) pairs resolved at bind time.
class DnnlKernel : public Kernel {
 public:
  /// The kernel's own temporary tensor (inside its workspace, after the scratchpad).
  static constexpr int kTemp = INT_MIN;
  struct ArgSpec {
    int arg;                  ///< DNNL_ARG_*
    int slot;                 ///< >= 0: source slot; dst_slot(i): destination i; kTemp
    dnnl::memory::desc desc;  ///< how the step sees the tensor (may be a sub-memory)
  };
  /// A step run on the worker instead of a oneDNN primitive (inside the kernel's OpenMP thread
  /// count); it gets the data pointers of its slots, in the order given to add_host().
  using HostFunction = std::function<void(const std::vector<void*>& data)>;
  struct StepSpec {
    StepSpec(dnnl::primitive p, std::vector<ArgSpec> a,
             std::unordered_map<int, dnnl::memory> c = {}, bool scratchpad = true,
             size_t zero = SIZE_MAX)
        : primitive(std::move(p)), args(std::move(a)), constants(std::move(c)),
          uses_scratchpad(scratchpad), zero_dst(zero) {}
    dnnl::primitive primitive;
    std::vector<ArgSpec> args;
    std::unordered_map<int, dnnl::memory> constants;  ///< packed weights, bias, statistics
    std::vector<std::shared_ptr<void>> storage;        ///< what constants' memories point into
    /// Binds `arg` to a constant and keeps its storage.
    void add_constant(int arg, Packed c) {
      constants.emplace(arg, std::move(c.memory));
      if (c.storage) storage.push_back(std::move(c.storage));
    }
    bool uses_scratchpad = true;
    size_t zero_dst = SIZE_MAX;  ///< when set: zero this destination slot before the step
    HostFunction host;            ///< when set: run instead of `primitive`
    std::vector<int> host_slots;  ///< the slots whose data `host` gets
  };

  DnnlKernel(dnnl::engine engine, int threads) : engine_(std::move(engine)), threads_(threads) {}

  void set_implementation(std::string impl) { impl_ = std::move(impl); }
  /// Appends a step that needs `scratchpad` bytes of scratch memory; `impl` names its oneDNN
  /// implementation (for step_implementation()).
  void add(StepSpec step, size_t scratchpad, std::string impl = "");
  /// Appends a host step calling `fn` with the data pointers of `slots` (source slots,
  /// dst_slot(i), kTemp).
  void add_host(HostFunction fn, std::vector<int> slots, std::string impl = "");
  /// Appends a host step that computes destination 0 from source 0, both f32: fn(src, dst).
  /// Returns `impl`, the name a kernel builder answers with.
  std::string add_host_f32(std::function<void(const float* src, float* dst)> fn, std::string impl);
  /// The implementation name given with step `i` ("" when none was).
  const std::string& step_implementation(size_t i) const { return impls_.at(i); }
  /// Reserves a temporary tensor inside the workspace (after the scratchpad).
  void reserve_temp(size_t bytes) { temp_ = std::max(temp_, bytes); }
  /// Appends a reorder from `src` (slot `src_slot`) to `dst` (slot `dst_slot_index`).
  void add_reorder(DnnlContext& ctx, const dnnl::memory::desc& src, int src_slot,
                   const dnnl::memory::desc& dst, int dst_slot_index, size_t zero_dst = SIZE_MAX,
                   const dnnl::primitive_attr& attr = make_attr());
  /// Appends an eltwise step computing `act` from slot `src_slot` into `dst_slot_index`.
  void add_eltwise(DnnlContext& ctx, graph::Activation act, const dnnl::memory::desc& desc,
                   int src_slot, int dst_slot_index, float relu6_max = kRelu6Max);
  /// Appends one eltwise step computing `steps` (the first as the primitive, the rest as
  /// post-ops) from slot `src_slot` into `dst_slot_index`.
  void add_eltwise_steps(DnnlContext& ctx, const std::vector<EltwiseStep>& steps,
                         const dnnl::memory::desc& desc, int src_slot, int dst_slot_index);
  /// Appends the eltwise step of `pd` (eltwise_pd) from slot `src_slot` into `dst_slot_index`.
  void add_eltwise(const dnnl::eltwise_forward::primitive_desc& pd, int src_slot, int dst_slot_index);

  size_t workspace_bytes() const override { return scratch_ + temp_; }
  std::string implementation() const override { return impl_; }
  void bind(const std::vector<TensorRef>& srcs, const std::vector<TensorRef>& dsts,
            void* workspace) override;
  void launch(Stream& stream) override;

 private:
  struct Step {
    dnnl::primitive primitive;
    std::unordered_map<int, dnnl::memory> args;
    std::function<void()> host;  // bound host step (then `primitive` is empty)
  };
  void* slot_data(int slot, const std::vector<TensorRef>& srcs, const std::vector<TensorRef>& dsts,
                  void* workspace) const;
  struct Zero {
    size_t before_step;
    void* data;
    size_t bytes;
  };
  void run(dnnl::stream& stream);

  dnnl::engine engine_;
  int threads_;
  std::string impl_;
  size_t scratch_ = 0;  // scratchpad bytes (aligned); the temporary follows it
  size_t temp_ = 0;
  std::vector<StepSpec> specs_;
  std::vector<std::string> impls_;  // per step
  std::vector<Step> steps_;
  std::vector<Zero> zero_;
};

/// Appends the step of a conv or linear primitive reading source slot 0 and writing destination 0,
/// with its weights packed from `w_user_f32` (plain oihw/goihw/oi f32) into `w_packed`: as given,
/// or quantised per output channel (`qw`, with `quant` giving the bias in accumulator units).
void add_weighted_step(DnnlKernel& kernel, DnnlContext& ctx, const KernelSpec& spec,
                       dnnl::primitive primitive, const dnnl::memory::desc& w_user_f32,
                       const dnnl::memory::desc& w_packed, size_t scratchpad, bool bias,
                       const Requantisation* quant, const QuantisedWeights* qw,
                       std::vector<DnnlKernel::ArgSpec> extra_args = {});

/// Scratchpad bytes of a primitive descriptor.
template <class Pd>
size_t scratch(const Pd& pd) {
  return pd.scratchpad_desc().get_size();
}

/// The workspace a DnnlKernel reserves for a step needing `scratchpad` bytes (rounded up to
/// kAlignment); a kernel's workspace is the largest of its steps' (and its temporary).
size_t step_workspace(size_t scratchpad);

/// The workspace of a step built from `pd`.
template <class Pd>
size_t workspace_of(const Pd& pd) {
  return step_workspace(scratch(pd));
}

/// The eltwise primitive descriptor computing `steps` (the first as the primitive, the rest as
/// post-ops) on tensors of `desc`; `steps` is not empty.
dnnl::eltwise_forward::primitive_desc eltwise_pd(const DnnlContext& ctx,
                                                 const std::vector<EltwiseStep>& steps,
                                                 const dnnl::memory::desc& desc);

}  // namespace stagecraft::executor::cpu
