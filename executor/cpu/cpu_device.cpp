// The CPU as a device: host memory (both kinds: the CPU is the device), the ISA oneDNN uses, the
// layouts its kernels run natively in, the fingerprint of profiles measured on it.
#include "executor/cpu/cpu_device.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <fstream>

#include "common/enum_table.h"
#include "common/strings.h"
#include "executor/backend.h"
#include "executor/cpu/amx.h"
#include "executor/cpu/dnnl_kernel.h"
#include "executor/cpu/host_memory.h"

namespace stagecraft::executor::cpu {

namespace {

using graph::DataType;
using graph::Layout;

// Which convolutions our Winograd kernels take, in the device fingerprint: profiles measured
// before a change (2: 1xK and Kx1 too; 3: small maps in one block split by channels; 4: also
// against oneDNN's AVX-512 kernels where 512-bit FMAs are no faster, cpu::host_fma512_gain; 6:
// Winograd or direct measured per convolution on the machine, cpu::KernelChoices)
// are not reused for plans whose kernels differ or run differently.
constexpr int kWinogradRevision = 6;
// Which kernels the other ops take, in the device fingerprint the same way: bumped when a kernel
// choice changes what a stage costs (1: the host softmax over axes before the last, where oneDNN
// has only its reference kernel; a profile measured with the 77 ms reference softmax made dp
// schedule YOLO11n 1.5x slower than sequential; 2: f32 and bf16 linear layers on oneDNN's matmul
// where it ran faster than its inner product).
constexpr int kKernelsRevision = 2;

// Host memory serves both kinds: the CPU is the device.
class HostBuffer : public OwningBuffer {
 public:
  explicit HostBuffer(const BufferRequest& request)
      : OwningBuffer(request, std::max(request.alignment, kAlignment), [](void* p) { HostFree()(p); }) {
    if (request.alignment == 0 || (request.alignment & (request.alignment - 1)) != 0 ||
        request.alignment > kHugePage) {
      throw BackendError(cat("cpu: cannot align a buffer to ", request.alignment,
                             " bytes (a power of two up to ", kHugePage, ")"));
    }
    data_ = host_allocate(request.bytes, request.alignment).release();
  }
};

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

}  // namespace

CpuDevice::CpuDevice(bool winograd, bool fast) : winograd_(winograd), fast_(winograd && fast) {
  amx_ = settle_amx().why;
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const bool avx512 = isa_has_avx512(isa);
  caps_.compute_types = {DataType::kF32, DataType::kU8, DataType::kI8};
  // bf16 only where the CPU computes it natively: oneDNN's bf16 kernels elsewhere emulate it
  // and run slower than f32.
  if (isa_has_bf16(isa)) caps_.compute_types.push_back(DataType::kBF16);
  // oneDNN's native blocked layout follows the vector width: nChw16c on AVX-512 and nChw8c
  // on AVX2, where nChw16c has only reference convolutions (23.9 s instead of 34 ms on
  // randwire_small) and is left out.
  caps_.layouts = avx512 ? std::vector<Layout>{Layout::kNChw16c, Layout::kNHWC, Layout::kNChw8c,
                                               Layout::kNCHW}
                         : std::vector<Layout>{Layout::kNChw8c, Layout::kNHWC, Layout::kNCHW};
  caps_.streams_share_cores = true;
  caps_.quantised_residuals = true;  // a sum post-op (conv_ops.cpp)
  isa_ = isa_name(isa);
}

std::string CpuDevice::device_fingerprint() const {
  const dnnl::version_t* v = dnnl::version();
  return cat("cpu:", cpu_model(), ":", parallelism(), "threads:onednn-", v->major, ".", v->minor,
             ".", v->patch, ":isa", static_cast<int>(dnnl::get_effective_cpu_isa()), ":kernels-r", kKernelsRevision,
             winograd_ ? cat(":winograd-r", kWinogradRevision, fast_ ? "-fast" : "") : std::string());
}

std::string CpuDevice::description() const {
  const dnnl::version_t* v = dnnl::version();
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA")
                                                      : std::getenv("DNNL_MAX_CPU_ISA");
  return cat("cpu: ", cpu_model(), ", ", parallelism(), " threads, oneDNN ", v->major, ".",
             v->minor, ".", v->patch, ", ISA ", isa_, cap ? cat(" (capped by the environment at ", cap, ")") : "",
             ", default layout ", graph::to_string(preferred_layout(DataType::kF32)),
             " (int8: ", graph::to_string(preferred_layout(DataType::kU8)),
             preferred_layout(DataType::kBF16) != preferred_layout(DataType::kF32)
                 ? cat(", bf16: ", graph::to_string(preferred_layout(DataType::kBF16)))
                 : std::string(),
             ")",
             caps_.computes(DataType::kBF16) ? ", native bf16" : ", no native bf16",
             winograd_ ? (fast_ ? ", fast Winograd tiles" : "") : ", Winograd convolutions off",
             amx_.empty() ? "" : cat("; ", amx_));
}

int CpuDevice::parallelism() const { return omp_get_max_threads(); }

Layout CpuDevice::preferred_layout(DataType compute) const {
  // oneDNN 2.6 has only its reference int8 convolution for blocked activations (~100x slower).
  if (graph::is_int8(compute)) return Layout::kNHWC;
  // AMX's bf16 convolutions (oneDNN 2.6.3's brgconv) take channel-last activations only: in
  // nChw16c 2 of inception_v3's 116 kernels ran on AMX, the rest on AVX512_BF16.
  if (compute == DataType::kBF16 && isa_ == "avx512_core_amx") return Layout::kNHWC;
  return caps_.layouts.front();
}

std::unique_ptr<Buffer> CpuDevice::allocate_buffer(const BufferRequest& request) {
  return std::make_unique<HostBuffer>(request);
}

void CpuDevice::upload(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void CpuDevice::download(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

}  // namespace stagecraft::executor::cpu
