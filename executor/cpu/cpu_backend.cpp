// The CPU backend: oneDNN primitives by op family (ops.h), worker-thread streams, user scratchpads.
#include "executor/cpu/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <mutex>

#include "common/enum_table.h"
#include "common/strings.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/cpu/host_memory.h"
#include "executor/cpu/ops.h"
#include "executor/op_rules.h"

namespace stagecraft::executor {

namespace {

// Which convolutions our Winograd kernels take, in the device fingerprint: profiles measured
// before a change (2: 1xK and Kx1 too; 3: small maps in one block split by channels; 4: also
// against oneDNN's AVX-512 kernels where 512-bit FMAs are no faster, cpu::host_fma512_gain)
// are not reused for plans whose kernels differ or run differently.
constexpr int kWinogradRevision = 4;

using cpu::CpuEvent;
using cpu::CpuStream;
using cpu::DnnlContext;
using cpu::DnnlKernel;
using graph::DataType;
using graph::Layout;
using graph::TensorDesc;

constexpr int kPrimitiveCacheCapacity = 4096;  // stage profiling creates many primitives

// Host memory serves both kinds: the CPU is the device.
class HostBuffer : public OwningBuffer {
 public:
  explicit HostBuffer(const BufferRequest& request)
      : OwningBuffer(request, std::max(request.alignment, cpu::kAlignment),
                     [](void* p) { cpu::HostFree()(p); }) {
    if (request.alignment == 0 || (request.alignment & (request.alignment - 1)) != 0 ||
        request.alignment > cpu::kHugePage) {
      throw BackendError(cat("cpu: cannot align a buffer to ", request.alignment,
                             " bytes (a power of two up to ", cpu::kHugePage, ")"));
    }
    data_ = cpu::host_allocate(request.bytes, request.alignment).release();
  }
};

// The AMX int8 kernels of oneDNN 2.6.3 (the inner product of a quantised linear layer, for one)
// died with SIGILL on a VM whose CPU advertises AMX, even after Linux granted the tile registers.
// Cap oneDNN below AMX unless the user chose an ISA with ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA.
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

constexpr Named<dnnl::cpu_isa> kIsas[] = {{dnnl::cpu_isa::sse41, "sse41"},
                                          {dnnl::cpu_isa::avx, "avx"},
                                          {dnnl::cpu_isa::avx2, "avx2"},
                                          {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},
                                          {dnnl::cpu_isa::avx512_core, "avx512_core"},
                                          {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
                                          {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
                                          {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"}};

std::string isa_name(dnnl::cpu_isa isa) {
  const auto* e = entry_for(kIsas, isa);
  return e != nullptr ? std::string(e->name) : cat("isa", static_cast<int>(isa));
}

std::string cpu_model() {
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

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& config)
      : ctx_{dnnl::engine(dnnl::engine::kind::cpu, 0), {}, config.winograd} {
    cap_isa_below_amx();
    dnnl::set_primitive_cache_capacity(kPrimitiveCacheCapacity);
    ctx_.setup = dnnl::stream(ctx_.engine);
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    const bool avx512 = cpu::isa_has_avx512(isa);
    caps_.compute_types = {DataType::kF32, DataType::kU8, DataType::kI8};
    // oneDNN's native blocked layout follows the vector width: nChw16c on AVX-512 and nChw8c
    // on AVX2, where nChw16c has only reference convolutions (23.9 s instead of 34 ms on
    // randwire_small) and is left out.
    caps_.layouts = avx512 ? std::vector<Layout>{Layout::kNChw16c, Layout::kNHWC, Layout::kNChw8c,
                                                 Layout::kNCHW}
                           : std::vector<Layout>{Layout::kNChw8c, Layout::kNHWC, Layout::kNCHW};
    caps_.streams_share_cores = true;
    isa_ = isa_name(isa);
  }

  std::string name() const override { return "cpu"; }

  std::string device_fingerprint() const override {
    const dnnl::version_t* v = dnnl::version();
    return cat("cpu:", cpu_model(), ":", parallelism(), "threads:onednn-", v->major, ".", v->minor,
               ".", v->patch, ":isa", static_cast<int>(dnnl::get_effective_cpu_isa()),
               ctx_.winograd ? cat(":winograd-r", kWinogradRevision) : std::string());
  }

  std::string description() const override {
    const dnnl::version_t* v = dnnl::version();
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA")
                                                        : std::getenv("DNNL_MAX_CPU_ISA");
    return cat("cpu: ", cpu_model(), ", ", parallelism(), " threads, oneDNN ", v->major, ".",
               v->minor, ".", v->patch, ", ISA ", isa_, cap ? cat(" (capped by the environment at ", cap, ")") : "",
               ", default layout ", graph::to_string(preferred_layout(DataType::kF32)),
               " (int8: ", graph::to_string(preferred_layout(DataType::kU8)), ")",
               ctx_.winograd ? "" : ", Winograd convolutions off");
  }

  const Capabilities& capabilities() const override { return caps_; }

  int parallelism() const override { return omp_get_max_threads(); }

  Layout preferred_layout(DataType compute) const override {
    // oneDNN 2.6 has only its reference int8 convolution for blocked activations (~100x slower).
    if (graph::is_int8(compute)) return Layout::kNHWC;
    return caps_.layouts.front();
  }

  std::unique_ptr<Buffer> allocate_buffer(const BufferRequest& request) override {
    return std::make_unique<HostBuffer>(request);
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  std::unique_ptr<Stream> create_stream() override {
    return std::make_unique<CpuStream>(ctx_.engine, streams_created_++);
  }
  std::unique_ptr<Stream> create_caller_stream() override {
    return std::make_unique<CpuStream>(ctx_.engine, streams_created_++, /*on_caller=*/true);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }

  Support supports(const KernelSpec& spec) const override {
    for (const auto* list : {&spec.srcs, &spec.dsts}) {
      for (const TensorDesc& d : *list) {
        if (d.dtype != DataType::kF32 && !cpu::quantised(d)) {
          return Support::unsupported(
              SupportReason::kDataType,
              cat("the CPU backend runs f32 and quantised u8/i8 tensors (got ",
                  graph::to_string(d.dtype), "); f16 runs on the CUDA backend"));
        }
        if (cpu::dnnl_tag(d.layout) == dnnl::memory::format_tag::undef) {
          return Support::unsupported(SupportReason::kLayout,
                                      cat("layout ", graph::to_string(d.layout), " is not available on the CPU"));
        }
      }
    }
    if (has_int8(spec)) {
      if (Support s = quantised_support(spec); !s.runnable()) return s;
    }
    if (Support s = weights_support(spec); !s.runnable()) return s;
    const ThreadScope scope(std::max(1, spec.threads));
    try {
      return cpu::family_of(spec.kind).check(spec, ctx_);
    } catch (const dnnl::error& e) {
      return Support::unsupported(SupportReason::kLibrary, cat("oneDNN refused it: ", e.what()));
    }
  }

  std::unique_ptr<Kernel> create_kernel(const KernelSpec& spec) override {
    if (Support s = supports(spec); !s.runnable()) throw unsupported("cpu", spec, s);
    const ThreadScope scope(std::max(1, spec.threads));
    try {
      auto kernel = std::make_unique<DnnlKernel>(ctx_.engine, std::max(1, spec.threads));
      kernel->set_implementation(cpu::family_of(spec.kind).build(*kernel, spec, ctx_));
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

  mutable DnnlContext ctx_;  // checks create primitive descriptors; nothing observable changes
  Capabilities caps_;
  std::string isa_;
  int streams_created_ = 0;
};

}  // namespace

namespace cpu {

const OpFamily& family_of(graph::OpKind kind) {
  static const OpFamily* const kFamilies[] = {&kConvolutionFamily, &kLinearFamily, &kPoolingFamily,
                                              &kElementwiseFamily, &kBinaryFamily,
                                              &kDataMovementFamily, &kResizeFamily,
                                              &kNormalisationFamily};
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
