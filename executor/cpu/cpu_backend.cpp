// The CPU backend: oneDNN primitives by op family (ops.h), worker-thread streams, user scratchpads;
// the device (memory, ISA, layouts) is cpu_device.cpp's.
#include "executor/cpu/cpu_backend.h"

#include <algorithm>
#include <iostream>
#include <mutex>

#include "common/strings.h"
#include "executor/cpu/cpu_device.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/cpu/kernel_choices.h"
#include "executor/cpu/ops.h"
#include "graph/bf16.h"
#include "executor/op_rules.h"

namespace stagecraft::executor {

namespace {

using cpu::CpuEvent;
using cpu::CpuStream;
using cpu::DnnlContext;
using cpu::DnnlKernel;
using graph::DataType;
using graph::TensorDesc;

constexpr int kPrimitiveCacheCapacity = 4096;  // stage profiling creates many primitives

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& config)
      : device_(config.winograd, config.fast_winograd),
        ctx_{dnnl::engine(dnnl::engine::kind::cpu, 0), {}, config.winograd, config.fast_winograd} {
    dnnl::set_primitive_cache_capacity(kPrimitiveCacheCapacity);
    ctx_.setup = dnnl::stream(ctx_.engine);
    if (config.measure_kernels) {
      choices_ = std::make_unique<cpu::KernelChoices>(
          config.cache_dir.empty() ? ValueCache::default_dir() : config.cache_dir, device_.device_fingerprint());
      ctx_.choices = choices_.get();
    }
  }

  Device& device() override { return device_; }
  const Device& device() const override { return device_; }

  std::unique_ptr<Stream> create_stream() override {
    return std::make_unique<CpuStream>(ctx_.engine, streams_created_++, this);
  }
  std::unique_ptr<Stream> create_caller_stream() override {
    return std::make_unique<CpuStream>(ctx_.engine, streams_created_++, this, /*on_caller=*/true);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }

  std::unique_ptr<Kernel> build_kernel(const KernelSpec& spec, const KernelDesc& desc) override {
    const ThreadScope scope(std::max(1, spec.threads));
    try {
      auto kernel = std::make_unique<DnnlKernel>(ctx_.engine, std::max(1, spec.threads));
      kernel->set_implementation(cpu::family_of(spec.kind).build(*kernel, spec, desc, ctx_));
      return kernel;
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
    auto kernel = std::make_unique<DnnlKernel>(ctx_.engine, 1);
    try {
      kernel->add_reorder(ctx_, cpu::md(src), 0, cpu::md(dst), cpu::dst_slot(0), SIZE_MAX,
                          cpu::rescale_attr(src, dst));
    } catch (const dnnl::error& e) {
      throw BackendError(cat("cpu cannot convert ", src.describe(), " to ", dst.describe(),
                             ": oneDNN: ", e.what()));
    }
    kernel->set_implementation("reorder");
    return kernel;
  }

 private:
  using ThreadScope = cpu::ThreadScope;

  // The generic checks (element types, layouts, the int8 contract, weights), then the family's.
  KernelDesc describe(const KernelSpec& spec) const override {
    for (const auto* list : {&spec.srcs, &spec.dsts}) {
      for (const TensorDesc& d : *list) {
        if (d.dtype == DataType::kBF16) {
          // bf16 only on a CPU with native bf16, and only in the kinds graph::to_bf16 gives it
          // (their kernels are oneDNN primitives or byte moves; our host loops read floats).
          if (!device_.capabilities().computes(DataType::kBF16)) {
            return Support::unsupported(SupportReason::kDataType,
                                        cat("this CPU has no native bf16 (oneDNN ISA ", device_.isa(),
                                            "; bf16 needs AVX512_BF16 or AMX)"));
          }
          if (graph::bf16_role(spec.kind, spec.attrs) == graph::Bf16Role::kF32) {
            return Support::unsupported(SupportReason::kDataType,
                                        cat(graph::to_string(spec.kind), " runs in f32, not bf16"));
          }
        } else if (d.dtype != DataType::kF32 && !cpu::quantised(d)) {
          return Support::unsupported(
              SupportReason::kDataType,
              cat("the CPU backend runs f32, bf16 and quantised u8/i8 tensors (got ",
                  graph::to_string(d.dtype), "); f16 runs on the CUDA backend"));
        }
        if (d.layout != graph::Layout::kRowMajor && cpu::dnnl_tag(d.layout) == dnnl::memory::format_tag::undef) {
          return Support::unsupported(SupportReason::kLayout,
                                      cat("layout ", graph::to_string(d.layout), " is not available on the CPU"));
        }
      }
    }
    if (has_int8(spec)) {
      if (Support s = quantised_support(spec); !s.runnable()) return s;
    }
    if (Support s = weights_support(spec); !s.runnable()) return s;
    // Primitive descriptors are sized for the threads the kernel runs on (create_kernel builds
    // from them under the same count).
    const ThreadScope scope(std::max(1, spec.threads));
    try {
      return cpu::family_of(spec.kind).check(spec, ctx_);
    } catch (const dnnl::error& e) {  // descriptors oneDNN finds invalid
      return Support::unsupported(SupportReason::kLibrary, cat("oneDNN refused it: ", e.what()));
    }
  }

  cpu::CpuDevice device_;    // first: it caps oneDNN's ISA before any primitive exists
  mutable DnnlContext ctx_;  // checks create primitive descriptors; nothing observable changes
  std::unique_ptr<cpu::KernelChoices> choices_;  // Winograd or direct, AMX or not: measured (ctx_.choices)
  int streams_created_ = 0;
};

}  // namespace

namespace cpu {

const OpFamily& family_of(graph::OpKind kind) {
  static const OpFamily* const kFamilies[] = {&kConvolutionFamily, &kLinearFamily, &kPoolingFamily,
                                              &kElementwiseFamily, &kBinaryFamily,
                                              &kDataMovementFamily, &kResizeFamily,
                                              &kNormalisationFamily, &kRearrangeFamily,
                                              &kReductionFamily, &kTensorFamily, &kUnaryFamily,
                                              &kDeconvolutionFamily, &kWhereFamily,
                                              &kGridSampleFamily, &kPoolNdFamily, &kIndexFamily,
                                              &kResizeNdFamily};
  for (const OpFamily* f : kFamilies) {
    for (graph::OpKind k : f->kinds)
      if (k == kind) return *f;
  }
  throw BackendError(cat("cpu: no kernel family builds op kind ", graph::to_string(kind)));
}

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend(const BackendConfig& config) {
  // The CPU backend has no use for the CUDA settings: a request for TF32 is a mistake, a changed
  // workspace limit is said once and ignored. (cache_dir holds the profile caches the caller
  // keeps; the CPU backend caches nothing itself.)
  if (config.tf32) {
    throw BackendError("TF32 is a CUDA setting: --tf32 needs --backend cuda");
  }
  if (config.workspace_limit != BackendConfig{}.workspace_limit) {
    static std::once_flag once;
    std::call_once(once, [] {
      std::cerr << "stagecraft: warning: the CPU backend ignores the convolution workspace limit "
                   "(a CUDA setting)\n";
    });
  }
  return std::make_unique<CpuBackend>(config);
}

}  // namespace stagecraft::executor
